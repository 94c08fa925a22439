package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// newTestRuntime starts a runtime with only the basics (no capability).
func newTestRuntime(t *testing.T, svc *Services) *Runtime {
	t.Helper()
	L := lua.NewState(StateOptions())
	rt, err := NewRuntime(L, svc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(time.Second); L.Close() })
	return rt
}

// run runs src as a task and returns its error.
func run(t *testing.T, rt *Runtime, src string) error {
	t.Helper()
	return rt.RunString(src, "test.lua")
}

func mustRun(t *testing.T, rt *Runtime, src string) {
	t.Helper()
	if err := run(t, rt, src); err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func global(t *testing.T, rt *Runtime, name string) lua.LValue {
	t.Helper()
	var v lua.LValue
	if err := rt.Do(func(L *lua.LState) error { v = L.GetGlobal(name); return nil }); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSleepSuspendsOnlyTheCallingTask(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `
		order = {}
		-- slow sleeps until fast has run: no race between two timers on a
		-- loaded machine, and fast can only run while slow is suspended.
		local fast_done = false
		shield.spawn(function()
			for _ = 1, 2000 do -- bounded: a sleep that blocked the state fails, not hangs
				if fast_done then break end
				shield.sleep(5)
			end
			order[#order+1] = "slow"
		end)
		shield.spawn(function() shield.sleep(1); order[#order+1] = "fast"; fast_done = true end)
		order[#order+1] = "main"
	`)
	if _, err := rt.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := global(t, rt, "order").(*lua.LTable)
	want := []string{"main", "fast", "slow"}
	for i, w := range want {
		if got.RawGetInt(i+1).String() != w {
			t.Fatalf("order[%d] = %v, want %s", i+1, got.RawGetInt(i+1), w)
		}
	}
}

func TestBlockingCallResultsAtFixedCountCallSites(t *testing.T) {
	// Resumed calls must fill every register a call site expects (gopher-lua
	// leaves Go nil there otherwise): local a, b, c = blocking().
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `
		local a, b, c = shield.sleep(1)
		assert(a == nil and b == nil and c == nil)
		local t = { shield.sleep(1) }
		assert(#t == 0)
		local function tail() return shield.sleep(1) end
		local x, y = tail()
		assert(x == nil and y == nil)
		result = "ok"
	`)
	if v := global(t, rt, "result"); v.String() != "ok" {
		t.Fatalf("result = %v", v)
	}
}

func TestYieldSafePcall(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `
		-- a blocking call inside pcall suspends the task and pcall returns its results
		local ok, v = pcall(function() shield.sleep(5); return 42 end)
		assert(ok == true and v == 42, "pcall around sleep: " .. tostring(ok) .. " " .. tostring(v))
		-- errors are caught, with position
		local ok2, err = pcall(function() shield.sleep(1); error("boom") end)
		assert(ok2 == false and err:find("boom"), tostring(err))
		-- non-string error values pass through
		local ok3, e3 = pcall(error, {code = 7})
		assert(not ok3 and e3.code == 7)
		-- nested pcall with blocking inside
		local ok4, a, b = pcall(pcall, function() shield.sleep(1); return 1, 2 end)
		assert(ok4 and a == true and b == 1)
		-- xpcall with a handler and arguments (5.2 form)
		local ok5, h = xpcall(function(x) shield.sleep(1); error("x=" .. x, 0) end, function(e) return "handled " .. e end, 9)
		assert(not ok5 and h == "handled x=9", h)
		-- many pcalls reuse pooled workers without growing the stack
		for i = 1, 20000 do assert(select(2, pcall(function(n) return n end, i)) == i) end
		-- a user coroutine that blocks inside, driven by coroutine.wrap
		local gen = coroutine.wrap(function() for i = 1, 3 do shield.sleep(1); coroutine.yield(i) end end)
		assert(gen() == 1 and gen() == 2 and gen() == 3)
		-- user yields inside pcall inside a coroutine pass through (Lua 5.2 semantics)
		local co = coroutine.create(function() return pcall(function() local v = coroutine.yield("y1"); return v * 2 end) end)
		local _, y = coroutine.resume(co)
		assert(y == "y1")
		local _, pok, pv = coroutine.resume(co, 21)
		assert(pok == true and pv == 42)
		result = "ok"
	`)
	if v := global(t, rt, "result"); v.String() != "ok" {
		t.Fatalf("result = %v", v)
	}
}

func TestBlockingOutsideTasksWaitsSynchronously(t *testing.T) {
	rt := newTestRuntime(t, nil)
	err := rt.Do(func(L *lua.LState) error {
		return L.DoString(`shield.sleep(5); outside = "done"`)
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := global(t, rt, "outside"); v.String() != "done" {
		t.Fatalf("outside = %v", v)
	}
}

func TestTaskErrorCarriesTraceback(t *testing.T) {
	rt := newTestRuntime(t, nil)
	err := run(t, rt, `
		local function inner() shield.sleep(1); error("deep failure") end
		local function outer() inner() end
		outer()
	`)
	var te *TaskError
	if !errors.As(err, &te) {
		t.Fatalf("want *TaskError, got %T %v", err, err)
	}
	if !strings.Contains(te.Message, "test.lua:2: deep failure") {
		t.Errorf("message = %q", te.Message)
	}
	for _, want := range []string{"stack traceback:", "test.lua:2: in function 'inner'", "test.lua:3: in function 'outer'", "test.lua:4: in main chunk"} {
		if !strings.Contains(te.Traceback, want) {
			t.Errorf("traceback lacks %q:\n%s", want, te.Traceback)
		}
	}
}

func TestArgumentErrorsNameTheCallAndLine(t *testing.T) {
	rt := newTestRuntime(t, nil)
	cases := map[string]string{
		`shield.sleep("x")`:       `test.lua:1: shield: bad argument #1 to 'sleep' (number expected, got string)`,
		`shield.sleep(-1)`:        `test.lua:1: shield: bad argument #1 to 'sleep' (milliseconds must be >= 0)`,
		`shield.spawn(42)`:        `test.lua:1: shield: bad argument #1 to 'spawn' (function expected, got number)`,
		`shield.log.info()`:       `test.lua:1: shield.log: bad argument #1 to 'info' (message expected (a string, or any value tostring accepts), got no value)`,
		`shield.log.info(nil)`:    `test.lua:1: shield.log: bad argument #1 to 'info' (message expected (a string, or any value tostring accepts), got nil)`,
		`shield.log.info("m", 5)`: `test.lua:1: shield.log: bad argument #2 to 'info' (table expected, got number)`,
	}
	for src, want := range cases {
		err := run(t, rt, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", src, err, want)
		}
	}
}

// A task spawned before its spawner sleeps starts before the spawner's
// timer resumes it, even when the turn that starts it comes late: here
// another task spins for 20 ms after the spawner slept 1 ms, so the timer
// has fired by the next turn (which ran it first and the spawned task
// after).
// gopher-lua's own argument errors raised by a function the runtime's Lua
// calls (pcall(tostring), the stock coroutine functions behind ours, a Go
// function run as a task) name the script's line, never a runtime
// position (they said <shield>/prelude.lua:N and the prelude's local names).
func TestArgumentErrorsNeverNameARuntimePosition(t *testing.T) {
	rt := newTestRuntime(t, nil)
	cases := map[string]string{
		"local ok, e = pcall(tostring)\nerror(e, 0)":                            `test.lua:1: bad argument #1 to (anonymous) (value expected)`,
		"local ok, e = pcall(string.rep, 'x')\nerror(e, 0)":                     `test.lua:1: bad argument #2 to (anonymous) (number expected, got nil)`,
		"local ok, e = xpcall(tostring, function(m) return m end)\nerror(e, 0)": `test.lua:1: bad argument #1 to (anonymous) (value expected)`,
		"local ok, e = pcall(coroutine.resume, 42)\nerror(e, 0)":                `test.lua:1: bad argument #1 to 'resume' (coroutine expected, got number)`,
		`coroutine.resume(nil)`:                                                 `test.lua:1: bad argument #1 to 'resume' (coroutine expected, got nil)`,
		`coroutine.status({})`:                                                  `test.lua:1: bad argument #1 to 'status' (coroutine expected, got table)`,
		`coroutine.wrap(5)`:                                                     `test.lua:1: bad argument #1 to 'wrap' (function expected, got number)`,
	}
	for src, want := range cases {
		err := run(t, rt, src)
		var te *TaskError
		if !errors.As(err, &te) || te.Message != want {
			t.Errorf("%s:\n got %v\nwant %s", src, err, want)
		}
	}
	tostr := global(t, rt, "tostring").(*lua.LFunction)
	_, err := rt.Call(context.Background(), tostr)
	var te *TaskError
	if !errors.As(err, &te) || te.Message != "bad argument #1 to (anonymous) (value expected)" {
		t.Errorf("a Go function run as a task: got %v", err)
	}
}

func TestSpawnedTaskStartsBeforeALaterTimer(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `
		local b_ran = false
		shield.spawn(function()
			shield.spawn(function() b_ran = true end)
			shield.sleep(1)
			saw = b_ran
		end)
		shield.spawn(function() -- runs in the same turn, after the first
			local t0 = os.clock()
			while os.clock() - t0 < 0.02 do end
		end)
		shield.sleep(100)`)
	if saw := global(t, rt, "saw"); saw != lua.LTrue {
		t.Fatalf("the spawner woke from its 1 ms sleep before the task it spawned started (saw %v)", saw)
	}
}

// A sleep always yields, even when its timer fires before the task has
// parked (a 1 µs sleep's timer usually does; so does a 1 ms one on a
// loaded machine): the task spawned just before it starts first.
func TestASleepYieldsEvenWhenItsTimerFiresAtOnce(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `
		missed = 0
		for i = 1, 300 do
			local started = false
			shield.spawn(function() started = true end)
			shield.sleep(0.001)
			if not started then missed = missed + 1 end
		end`)
	if n := global(t, rt, "missed"); n != lua.LNumber(0) {
		t.Fatalf("%v of 300 sleeps returned before the task spawned before them started", n)
	}
}

func TestOwnerIdentity(t *testing.T) {
	rt := newTestRuntime(t, &Services{Owner: Owner{NodeID: "node-1", ServiceID: 12345, Instance: "ab12"}})
	mustRun(t, rt, `
		me = shield.owner()
		shield.spawn(function() other = shield.owner() end)
		shield.sleep(1)
	`)
	me, other := global(t, rt, "me").String(), global(t, rt, "other").String()
	if !strings.HasPrefix(me, "node-1:12345:coroutine-ab12-") || !strings.HasPrefix(other, "node-1:12345:coroutine-ab12-") || me == other {
		t.Fatalf("owners %q %q", me, other)
	}
}

func TestNowMsUsesTheInjectedClock(t *testing.T) {
	at := time.UnixMilli(1234567890000)
	rt := newTestRuntime(t, &Services{Now: func() time.Time { return at }})
	mustRun(t, rt, `now = shield.now_ms()`)
	if v := global(t, rt, "now"); v != lua.LNumber(1234567890000) {
		t.Fatalf("now = %v", v)
	}
}

func TestWaitReturnsWhenIdleAndCountsFailures(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `shield.spawn(function() shield.sleep(5); error("spawned failure") end)`)
	failures, err := rt.Wait(context.Background())
	if err != nil || failures != 1 {
		t.Fatalf("failures = %d, err = %v", failures, err)
	}
}

func TestCloseLetsRunningTasksFinishWithinGrace(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	rt, err := NewRuntime(L, nil)
	if err != nil {
		t.Fatal(err)
	}
	finished := make(chan struct{})
	if err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("finished", L.NewFunction(func(*lua.LState) int { close(finished); return 0 }))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, `shield.spawn(function() shield.sleep(20); finished() end)`)
	rt.Close(5 * time.Second)
	select {
	case <-finished:
	default:
		t.Fatal("the running task did not finish before Close returned")
	}
	if err := rt.Do(func(*lua.LState) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
}

func TestPlainYieldAtTaskTopLevelYieldsToOtherTasks(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `
		seq = ""
		shield.spawn(function() for i = 1, 3 do seq = seq .. "a"; coroutine.yield() end end)
		shield.spawn(function() for i = 1, 3 do seq = seq .. "b"; coroutine.yield() end end)
	`)
	if _, err := rt.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := global(t, rt, "seq").String(); v != "ababab" {
		t.Fatalf("seq = %q", v)
	}
}
