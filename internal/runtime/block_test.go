package runtime

import (
	"context"
	goruntime "runtime"
	"strings"
	"testing"
	"time"
	"weak"

	lua "github.com/yuin/gopher-lua"
)

// withEach exposes each(fn), a Go function that calls the Lua function it is
// given (gopher-luar turns it into a Go func, which runs it on a thread of
// its own): Lua called from Go, the way a host's callbacks are.
func withEach(t *testing.T, rt *Runtime) {
	t.Helper()
	if err := rt.Set("each", func(fn func()) { fn() }); err != nil {
		t.Fatal(err)
	}
}

// Issue 20: a blocking call in a Lua function that an exposed Go function
// calls raises "cannot block here", inside a task and outside any task; it
// does not wait with the loop held (shield.sleep(1000) froze every task of
// the state for a second).
func TestBlockingInLuaCalledFromAnExposedGoFunctionRaises(t *testing.T) {
	rt := newTestRuntime(t, nil)
	withEach(t, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	mustRun(t, rt, `function from_task()
		local ok, err = pcall(each, function() shield.sleep(1000) end)
		assert(not ok, "the sleep returned")
		assert(tostring(err):find("shield.sleep: cannot block here", 1, true), tostring(err))
		return "raised"
	end`)
	vals, err := rt.Call(ctx, "from_task")
	if err != nil || len(vals) != 1 || vals[0].String() != "raised" {
		t.Fatalf("in a task: %v %v", vals, err)
	}
	// Outside any task (host code on the main thread) too: the callback is
	// Lua called from Go all the same.
	err = rt.Do(func(L *lua.LState) error {
		return L.DoString(`each(function() shield.sleep(1000) end)`)
	})
	if err == nil || !strings.Contains(err.Error(), "shield.sleep: cannot block here") {
		t.Fatalf("outside tasks: want 'cannot block here', got %v", err)
	}
	// The state is healthy afterwards.
	mustRun(t, rt, `shield.sleep(1); healthy = true`)
}

// sleeper runs `track(); shield.sleep(ms)` as a task through Call, lets it
// park, then ends it by cancelling the call, and returns a weak pointer to
// the task's thread once the runtime has no task left.
func sleeper(t *testing.T, rt *Runtime, ms string) weak.Pointer[lua.LState] {
	t.Helper()
	var thread weak.Pointer[lua.LState]
	parked := make(chan struct{})
	err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("track", L.NewFunction(func(L *lua.LState) int {
			thread = weak.Make(L)
			close(parked)
			return 0
		}))
		return L.DoString(`function sleeper() track(); shield.sleep(` + ms + `) end`)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := rt.Call(ctx, "sleeper"); done <- err }()
	<-parked
	mustRun(t, rt, `shield.sleep(1)`) // the sleeper is parked now
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the sleep returned")
	}
	deadline := time.Now().Add(5 * time.Second)
	for rt.Tasks() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := rt.Tasks(); n != 0 {
		t.Fatalf("%d tasks alive", n)
	}
	mustRun(t, rt, `shield.sleep(0)`) // another task ran since (the monitor remembers the last one)
	return thread
}

// Issue 20: a task that ends while it sleeps stops its timer: nothing keeps
// the ended task (its thread) alive for the rest of the sleep (an hour here).
func TestAnEndedSleepStopsItsTimer(t *testing.T) {
	rt := newTestRuntime(t, nil)
	thread := sleeper(t, rt, "3600000")
	for i := 0; i < 5 && thread.Value() != nil; i++ {
		goruntime.GC()
	}
	if thread.Value() != nil {
		t.Fatal("the ended task's thread is still referenced: its sleep's timer runs on")
	}
}

// Issue 20: shield.sleep(math.huge) registers nothing that outlives it: a
// task that ends in it leaves no closer behind (each one used to leave its
// runtime-close callback registered until the runtime closed).
func TestAnEndedEndlessSleepLeavesNothingBehind(t *testing.T) {
	rt := newTestRuntime(t, nil)
	closers := func() int {
		var n int
		if err := rt.Do(func(*lua.LState) error { n = len(rt.closers); return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := closers()
	thread := sleeper(t, rt, "math.huge")
	if n := closers(); n != before {
		t.Fatalf("%d runtime-close callbacks registered after the task ended, want %d", n, before)
	}
	for i := 0; i < 5 && thread.Value() != nil; i++ {
		goruntime.GC()
	}
	if thread.Value() != nil {
		t.Fatal("the ended task's thread is still referenced")
	}
}
