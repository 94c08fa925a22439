-- Runtime basics: tasks, sleep, spawn, yield-safe pcall, errors.
local shield = require("shield")

-- wait_for sleeps in small steps until cond() holds or ms pass: a loaded
-- machine may run a 20 ms timer after a 60 ms one, so the specs wait for
-- what they check instead of assuming which timer comes first.
local function wait_for(cond, ms)
	local deadline = shield.now_ms() + (ms or 5000)
	while not cond() do
		if shield.now_ms() > deadline then return false end
		shield.sleep(5)
	end
	return true
end

describe("shield runtime", function()
	it("sleeps without blocking other tasks", function()
		local order = {}
		shield.spawn(function() shield.sleep(20); order[#order + 1] = "spawned" end)
		order[#order + 1] = "main" -- the spawned task is asleep, not blocking this one
		assert.is_true(wait_for(function() return #order == 2 end))
		assert.are.same({ "main", "spawned" }, order)
	end)

	it("passes arguments to spawned tasks", function()
		local got
		shield.spawn(function(a, b) got = a + b end, 2, 3)
		assert.is_true(wait_for(function() return got ~= nil end))
		assert.are.equal(5, got)
	end)

	it("gives now_ms in Unix milliseconds", function()
		local now = shield.now_ms()
		assert.is_number(now)
		assert.is_true(math.abs(now / 1000 - os.time()) < 5)
	end)

	it("names the owner of the running task", function()
		local me = shield.owner()
		local other
		shield.spawn(function() other = shield.owner() end)
		assert.is_true(wait_for(function() return other ~= nil end))
		assert.truthy(me:match(":coroutine%-%x+%-%d+$"))
		assert.are_not.equal(me, other)
	end)

	it("lets pcall catch errors around blocking calls", function()
		local ok, err = pcall(function() shield.sleep(1); error("boom") end)
		assert.is_false(ok)
		assert.truthy(err:find("boom"))
		local ok2, v = pcall(function() shield.sleep(1); return "value" end)
		assert.is_true(ok2)
		assert.are.equal("value", v)
	end)

	it("supports has_error around a blocking call", function()
		assert.has_error(function() shield.sleep(1); error("late", 0) end, "late")
		assert.has_no_error(function() shield.sleep(1) end)
	end)

	it("rejects bad arguments with the call's name", function()
		assert.error_matches(function() shield.sleep("soon") end,
			"shield: bad argument #1 to 'sleep' %(number expected, got string%)")
		assert.error_matches(function() shield.spawn() end, "bad argument #1 to 'spawn'")
	end)

	it("refuses to block inside a metamethod instead of corrupting the state", function()
		local t = setmetatable({}, { __index = function() shield.sleep(1) end })
		assert.error_matches(function() return t.x end, "shield.sleep: cannot block here")
	end)

	it("refuses to block inside a table.sort comparator", function()
		assert.error_matches(function()
			table.sort({ 3, 1, 2 }, function(a, b) shield.sleep(1); return a < b end)
		end, "cannot block here")
	end)

	it("lets coroutines created by scripts block inside", function()
		local gen = coroutine.wrap(function()
			for i = 1, 2 do shield.sleep(1); coroutine.yield(i) end
		end)
		assert.are.equal(1, gen())
		assert.are.equal(2, gen())
	end)

	it("rejects log calls without a message or with non-table fields", function()
		-- (what a log call writes is checked by the Go tests, which see the log)
		assert.error_matches(function() shield.log.info(nil) end, "bad argument #1 to 'info' %(message expected")
		assert.error_matches(function() shield.log.info("m", 5) end, "bad argument #2 to 'info'")
	end)
end)
