package shieldglobal

import (
	"context"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// Benchmarks of shield.global from Lua, each against a baseline measured in
// the same run (docs/performance.md reports the ratios):
//
//	make bench     # or: bash scripts/with-redis.sh go test -run=NONE -bench=. -benchmem .

// benchLua runs setup once, then `body` b.N times in a Lua for loop inside a task.
func benchLua(b *testing.B, rt *Runtime, setup, body string) {
	b.Helper()
	if setup != "" {
		if err := rt.RunString(setup, "setup.lua"); err != nil {
			b.Fatal(err)
		}
	}
	if err := rt.Do(func(L *lua.LState) error { L.SetGlobal("N", lua.LNumber(b.N)); return nil }); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := rt.RunString("for i = 1, N do "+body+" end", "bench.lua"); err != nil {
		b.Fatal(err)
	}
}

func benchRuntime(b *testing.B, cfg Config) *Runtime {
	b.Helper()
	m, err := New(cfg, WithLogger(quietLog()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	L := lua.NewState()
	rt, err := m.NewRuntime(L)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(0); L.Close() })
	// Baseline helpers: an empty Go function, and a blocking call that
	// completes at once (the cost of the yield round trip alone).
	err = rt.Do(func(L *lua.LState) error {
		L.SetGlobal("empty", L.NewFunction(func(*lua.LState) int { return 0 }))
		L.SetGlobal("block", L.NewFunction(func(L *lua.LState) int {
			return rt.rt.Block(L, "block", func(w *runtime.Wait) func() {
				w.Complete(func() ([]lua.LValue, error) { return nil, nil })
				return nil
			})
		}))
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return rt
}

func BenchmarkEmptyGoCall(b *testing.B) {
	benchLua(b, benchRuntime(b, config.Default()), "", "empty()")
}

func BenchmarkYieldRoundTrip(b *testing.B) {
	benchLua(b, benchRuntime(b, config.Default()), "", "block()")
}

func BenchmarkGlobalGetMemory(b *testing.B) {
	benchLua(b, benchRuntime(b, config.Default()), `shield.global():set("k", "value")`,
		`local g = shield.global(); g:get("k")`)
}

func BenchmarkGlobalGetCachedMemory(b *testing.B) {
	benchLua(b, benchRuntime(b, config.Default()), `shield.global():set("k", "value")`,
		`local g = shield.global(); g:get_cached("k", 600000)`)
}

func redisBenchConfig(b *testing.B) Config {
	cfg := config.Default()
	cfg.Global.Redis.URL = testredis.URL(b)
	cfg.Global.Redis.Prefix = testredis.Prefix(b)
	return cfg
}

func BenchmarkGlobalGetRedis(b *testing.B) {
	benchLua(b, benchRuntime(b, redisBenchConfig(b)), `shield.global():set("k", "value")`,
		`local g = shield.global(); g:get("k")`)
}

func BenchmarkGlobalSetRedis(b *testing.B) {
	cfg := redisBenchConfig(b)
	cfg.Global.Cache.Sync = false // the raw SET baseline announces nothing either
	benchLua(b, benchRuntime(b, cfg), "", `local g = shield.global(); g:set("k", "value")`)
}

func BenchmarkGlobalSetRedisSynced(b *testing.B) {
	benchLua(b, benchRuntime(b, redisBenchConfig(b)), "", `local g = shield.global(); g:set("k", "value")`)
}

func BenchmarkGlobalGetCachedRedis(b *testing.B) {
	benchLua(b, benchRuntime(b, redisBenchConfig(b)), `shield.global():set("k", "value")`,
		`local g = shield.global(); g:get_cached("k", 600000)`)
}

func BenchmarkRawGoRedisGet(b *testing.B) {
	c := testredis.Standalone(b)
	ctx := context.Background()
	c.Set(ctx, "bench:raw", `"value"`, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Get(ctx, "bench:raw").Err(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawGoRedisSet(b *testing.B) {
	c := testredis.Standalone(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Set(ctx, "bench:raw", `"value"`, 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// Host calls into a trivial script function from 32 goroutines: Call (a
// task per call, results when it ends), Go (the same without a waiting
// goroutine: the callback gets the results) and the baseline, Do running
// L.CallByParam on the loop (no task: the function may not block).
const hostCallers = 32

func hostRuntime(b *testing.B) *Runtime {
	rt := benchRuntime(b, config.Default())
	if err := rt.RunString(`function add(a, b) return a + b end`, "add.lua"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism((hostCallers + 1) / 2) // GOMAXPROCS 2 here: 32 goroutines
	return rt
}

func BenchmarkHostCall32(b *testing.B) {
	rt := hostRuntime(b)
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r, err := rt.Call(ctx, "add", 1, 2); err != nil || r[0] != lua.LNumber(3) {
				b.Fatal(r, err)
			}
		}
	})
}

func BenchmarkHostGo32(b *testing.B) {
	rt := hostRuntime(b)
	b.RunParallel(func(pb *testing.PB) {
		done := make(chan error, 1)
		for pb.Next() {
			rt.Go("add", []any{1, 2}, func(r []lua.LValue, err error) { done <- err })
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkHostDoCallByParam32(b *testing.B) {
	rt := hostRuntime(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			err := rt.Do(func(L *lua.LState) error {
				if err := L.CallByParam(lua.P{Fn: L.GetGlobal("add"), NRet: 1, Protect: true}, lua.LNumber(1), lua.LNumber(2)); err != nil {
					return err
				}
				L.Pop(1)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
