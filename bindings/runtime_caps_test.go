package bindings

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/kv"
	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	lua "github.com/yuin/gopher-lua"
)

// Tests of runtime behaviour that need a capability (moved from the
// runtime's tests when the runtime became internal/runtime, which cannot
// import bindings).

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

func testGlobal() *Global {
	return &Global{Store: kv.NewMemory(), Bus: pubsub.NewMemory(), Inline: true}
}

// Methods called with a foreign self name the type they expected.
func TestForeignSelfIsAnArgumentError(t *testing.T) {
	rt := newTestRuntime(t, &runtime.Services{Capabilities: []runtime.Capability{testGlobal()}})
	cases := map[string]string{
		`shield.global().get(newproxy(), "k")`: `shield.global: bad argument #1 to 'get' (shield.global expected, got userdata`,
		`shield.global().set({}, "k", 1)`:      `shield.global: bad argument #1 to 'set' (shield.global expected, got table`,
		`local s = shield.global():subscribe("x", function() end); s.unsubscribe(shield.global())`: `bad argument #1 to 'unsubscribe' (shield.subscription expected, got userdata`,
	}
	for src, want := range cases {
		err := run(t, rt, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %q", src, err, want)
		}
	}
}

func TestLockObjectsDoNotAccumulate(t *testing.T) {
	rt := newTestRuntime(t, &runtime.Services{Capabilities: []runtime.Capability{testLocks()}})
	mustRun(t, rt, `
		for i = 1, 200 do
			local l = shield.mutex("m" .. i)
			assert(l:acquire()); assert(l:release())
			local d = shield.distributed_mutex("d" .. i, { ttl = 1000 })
			assert(d:acquire(100)); assert(d:release())
		end`)
	var active int
	_ = rt.Do(func(*lua.LState) error { active = activeLocks(rt); return nil })
	if active != 0 {
		t.Fatalf("%d released lock objects still tracked", active)
	}
}
