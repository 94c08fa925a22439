-- A task file for scheduler_spec.lua's load test: runs every 20 ms and
-- counts its runs in the global table the spec reads.
return {
	name = "spec_tick",
	expression = "every:20ms",
	max_retries = 0,
	handle = function() SPEC_TICKS = (SPEC_TICKS or 0) + 1 end,
}
