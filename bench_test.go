package shieldglobal

import (
	"context"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/bindings"
	"github.com/shieldrt/shieldglobal/config"
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
			return rt.Suspend(L, "block", func(complete func(bindings.Result)) {
				complete(func() ([]lua.LValue, error) { return nil, nil })
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
