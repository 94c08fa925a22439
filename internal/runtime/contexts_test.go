package runtime

import (
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// withHostCallers adds Go functions that call back into Lua the way a host's
// own bindings do: host_call(fn) with L.Call, host_pcall(fn) with L.PCall.
func withHostCallers(t *testing.T, rt *Runtime) {
	t.Helper()
	err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("host_call", L.NewFunction(func(L *lua.LState) int {
			L.Push(L.CheckFunction(1))
			L.Call(0, 0)
			return 0
		}))
		L.SetGlobal("host_pcall", L.NewFunction(func(L *lua.LState) int {
			L.Push(L.CheckFunction(1))
			if err := L.PCall(0, 0, nil); err != nil {
				L.RaiseError("%s", err.Error())
			}
			return 0
		}))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every context where gopher-lua cannot yield (it re-entered the VM) must
// raise a clear error naming the call — never corrupt the state or panic.
func TestCallModeContexts(t *testing.T) {
	mt := func(event, use string) string {
		return `local t = setmetatable({}, {` + event + ` = function() shield.sleep(1); return 1 end}); local _ = ` + use
	}
	cases := map[string]string{
		"__index":                        mt("__index", "t.x"),
		"__newindex":                     `local t = setmetatable({}, {__newindex = function() shield.sleep(1) end}); t.x = 1`,
		"__add":                          mt("__add", "t + 1"),
		"__sub":                          mt("__sub", "t - 1"),
		"__mul":                          mt("__mul", "t * 1"),
		"__div":                          mt("__div", "t / 1"),
		"__mod":                          mt("__mod", "t % 1"),
		"__pow":                          mt("__pow", "t ^ 1"),
		"__unm":                          mt("__unm", "-t"),
		"__concat":                       mt("__concat", `t .. "x"`),
		"__len":                          mt("__len", "#t"),
		"__eq":                           `local m = {__eq = function() shield.sleep(1); return true end}; local a, b = setmetatable({}, m), setmetatable({}, m); local _ = a == b`,
		"__lt":                           mt("__lt", "t < t"),
		"__le":                           mt("__le", "t <= t"),
		"__tostring":                     `local t = setmetatable({}, {__tostring = function() shield.sleep(1); return "" end}); tostring(t)`,
		"__index userdata":               `local u = newproxy(true); getmetatable(u).__index = function() shield.sleep(1) end; local _ = u.x`,
		"for-in iterator":                `for _ in function() shield.sleep(1) end do end`,
		"for-in coroutine.wrap iterator": `for _ in coroutine.wrap(function() shield.sleep(1); coroutine.yield(1) end) do end`,
		"table.sort":                     `table.sort({3, 2, 1}, function(a, b) shield.sleep(1); return a < b end)`,
		"string.gsub":                    `string.gsub("abc", "%w", function(c) shield.sleep(1) end)`,
		"require top level":              `package.preload["blocky"] = function() shield.sleep(1) end; require("blocky")`,
		"dofile":                         `local f = os.tmpname(); local h = io.open(f, "w"); h:write("shield.sleep(1)"); h:close(); dofile(f)`,
		"load reader":                    `load(function() shield.sleep(1) end)`,
		"host L.Call":                    `host_call(function() shield.sleep(1) end)`,
		"host L.PCall":                   `host_pcall(function() shield.sleep(1) end)`,
		"coroutine in sort":              `table.sort({2, 1}, function(a, b) local co = coroutine.create(function() shield.sleep(1) end); local ok, e = coroutine.resume(co); if not ok then error(e, 0) end; return a < b end)`,
		"pcall in __index":               `local t = setmetatable({}, {__index = function() local ok, e = pcall(shield.sleep, 1); if not ok then error(e, 0) end end}); local _ = t.x`,
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			rt := newTestRuntime(t, nil)
			withHostCallers(t, rt)
			err := run(t, rt, src)
			if err == nil || !strings.Contains(err.Error(), "shield.sleep: cannot block here") {
				t.Fatalf("want a 'cannot block here' error, got %v", err)
			}
			// The state is still healthy: another task runs and blocks fine.
			mustRun(t, rt, `shield.sleep(1); healthy = true`)
			if global(t, rt, "healthy") != lua.LTrue {
				t.Fatal("runtime unhealthy after the error")
			}
		})
	}
}

// Contexts where a blocking call must work: plain calls at any depth, nested
// yield-safe pcall/xpcall, user coroutines, method calls through __index
// tables, __call, loadstring, callbacks run as tasks.
func TestBlockingWorksInEveryYieldableContext(t *testing.T) {
	cases := map[string]string{
		"nested pcall/xpcall": `
			local ok, a = pcall(function()
				return select(2, xpcall(function() return select(2, pcall(function() shield.sleep(1); return 7 end)) end, print))
			end)
			assert(ok and a == 7, tostring(a))`,
		"coroutine.resume chain": `
			local inner = coroutine.create(function() shield.sleep(1); coroutine.yield("in"); shield.sleep(1); return "end" end)
			local outer = coroutine.create(function()
				local _, v = coroutine.resume(inner); local _, w = coroutine.resume(inner); return v .. w
			end)
			local ok, v = coroutine.resume(outer)
			assert(ok and v == "inend", tostring(v))`,
		"coroutine.wrap called normally": `
			local gen = coroutine.wrap(function() shield.sleep(1); coroutine.yield(1); shield.sleep(1); coroutine.yield(2) end)
			assert(gen() == 1 and gen() == 2)`,
		"method via __index table": `
			local obj = setmetatable({}, {__index = {nap = function(self) shield.sleep(1); return "rested" end}})
			assert(obj:nap() == "rested")`,
		"__call": `
			local f = setmetatable({}, {__call = function(self, x) shield.sleep(1); return x * 2 end})
			assert(f(21) == 42)`,
		"loadstring": `assert(loadstring("shield.sleep(1); return 5")() == 5)`,
		"deep recursion then block": `
			local function f(n) if n == 0 then shield.sleep(1); return 0 end return 1 + f(n - 1) end
			assert(f(200) == 200)`,
		"pcall inside coroutine inside pcall": `
			local ok, v = pcall(function()
				local co = coroutine.wrap(function() return pcall(function() shield.sleep(1); return "deep" end) end)
				local ok2, w = co()
				return ok2 and w
			end)
			assert(ok and v == "deep", tostring(v))`,
		"spawned callback": `
			local done
			shield.spawn(function() shield.sleep(1); done = true end)
			-- a loaded machine may run the 5 ms timer first: wait for it
			local deadline = shield.now_ms() + 5000
			repeat shield.sleep(5) until done or shield.now_ms() > deadline
			assert(done)`,
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			mustRun(t, newTestRuntime(t, nil), src)
		})
	}
}

// A coroutine waiting in a shield call belongs to that call: other tasks
// cannot resume it (or call its wrap), its status is not "suspended", and
// the call always gets exactly its own result.
func TestParkedCoroutineCannotBeResumedByAnotherTask(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `
		-- The owners stay parked in shield.sleep until the intruders have
		-- tried (a fixed sleep could end first on a loaded machine).
		local go_on = false
		local co = coroutine.create(function()
			repeat shield.sleep(5) until go_on
			return "slept", shield.sleep(1)
		end)
		local gen = coroutine.wrap(function() repeat shield.sleep(5) until go_on; return "wrapped" end)
		local results = {}
		shield.spawn(function() results.co = { coroutine.resume(co) } end)
		shield.spawn(function() results.gen = { pcall(gen) } end)
		shield.sleep(1) -- both are now parked in shield.sleep
		results.status = coroutine.status(co)
		results.intruder = { coroutine.resume(co, "intruder") }
		results.wrap_intruder = { pcall(gen, "intruder") }
		go_on = true
		local deadline = shield.now_ms() + 5000 -- their sleeps end, however late on a loaded machine
		repeat shield.sleep(10) until (results.co and results.gen) or shield.now_ms() > deadline
		assert(results.status == "normal", "status " .. tostring(results.status))
		assert(results.intruder[1] == false, "intruder resumed it")
		assert(results.intruder[2]:find("waiting in shield.sleep", 1, true), results.intruder[2])
		assert(results.wrap_intruder[1] == false and results.wrap_intruder[2]:find("waiting in shield.sleep", 1, true),
			tostring(results.wrap_intruder[2]))
		assert(results.wrap_intruder[2]:find("test.lua:16:", 1, true), "wrap error has the caller's position: " .. results.wrap_intruder[2])
		-- the owners got their own results
		assert(results.co[1] == true and results.co[2] == "slept" and results.co[3] == nil, tostring(results.co[2]))
		assert(results.gen[1] == true and results.gen[2] == "wrapped", tostring(results.gen[2]))
		assert(coroutine.status(co) == "dead")
	`)
}

func TestTaskThreadsCannotBeResumedByScripts(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `
		local main = coroutine.running()
		local other
		-- still asleep when the main chunk wakes, however late that is
		shield.spawn(function() other = coroutine.running(); shield.sleep(1000) end)
		shield.sleep(5)
		local ok, err = coroutine.resume(other, "x")
		assert(ok == false and err:find("waiting in shield.sleep", 1, true), tostring(err))
		assert(coroutine.status(other) == "normal")
		assert(coroutine.status(main) == "running")
		local ok2, err2 = coroutine.resume(main)
		assert(ok2 == false, "a running thread cannot be resumed")
	`)
}
