package bindings

import (
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/lock/local"
	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// BenchmarkDistributedMutexPairs32Tasks: 32 tasks of one runtime doing
// distributed_mutex acquire+release on their own keys, on Redis (one op =
// one pair; the tasks' operations share each loop turn's pipeline).
func BenchmarkDistributedMutexPairs32Tasks(b *testing.B) {
	c := testredis.Standalone(b)
	bus := pubsub.NewRedis(c, "", pubsub.Events{})
	b.Cleanup(func() { bus.Close() })
	locks := &Locks{Local: local.NewManager(nil), Dist: lock.NewRedis(c, testredis.Prefix(b), bus), Config: config.Default().Lock}
	L := lua.NewState()
	rt, err := runtime.NewRuntime(L, &runtime.Services{Capabilities: []runtime.Capability{locks}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(time.Second); L.Close() })
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	err = rt.RunString(`
		local n = ...
		local per, finished = math.ceil(n / 32), 0
		for t = 1, 32 do
			shield.spawn(function()
				local ls = {}
				for k = 0, 7 do ls[k] = shield.distributed_mutex("b:" .. t .. ":" .. k, { ttl = 30000, auto_extend = false }) end
				for i = 1, per do
					local l = ls[i % 8]
					assert(l:acquire()); assert(l:release())
				end
				finished = finished + 1
			end)
		end
		while finished < 32 do shield.sleep(1) end`, "bench.lua", lua.LNumber(b.N))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime is this process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLocalMutexPair: an uncontended shield.mutex acquire+release from
// Lua inside a task (one op = one pair); BenchmarkEmptyCallFromLua is the
// unit lockbench's section 3 divides by.
func BenchmarkLocalMutexPair(b *testing.B) {
	benchLuaLoop(b, `local m = shield.mutex("bench")`, `assert(m:acquire()); assert(m:release())`)
}

func BenchmarkEmptyCallFromLua(b *testing.B) { benchLuaLoop(b, ``, `empty()`) }

func benchLuaLoop(b *testing.B, setup, body string) {
	benchLuaLoopWith(b, nil, setup, body)
}

// benchLuaLoopWith runs body b.N times in a Lua loop of one task, with
// empty() and what globals sets up defined; it reports the process's CPU
// time per iteration too (cpu-ns/op), steadier than wall time on a busy
// machine.
func benchLuaLoopWith(b *testing.B, globals func(rt *runtime.Runtime, L *lua.LState), setup, body string) {
	L := lua.NewState(runtime.StateOptions())
	rt, err := runtime.NewRuntime(L, &runtime.Services{Capabilities: []runtime.Capability{testLocks()}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(time.Second); L.Close() })
	if err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("empty", L.NewFunction(func(*lua.LState) int { return 0 }))
		if globals != nil {
			globals(rt, L)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	if err := rt.RunString(setup+"\nlocal n = ...\nfor i = 1, n do "+body+" end", "bench.lua", lua.LNumber(b.N)); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
