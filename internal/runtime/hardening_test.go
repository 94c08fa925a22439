package runtime

import (
	"context"
	"errors"
	"log/slog"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testlog"

	lua "github.com/yuin/gopher-lua"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = testlog.Buffer

func logTo(w *syncBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// A task that never yields cannot hold up Close beyond grace + 2 s: it is
// interrupted at its current line, and Interrupted names it.
func TestCloseInterruptsATaskThatNeverYields(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	spinning := make(chan struct{})
	L.SetGlobal("spinning", L.NewFunction(func(*lua.LState) int { close(spinning); return 0 }))
	var logs syncBuffer
	rt, err := NewRuntime(L, &Services{Log: logTo(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	mainErr := make(chan error, 1)
	mustRun(t, rt, `shield.spawn(function() shield.sleep(1e9) end); shield.sleep(5)`) // parked: interrupted too
	// spinning() is called on the line before the loop: Close below meets a
	// task that is running and never yields, however slow the machine.
	go func() { mainErr <- rt.RunString("spinning(); local n = 0\nwhile true do n = n + 1 end", "spin.lua") }()
	select {
	case <-spinning:
	case <-time.After(5 * time.Second):
		t.Fatal("the task did not start within 5 s")
	}
	start := time.Now()
	rt.Close(200 * time.Millisecond)
	if took := time.Since(start); took > 200*time.Millisecond+KillWait {
		t.Fatalf("Close took %v, more than grace + %v", took, KillWait)
	}
	select {
	case err := <-mainErr:
		var te *TaskError
		if !errors.As(err, &te) || !strings.Contains(te.Message, "spin.lua:2:") || !strings.Contains(te.Message, ErrInterrupted.Error()) {
			t.Fatalf("the spinning task ended with %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("the spinning task's RunString did not return")
	}
	names := strings.Join(rt.Interrupted(), ",")
	if !strings.Contains(names, "spin.lua") || !strings.Contains(names, "spawn") {
		t.Fatalf("Interrupted() = %q", names)
	}
	if !strings.Contains(logs.String(), "running=spin.lua") {
		t.Fatalf("the shutdown warning does not name the running task:\n%s", logs.String())
	}
}

// slowTaskRun runs src on a runtime that logs tasks running threshold
// without yielding, with go_busy() a Go function that takes busy, and
// returns the log after checking it holds exactly one such warning.
func slowTaskRun(t *testing.T, threshold, busy time.Duration, src string) string {
	t.Helper()
	var logs syncBuffer
	rt := newTestRuntime(t, &Services{Log: logTo(&logs), SlowTask: threshold})
	if err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("go_busy", L.NewFunction(func(*lua.LState) int { time.Sleep(busy); return 0 }))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, src)
	out := logs.String()
	if n := strings.Count(out, "task has run without yielding"); n != 1 {
		t.Fatalf("want one warning, got %d:\n%s", n, out)
	}
	return out
}

func TestSlowTaskIsLoggedOnceWithItsLine(t *testing.T) {
	out := slowTaskRun(t, 50*time.Millisecond, 0, `
		local t0 = os.clock()
		while os.clock() - t0 < 0.4 do end
		shield.sleep(1)`)
	if !strings.Contains(out, "task=test.lua") || !strings.Contains(out, "at=test.lua:3") {
		t.Fatalf("the warning lacks the task or its line:\n%s", out)
	}
}

// The monitor asks the VM for the line and reports once it answers: a
// probe that lands while the task is inside a Go function waits for the
// task to run Lua again (up to another threshold), instead of reporting
// "(inside a Go function)" on the next tick (which, with this watcher's
// ticks back to back after a delay, was also what a loaded machine got
// for a task spinning in Lua).
func TestSlowTaskLineWaitsForTheVM(t *testing.T) {
	// A 200 ms threshold (the watcher ticks every 50 ms); go_busy takes
	// 300 ms: past the probe (at 200-250 ms) and its next tick, well before
	// another threshold has passed.
	out := slowTaskRun(t, 200*time.Millisecond, 300*time.Millisecond, `
		go_busy()
		local t0 = os.clock()
		while os.clock() - t0 < 0.4 do end
		shield.sleep(1)`)
	if !strings.Contains(out, "at=test.lua:3") && !strings.Contains(out, "at=test.lua:4") { // the first instruction after go_busy, or the loop
		t.Fatalf("the warning does not give the line the task ran on after the Go function:\n%s", out)
	}
}

// A task that stays inside a Go function is still reported, one more
// threshold later, as inside a Go function.
func TestSlowTaskInsideAGoFunction(t *testing.T) {
	out := slowTaskRun(t, 100*time.Millisecond, 600*time.Millisecond, `go_busy(); shield.sleep(1)`)
	if !strings.Contains(out, `at="(inside a Go function)"`) {
		t.Fatalf("want the warning at a Go function:\n%s", out)
	}
}

// A task hogging the loop inside runtime code (here returning from a Go
// function pcall called) is reported at its own line, the pcall's, never
// at a runtime position (it said at=<shield>/prelude.lua:112). go_busy
// returns once the monitor's probe is set, so the next instruction, which
// answers it, is the prelude's.
func TestSlowTaskLineIsTheScriptsInsideRuntimeCode(t *testing.T) {
	var logs syncBuffer
	rt := newTestRuntime(t, &Services{Log: logTo(&logs), SlowTask: 300 * time.Millisecond})
	if err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("go_busy", L.NewFunction(func(*lua.LState) int {
			for end := time.Now().Add(10 * time.Second); rt.vm.flags.Load()&flagProbe == 0 && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			return 0
		}))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, `
		local ok = pcall(go_busy)
		local t0 = os.clock()
		while os.clock() - t0 < 0.6 do end
		shield.sleep(1)`)
	out := logs.String()
	if !strings.Contains(out, "at=test.lua:2 ") || strings.Contains(out, "<shield>") {
		t.Fatalf("want the warning at the pcall's line:\n%s", out)
	}
}

func TestSleepBounds(t *testing.T) {
	rt := newTestRuntime(t, nil)
	for _, src := range []string{`shield.sleep(1e13)`, `shield.sleep(2^63)`} {
		err := run(t, rt, src)
		if err == nil || !strings.Contains(err.Error(), "bad argument #1 to 'sleep' (milliseconds must be at most") {
			t.Fatalf("%s: got %v", src, err)
		}
	}
	// math.huge sleeps until the runtime closes, then the task ends quietly.
	L := lua.NewState()
	defer L.Close()
	rt2, err := NewRuntime(L, nil)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- rt2.RunString(`shield.sleep(math.huge); error("not reached")`, "forever.lua") }()
	select {
	case err := <-ended:
		t.Fatalf("math.huge sleep returned early: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	start := time.Now()
	rt2.Close(5 * time.Second)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a forever-sleeping task held Close for %v", took)
	}
	if err := <-ended; !errors.Is(err, ErrClosed) {
		t.Fatalf("the sleeper ended with %v, want ErrClosed (a quiet end, not a failure)", err)
	}
	if n := rt2.Interrupted(); len(n) != 0 {
		t.Fatalf("interrupted %v", n)
	}
}

// The rebuilt pcall/xpcall/coroutine functions behave as gopher-lua's own,
// and no error or traceback ever shows the runtime's prelude.
func TestPcallMatchesStockGopherLua(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `
		local function no_prelude(s) assert(not tostring(s):find("prelude", 1, true), "prelude leaked: " .. tostring(s)); return s end
		local ok, e = pcall(42)
		assert(ok == false and e == "attempt to call a number value", no_prelude(e))
		ok, e = pcall(nil)
		assert(ok == false and e == "attempt to call a nil value", no_prelude(e))
		ok, e = pcall(pcall)
		assert(ok == false and no_prelude(e):find("test.lua:7: bad argument #1 to 'pcall' (value expected)", 1, true), e)
		-- an error in the handler is xpcall's result
		ok, e = xpcall(function() error("orig") end, function() error("in handler") end)
		assert(ok == false and no_prelude(e):find("test.lua:10: in handler", 1, true), e)
		-- a missing handler is an argument error at the caller
		ok, e = pcall(xpcall, function() end, nil)
		assert(ok == false and no_prelude(e):find("test.lua:13: bad argument #2 to 'xpcall' (function expected, got nil)", 1, true), e)
		-- coroutine.running inside pcall is the caller's coroutine
		local me = coroutine.running()
		local _, inside = pcall(function() shield.sleep(1); return coroutine.running() end)
		assert(inside == me, "running() inside pcall: " .. tostring(inside) .. " vs " .. tostring(me))
		local co = coroutine.create(function() return select(2, pcall(coroutine.running)) end)
		local _, got = coroutine.resume(co)
		assert(got == co)
		-- a callable table is callable
		ok, e = pcall(setmetatable({}, {__call = function(_, x) return x end}), 9)
		assert(ok and e == 9)
		-- dead and wrapped coroutines
		local w = coroutine.wrap(function() end); w()
		ok, e = pcall(w)
		assert(ok == false and no_prelude(e):find("test.lua:27: cannot resume dead coroutine", 1, true), e)
		local w2 = coroutine.wrap(function() error("werr") end)
		ok, e = pcall(w2)
		assert(ok == false and no_prelude(e):find("test.lua:29: werr", 1, true), e)
	`)
	// Uncaught errors through pcall layers: no prelude frame in the traceback.
	err := run(t, rt, "pcall(function() end)\nlocal ok = pcall(function() shield.sleep(1) end)\nerror('top')")
	var te *TaskError
	if !errors.As(err, &te) || strings.Contains(te.Error(), "prelude") {
		t.Fatalf("got %v", err)
	}
}

func TestErrorObjectsAreReadable(t *testing.T) {
	rt := newTestRuntime(t, nil)
	err := run(t, rt, `error({code = 1, reason = "busy"})`)
	if err == nil || !strings.Contains(err.Error(), `error object {code = 1, reason = "busy"}`) {
		t.Fatalf("got %v", err)
	}
	err = run(t, rt, `error(setmetatable({}, {__tostring = function() return "custom text" end}))`)
	if err == nil || !strings.Contains(err.Error(), "custom text") {
		t.Fatalf("got %v", err)
	}
}

func heapInUse() uint64 { // live heap after two collections
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A burst of concurrent pcalls does not pin memory: idle pcall workers are
// bounded (20 000 concurrent pcalls pinned ~380 MB before).
func TestPcallWorkerPoolIsBounded(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `shield.sleep(1)`)
	before := heapInUse()
	mustRun(t, rt, `
		local n = 0
		for i = 1, 20000 do
			shield.spawn(function() pcall(function() shield.sleep(20); n = n + 1 end) end)
		end
		while n < 20000 do shield.sleep(10) end`)
	if _, err := rt.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := heapInUse()
	if grew := int64(after) - int64(before); grew > 64<<20 {
		t.Fatalf("heap grew by %d MB after the pcall burst", grew>>20)
	}
}

func TestDeepRecursionInTasks(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `
		local function depth(n) if n == 0 then return 0 end return 1 + depth(n - 1) end
		assert(depth(2000) == 2000)
		shield.spawn(function() assert(depth(2000) == 2000); deep_spawned = true end)
		while not deep_spawned do shield.sleep(1) end`)
}

func TestLogWritesStructuredFields(t *testing.T) {
	var logs syncBuffer
	rt := newTestRuntime(t, &Services{Log: logTo(&logs)})
	mustRun(t, rt, `shield.log.info("hello", { a = 1, b = "x" }); shield.log.warn(42)`)
	out := logs.String()
	for _, want := range []string{`level=INFO msg=hello a=1 b=x task=`, `level=WARN msg=42 task=`} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %q:\n%s", want, out)
		}
	}
}

// Tasks parked in a blocking call stay small, with the host's default
// lua.NewState() and with StateOptions (deep recursion): the default
// gopher-lua thread took ~105 KB.
func TestParkedTasksAreSmall(t *testing.T) {
	for name, opts := range map[string]lua.Options{"lua.NewState()": {}, "StateOptions": StateOptions()} {
		t.Run(name, func(t *testing.T) {
			L := lua.NewState(opts)
			defer L.Close()
			rt, err := NewRuntime(L, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close(0)
			mustRun(t, rt, `shield.sleep(1)`)
			before := heapInUse()
			const n = 2000
			mustRun(t, rt, spawnParked(n))
			if live := rt.Tasks(); live < n {
				t.Fatalf("%d tasks alive, want %d parked", live, n)
			}
			if per := (int64(heapInUse()) - int64(before)) / n; per > 16<<10 {
				t.Fatalf("%d bytes of Go heap per parked task", per)
			}
		})
	}
}

// gopher-lua's own walk of the stack (debug.traceback, GetStack) counts a
// level per tail call, and a pooled thread's loop tail-calls once per task
// (a pcall worker's, once per call). Our tracebacks stop at the first
// repeated runtime frame, and threads and workers retire after
// retireThreadAfter runs, so the levels gopher-lua walks stay bounded
// however many tasks and pcalls came before (3 000 of each made 3 000
// levels).
func TestReusedThreadsKeepTheirStacksShort(t *testing.T) {
	rt := newTestRuntime(t, nil)
	_ = rt.Do(func(L *lua.LState) error {
		L.SetGlobal("frames", L.NewFunction(func(L *lua.LState) int {
			L.Push(lua.LNumber(len(stackFrames(L))))
			return 1
		}))
		L.SetGlobal("levels", L.NewFunction(func(L *lua.LState) int {
			n := 0
			for ; n < 1_000_000; n++ {
				if _, ok := L.GetStack(n); !ok {
					break
				}
			}
			L.Push(lua.LNumber(n))
			return 1
		}))
		return nil
	})
	mustRun(t, rt, `
		for i = 1, 3000 do
			local done = false
			shield.spawn(function() done = true end)
			while not done do shield.sleep(0) end
		end
		local n, f
		shield.spawn(function() n, f = levels(), frames() end)
		while not n do shield.sleep(0) end
		assert(n <= 520, n .. " levels in a task on a reused thread")
		assert(f < 10, f .. " frames in our traceback")

		for i = 1, 3000 do pcall(function() end) end
		local ok, m = pcall(levels)
		assert(ok and m <= 530, tostring(m) .. " levels in a pcall on a reused worker")`)
}
