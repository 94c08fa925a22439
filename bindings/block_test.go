package bindings

import (
	"context"
	"strings"
	"testing"
	"time"

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

// Issue 20: acquiring a mutex that another task of the state holds, in a
// Lua function an exposed Go function calls, raises "cannot block here"; it
// used to wait synchronously for a release that could never come (the
// holder cannot run while the loop waits): the runtime deadlocked for good.
func TestLockInLuaCalledFromAnExposedGoFunctionRaises(t *testing.T) {
	locks := testLocks()
	rt, _ := lockRuntime(t, locks)
	withEach(t, rt)
	mustRun(t, rt, `
		shield.spawn(function()
			local m = shield.mutex("m")
			assert(m:acquire())
			holding = true
			shield.sleep(math.huge)
		end)
		function from_task()
			while not holding do shield.sleep(1) end
			local m = shield.mutex("m")
			local ok, err = pcall(each, function() m:acquire(60000) end)
			assert(not ok, "acquired a lock another task holds")
			assert(tostring(err):find("shield.mutex:acquire: cannot block here", 1, true), tostring(err))
			-- a free lock still works there: it completes without waiting
			local ok2, err2 = pcall(each, function() local f = shield.mutex("free"); assert(f:acquire()); assert(f:release()) end)
			assert(ok2, tostring(err2))
			return "raised"
		end`)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	vals, err := rt.Call(ctx, "from_task")
	if err != nil || len(vals) != 1 || vals[0].String() != "raised" {
		t.Fatalf("want the acquire to raise, got %v %v", vals, err)
	}
	if st := locks.Stats(); st.Waiting != 0 {
		t.Fatalf("a refused acquire left a waiter behind: %+v", st)
	}
}
