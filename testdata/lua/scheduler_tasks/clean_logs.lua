-- A task file for scheduler_spec.lua's load test (seed 001's declarative tasks).
return {
	name = "clean_logs",
	expression = "daily:03:00",
	timezone = "Asia/Shanghai",
	handle = function() end,
}
