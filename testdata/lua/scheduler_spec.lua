-- shield.scheduler(): cron, interval and one-shot tasks, control, events,
-- task files. Runs on every backend (memory, Redis, Cluster, Sentinel); the
-- distributed cases share their tasks through the backend's store.
local shield = require("shield")
local s = shield.scheduler()

local run = tostring(shield.now_ms()) .. tostring(math.random(1e9))
local function name(n) return "spec:" .. run .. ":" .. n end

local function wait_for(cond, ms)
	local deadline = shield.now_ms() + (ms or 5000)
	while not cond() do
		if shield.now_ms() > deadline then return false end
		shield.sleep(5)
	end
	return true
end

local here = debug.getinfo(1, "S").source:gsub("^@", ""):match("^(.*)/[^/]*$") or "."

for _, distributed in ipairs({ false, true }) do
	local mode = distributed and "distributed" or "local"
	local function opts(o)
		o = o or {}
		o.distributed = distributed
		return o
	end

	describe(mode .. " interval task", function()
		it("runs every firing as a task, on the interval's grid, and counts them", function()
			local n = name(mode .. ":tick")
			local fired, started = {}, {}
			local t = s:interval(n, 30, function(info)
				started[#started + 1] = shield.now_ms()
				shield.sleep(1) -- a run may block
				fired[#fired + 1] = info.scheduled
				assert(info.task == n and info.attempt == 1 and info.manual == false)
			end, opts())
			assert.are.equal(n, t:name())
			assert.are.equal("30", t:schedule())
			assert.are.equal("active", t:status())
			-- the first firing may come within 30 ms, while these reads wait on
			-- the store: a run is in started before its finish is recorded, so
			-- with none started, none can be counted
			local last, count = t:last_run(), t:run_count()
			if #started == 0 then
				assert.is_nil(last)
				assert.are.equal(0, count)
			end
			assert.is_true(wait_for(function() return #fired >= 3 end))
			for i = 2, #fired do
				assert.are.equal(0, (fired[i] - fired[1]) % 30, "fire times off the grid")
				assert.is_true(fired[i] > fired[i - 1])
			end
			for i = 1, #fired do
				assert.is_true(started[i] >= fired[i], "a run started before its fire time")
			end
			assert.is_true(wait_for(function() return s:get(n):run_count() >= 3 end))
			local info = s:get(n):info()
			assert.are.equal(distributed, info.distributed)
			assert.is_true(info.last_run >= fired[1])
			assert.is_true(info.next_run > info.last_run)
			assert.is_true(s:remove(n))
			local gone, why = s:get(n)
			assert.is_nil(gone)
			assert.are.equal("not_found", why)
		end)

		it("pauses, resumes and triggers", function()
			local n = name(mode .. ":ctl")
			local runs, manual, latest = 0, 0, 0
			s:interval(n, 20, function(info)
				runs = runs + 1
				if info.manual then
					manual = manual + 1
				else
					latest = math.max(latest, info.scheduled)
				end
			end, opts())
			assert.is_true(wait_for(function() return runs >= 1 end))
			assert.is_true(s:pause(n))
			local paused_at = shield.now_ms()
			assert.are.equal("paused", s:get(n):status())
			assert.is_nil(s:get(n):next_run())
			shield.sleep(130)
			-- Only a firing claimed before the pause (up to 70 ms ahead of
			-- its time, on Redis) may still have run, however late its run
			-- started on a busy machine.
			assert.is_true(latest <= paused_at + 70, "a paused task ran")
			local frozen = runs
			assert.is_true(s:trigger(n))
			assert.is_true(wait_for(function() return manual == 1 end))
			assert.is_true(s:resume(n))
			assert.are.equal("active", s:get(n):status())
			assert.is_true(wait_for(function() return runs >= frozen + 3 end))
			assert.is_true(s:remove(n))
		end)

		it("disables and enables: kept with its counters, never fires, no catch-up", function()
			local n = name(mode .. ":off")
			local fired, missed = {}, {}
			s:on("missed", function(task, info) if task == n then missed[#missed + 1] = info end end)
			local t = s:interval(n, 20, function(info) fired[#fired + 1] = info end, opts())
			assert.is_true(wait_for(function() return #fired >= 2 end))
			assert.is_true(s:disable(n))
			local disabled_at = shield.now_ms()
			assert.are.equal("disabled", t:status())
			assert.are.equal("disabled", s:get(n):info().status)
			assert.is_nil(t:next_run())
			local listed = false
			for _, x in ipairs(s:list()) do
				if x:name() == n then listed = x:status() == "disabled" end
			end
			assert.is_true(listed, "list() shows the disabled task")
			local count = t:run_count()
			assert.is_true(count >= 1)
			-- pause + resume leave it disabled
			assert.is_true(s:pause(n))
			assert.are.equal("disabled", t:status())
			assert.is_true(s:resume(n))
			assert.are.equal("disabled", t:status())
			shield.sleep(100)
			-- Only a firing claimed before the disable (up to 70 ms ahead of
			-- its time, on Redis) may still have run, however late its run
			-- started on a busy machine.
			for _, f in ipairs(fired) do
				assert.is_true(f.scheduled <= disabled_at + 70, "a disabled task ran")
			end
			assert.is_true(t:run_count() >= count, "the counters were kept")
			local enabled_at = shield.now_ms()
			assert.is_true(s:enable(n))
			assert.are.equal("active", t:status())
			assert.is_not_nil(t:next_run())
			local function since_enable()
				local k = 0
				for _, f in ipairs(fired) do
					if f.scheduled >= enabled_at - 1 then k = k + 1 end
				end
				return k
			end
			assert.is_true(wait_for(function() return since_enable() >= 2 end))
			for _, f in ipairs(fired) do
				local outside = f.scheduled <= disabled_at + 70 or f.scheduled >= enabled_at - 1
				assert.is_true(outside, "a firing of the disabled period ran")
			end
			-- The disabled period is not counted missed either. (A loaded
			-- machine may miss 20 ms firings before the disable or after
			-- the enable: those count.)
			for _, m in ipairs(missed) do
				local outside = m.last_scheduled <= disabled_at + 70 or m.scheduled >= enabled_at - 1
				assert.is_true(outside, "a firing of the disabled period was counted missed")
			end
			assert.is_true(s:enable(n)) -- not disabled: nothing changes
			assert.is_true(s:remove(n))
			local none, why = s:disable(n)
			assert.is_nil(none)
			assert.are.equal("not_found", why)
		end)

		it("gives task objects that show the current state", function()
			local n = name(mode .. ":live")
			local runs = 0
			local t = s:interval(n, 20, function() runs = runs + 1 end, opts())
			assert.is_true(wait_for(function() return runs >= 1 end))
			assert.are.equal("active", t:status())
			local held = s:get(n) -- taken before the pause, read after it
			assert.is_true(s:pause(n))
			assert.are.equal("paused", held:status())
			assert.are.equal("paused", t:info().status)
			assert.is_nil(t:next_run())
			assert.is_true(s:resume(n))
			assert.are.equal("active", held:status())
			assert.is_true(wait_for(function() return t:run_count() >= 2 end))
			assert.is_true(s:remove(n))
			local gone, why = held:status()
			assert.is_nil(gone)
			assert.are.equal("not_found", why)
			assert.are.equal(n, held:name())
		end)

		it("keeps the schedule through errors, retrying the same firing", function()
			local n = name(mode .. ":risky")
			local attempts, errors = {}, {}
			s:interval(n, 1000, function(info)
				attempts[#attempts + 1] = info
				error("risky failed")
			end, opts({
				max_retries = 2, retry_delay = 10,
				on_error = function(err) errors[#errors + 1] = err end,
			}))
			assert.is_true(s:trigger(n)) -- a manual run is not retried
			assert.is_true(wait_for(function() return #errors == 1 end))
			assert.is_true(wait_for(function() return #errors == 4 end, 8000))
			local scheduled = attempts[2].scheduled
			for i = 2, 4 do
				assert.are.equal(i - 1, attempts[i].attempt)
				assert.are.equal(scheduled, attempts[i].scheduled)
			end
			assert.truthy(errors[1]:find("risky failed", 1, true))
			assert.truthy(errors[1]:find("scheduler_spec.lua:", 1, true))
			assert.is_true(wait_for(function() return s:get(n):status() == "error" end))
			assert.truthy(s:get(n):info().last_error:find("risky failed", 1, true))
			assert.is_true(s:remove(n))
		end)
	end)

	describe(mode .. " one-shot task", function()
		it("runs once after its delay and is removed", function()
			local n = name(mode .. ":once")
			local ran, at = 0, nil
			local registered = shield.now_ms()
			local t = s:once(n, 40, function() ran = ran + 1; at = shield.now_ms() end, opts())
			assert.are.equal("40", t:schedule())
			assert.is_true(wait_for(function() return ran == 1 end))
			assert.is_true(at >= registered + 40)
			assert.is_true(wait_for(function() return s:get(n) == nil end))
			shield.sleep(50)
			assert.are.equal(1, ran)
		end)

		it("runs at once with a delay of 0, or an at: time already past (late)", function()
			local zero, past = name(mode .. ":zero"), name(mode .. ":past")
			local ran = {}
			local before = shield.now_ms()
			s:once(zero, 0, function(info) ran[zero] = info end, opts())
			local when = math.floor(before / 1000) - 2
			s:add(past, "at:" .. when, function(info) ran[past] = info end, opts())
			assert.is_true(wait_for(function() return ran[zero] and ran[past] end))
			-- a distributed one-shot is anchored on the Redis clock
			assert.is_true(math.abs(ran[zero].scheduled - before) < 1000)
			assert.is_false(ran[zero].late)
			assert.are.equal(when * 1000, ran[past].scheduled)
			assert.is_true(ran[past].late, "a run 2 s after its time is late")
			assert.is_true(wait_for(function() return s:get(zero) == nil and s:get(past) == nil end))
		end)

		it("tells on(\"missed\") of an at: time older than catch_up, and removes it", function()
			local n = name(mode .. ":stale")
			local told, ran = nil, false
			s:on("missed", function(task, info) if task == n then told = info end end)
			local when = math.floor(shield.now_ms() / 1000) - 120
			s:add(n, "at:" .. when, function() ran = true end, opts())
			assert.is_true(wait_for(function() return told ~= nil end))
			assert.are.equal(1, told.count)
			assert.are.equal(when * 1000, told.scheduled)
			assert.are.equal(when * 1000, told.last_scheduled)
			assert.is_true(wait_for(function() return s:get(n) == nil end))
			assert.is_false(ran)
		end)

		it("runs an at: time from add", function()
			local n = name(mode .. ":at")
			local when = math.floor(shield.now_ms() / 1000) + 2
			local ran = false
			local t = s:add(n, "at:" .. when, function(info)
				ran = info.scheduled
			end, opts())
			assert.are.equal("at:" .. when, t:schedule())
			assert.are.equal(when * 1000, t:next_run())
			assert.is_true(wait_for(function() return ran end, 4000))
			assert.are.equal(when * 1000, ran)
		end)
	end)

	describe(mode .. " cron task", function()
		it("shows its cron text and fires on the cron's times", function()
			local n = name(mode .. ":cron")
			local t = s:cron(n, "0 0 * * *", function() end, opts({ timezone = "Asia/Shanghai" }))
			assert.are.equal("0 0 * * *", t:schedule())
			assert.are.equal(s:preview("0 0 * * *", 1, "Asia/Shanghai")[1], t:next_run())
			assert.are.equal("Asia/Shanghai", t:info().timezone)
			-- the same schedule again is a no-op; another one updates it
			assert.are.equal(t:next_run(), s:cron(n, "0 0 * * *", function() end, opts({ timezone = "Asia/Shanghai" })):next_run())
			local u = s:cron(n, "30 4 * * *", function() end, opts({ timezone = "Asia/Shanghai" }))
			assert.are.equal("30 4 * * *", u:schedule())
			assert.are.equal(s:preview("30 4 * * *", 1, "Asia/Shanghai")[1], u:next_run())
			assert.error_matches(function() s:interval(n, 1000, function() end, opts()) end,
				"is a cron task.*not interval")
			assert.is_true(s:remove(n))
		end)
	end)
end

describe("schedule formats", function()
	it("reads seed 001's expressions", function()
		local cases = {
			{ "every:60", "60000" }, { "every:30s", "30000" }, { "every:5m", "300000" }, { "every:1h", "3600000" },
			{ "daily:03:00", "0 3 * * *" }, { "hourly:30", "30 * * * *" }, { "cron:*/5 * * * *", "*/5 * * * *" },
			{ "0 12 * * 1-5", "0 12 * * 1-5" }, { "@daily", "@daily" },
		}
		for i, c in ipairs(cases) do
			local n = name("fmt:" .. i)
			assert.are.equal(c[2], s:add(n, c[1], function() end):schedule(), c[1])
			assert.is_true(s:remove(n))
		end
	end)

	it("previews fire times: * 0 * * * is every minute of hour 0", function()
		local p = s:preview("* 0 * * *", 3)
		assert.are.equal(3, #p)
		assert.are.equal(60000, p[2] - p[1])
		assert.are.equal(60000, p[3] - p[2])
		assert.are.equal(0, math.floor(p[1] / 3600000) % 24)
		local daily = s:preview("daily:03:00", 2)
		assert.are.equal(86400000, daily[2] - daily[1])
		local sh = s:preview("0 0 * * *", 1, "Asia/Shanghai")[1]
		assert.are.equal(16 * 3600000, sh % 86400000) -- 00:00 in Shanghai is 16:00 UTC
		local every = s:preview("every:5m", 2)
		assert.are.equal(300000, every[2] - every[1])
	end)
end)

describe("bad input", function()
	local fn = function() end
	it("raises with the argument and the reason", function()
		assert.error_matches(function() s:cron(name("b"), "0 25 * * *", fn) end,
			"bad argument #3 to 'cron' %(cron \"0 25 %* %* %*\": hour field: 25 out of range 0%-23%)")
		assert.error_matches(function() s:cron(name("b"), "0 0 * * * *", fn) end, "bad argument #3 to 'cron'")
		assert.error_matches(function() s:interval(name("b"), 0, fn) end, "interval must be a positive number of milliseconds, got 0")
		assert.error_matches(function() s:interval(name("b"), -100, fn) end, "interval must be a positive number")
		assert.error_matches(function() s:cron(name("b"), "0 0 * * *", fn, { timezone = "Mars/Olympus" }) end,
			"timezone \"Mars/Olympus\": unknown time zone")
		assert.error_matches(function() s:cron(name("b"), "0 0 * * *", "not a function") end,
			"bad argument #4 to 'cron' %(function expected, got string%)")
		assert.error_matches(function() s:cron(name("b"), "0 0 * * *", fn, { retries = 1 }) end,
			"unknown option \"retries\" %(known: timezone, distributed, lock_ttl")
		assert.error_matches(function() s:add(name("b"), "weekly:1", fn) end, "unknown format")
		assert.error_matches(function() s.get("x") end, "call it with ':'")
		assert.error_matches(function() s:on("finished", fn) end, "unknown event \"finished\"")
		local n = name("kind")
		s:cron(n, "0 0 * * *", fn)
		assert.error_matches(function() s:once(n, 1000, fn) end, "is a cron task, not once %(remove it first")
		assert.is_true(s:remove(n))
	end)
end)

describe("events", function()
	it("tells before, after and failed listeners", function()
		local n = name("events")
		local seen = {}
		s:on("before", function(task, info) if task == n then seen[#seen + 1] = "before:" .. info.attempt end end)
		s:on("after", function(task, info) if task == n then seen[#seen + 1] = "after:" .. info.attempt end end)
		s:on("failed", function(task, info)
			if task == n then seen[#seen + 1] = "failed:" .. info.attempt .. ":" .. tostring(info.final) end
		end)
		local fail = true
		s:interval(n, 20, function() if fail then fail = false; error("first run fails") end end,
			{ max_retries = 1, retry_delay = 10 })
		assert.is_true(wait_for(function() return #seen >= 4 end))
		assert.are.same({ "before:1", "failed:1:false", "before:2", "after:2" }, { seen[1], seen[2], seen[3], seen[4] })
		assert.is_true(s:remove(n))
	end)
end)

describe("overlap", function()
	it("skips a firing while the run goes on, or runs alongside with allow", function()
		local skip, allow = name("skip"), name("allow")
		local running, most = { [skip] = 0, [allow] = 0 }, { [skip] = 0, [allow] = 0 }
		local function slow(info)
			running[info.task] = running[info.task] + 1
			most[info.task] = math.max(most[info.task], running[info.task])
			shield.sleep(70)
			running[info.task] = running[info.task] - 1
		end
		s:interval(skip, 20, slow)
		s:interval(allow, 20, slow, { overlap = "allow" })
		assert.is_true(wait_for(function() return most[allow] >= 2 and s:get(skip):info().skipped >= 2 end))
		assert.are.equal(1, most[skip])
		assert.is_true(s:remove(skip))
		assert.is_true(s:remove(allow))
	end)
end)

describe("task files", function()
	it("loads every *.lua file of a folder", function()
		local names = s:load(here .. "/scheduler_tasks")
		assert.are.same({ "clean_logs", "spec_tick" }, names)
		assert.are.equal("0 3 * * *", s:get("clean_logs"):schedule())
		assert.are.equal("Asia/Shanghai", s:get("clean_logs"):info().timezone)
		assert.are.equal("20", s:get("spec_tick"):schedule())
		assert.is_true(wait_for(function() return (SPEC_TICKS or 0) >= 2 end))
		assert.is_true(s:remove("clean_logs"))
		assert.is_true(s:remove("spec_tick"))
		assert.error_matches(function() s:load(here .. "/no_such_folder") end, "no such file or directory")
	end)

	it("loads a tree of folders in path order, leaving out what skip matches", function()
		local tree = here .. "/scheduler_tree"
		-- Not recursive: only the top folder.
		assert.are.same({ "tree_root" }, s:load(tree, { skip = "vendor" }))
		assert.is_true(s:remove("tree_root"))
		local names = s:load({ tree }, { recursive = true, skip = { "vendor", "*_draft.lua" } })
		assert.are.same({ "tree_root", "tree_sub", "tree_deeper" }, names)
		assert.are.equal("30 * * * *", s:get("tree_sub"):schedule())
		for _, n in ipairs(names) do assert.is_true(s:remove(n)) end
		-- Without the skip patterns a bad file fails the whole load, naming it.
		assert.error_matches(function() s:load(tree, { recursive = true, skip = "vendor" }) end, "skipped_draft.lua: name must be")
		assert.is_nil(s:get("tree_root"), "a failed load registered a task")
		assert.error_matches(function() s:load(tree, { recursive = 1 }) end, "option recursive: boolean expected, got number")
		assert.error_matches(function() s:load(tree, { depth = 2 }) end, 'unknown option "depth"')
		assert.error_matches(function() s:load(tree, { skip = "[" }) end, "skip")
		assert.error_matches(function() s:load(here .. "/scheduler_spec.lua") end, "not a directory")
	end)
end)
