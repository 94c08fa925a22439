package bindings

import (
	"strconv"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/ratelimit"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// The cost of a token-bucket allow() from Lua, against the same call shape
// to an empty Go method (a userdata with a metatable, called with ':' and a
// string key) and to an empty global Go function, in one runtime:
//
//	go test -run NONE -bench 'LuaAllow|LuaEmpty' -benchmem ./bindings/
func benchLimiterLoop(b *testing.B, setup, body string) {
	rt := newLimiterRuntime(b, ratelimit.NewMemory(ratelimit.Config{}))
	err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("empty", L.NewFunction(func(*lua.LState) int { return 0 }))
		mt := L.NewTable()
		methods := L.NewTable()
		methods.RawSetString("allow", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LTrue); return 1 }))
		runtime.SetMethods(L, mt, methods)
		ud := L.NewUserData()
		ud.Metatable = mt
		L.SetGlobal("obj", ud)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.RunString(setup, "setup.lua"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := rt.RunString("for i = 1, "+strconv.Itoa(b.N)+" do "+body+" end", "bench.lua"); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkLuaEmptyFunction(b *testing.B) { benchLimiterLoop(b, "", `empty()`) }

func BenchmarkLuaEmptyMethod(b *testing.B) { benchLimiterLoop(b, "", `obj:allow("client-ip")`) }

func BenchmarkLuaAllowTokenBucket(b *testing.B) {
	benchLimiterLoop(b, `l = shield.rate_limiter("bench", { rate = 1e12, burst = 1e12 })`, `l:allow("client-ip")`)
}

func BenchmarkLuaAllowTokenBucketRejected(b *testing.B) {
	benchLimiterLoop(b, `l = shield.rate_limiter("bench", { rate = 0.001, burst = 1 })`, `l:allow("client-ip")`)
}

func BenchmarkLuaRemainingTokenBucket(b *testing.B) {
	benchLimiterLoop(b, `l = shield.rate_limiter("bench", { rate = 1e12, burst = 1e12 })`, `l:remaining("client-ip")`)
}

func BenchmarkLuaAllowSlidingWindowMemory(b *testing.B) {
	benchLimiterLoop(b, `l = shield.rate_limiter("bench", { window = 1, max_requests = 1e9, sliding = true })`, `l:allow("client-ip")`)
}
