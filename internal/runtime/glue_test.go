package runtime_test

import (
	"context"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/bindings"
	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/kv"
	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/lock/local"
	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// Runtime properties that only a capability shows: what a subscription or a
// lock hold leaves behind in the runtime. These tests import bindings, which
// the runtime's own files never do (import_rules_test.go).

func capRuntime(t *testing.T, c runtime.Capability) *runtime.Runtime {
	t.Helper()
	L := lua.NewState(runtime.StateOptions())
	rt, err := runtime.NewRuntime(L, &runtime.Services{Capabilities: []runtime.Capability{c}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(time.Second); L.Close() })
	return rt
}

func count(t *testing.T, rt *runtime.Runtime, f func(*runtime.Runtime) int) (n int) {
	t.Helper()
	if err := rt.Do(func(*lua.LState) error { n = f(rt); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// Unsubscribed subscriptions leave nothing behind in the runtime.
func TestSubscribeUnsubscribeLeavesNoCloser(t *testing.T) {
	rt := capRuntime(t, &bindings.Global{Store: kv.NewMemory(), Bus: pubsub.NewMemory(), Inline: true})
	before := count(t, rt, runtime.Closers)
	if err := rt.RunString(`
		local g = shield.global()
		for i = 1, 1000 do g:subscribe("c" .. i, function() end):unsubscribe() end`, "test.lua"); err != nil {
		t.Fatal(err)
	}
	if after := count(t, rt, runtime.Closers); after != before {
		t.Fatalf("%d closers after 1000 subscribe/unsubscribe pairs (was %d)", after, before)
	}
}

// Holds taken and released, and a task that ends holding a lock, leave no
// task thread behind beyond the pool of spare threads.
func TestTasksThatTookLocksLeaveNoThreads(t *testing.T) {
	rt := capRuntime(t, &bindings.Locks{Local: local.NewManager(nil), Dist: lock.NewMemory(nil), Config: config.Default().Lock})
	if err := rt.RunString(`
		local l, d = shield.mutex("again"), shield.distributed_mutex("again-d")
		for i = 1, 500 do
			assert(l:acquire()); assert(d:acquire()); assert(d:release()); assert(l:release())
			shield.spawn(function() assert(l:acquire()); assert(l:release()) end)
		end
		shield.spawn(function() assert(l:acquire()) end) -- ends holding it`, "test.lua"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rt.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, rt, runtime.Threads); n > runtime.MaxSpareThreads {
		t.Fatalf("%d threads (at most %d spare)", n, runtime.MaxSpareThreads)
	}
}
