package bindings

import (
	"context"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/internal/edge"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// BenchmarkSchedulerRegister registers b.N interval tasks from one Lua task
// (the real clock; the tasks wait an hour). heap-B/task and heap-objs/task
// are what each registered task keeps on the heap (after a GC): the engine's
// task and this runtime's bookkeeping of it, which every GC cycle marks.
func BenchmarkSchedulerRegister(b *testing.B) {
	rt := schedulerRuntime(b, nil)
	if err := rt.RunString(`names = {} for i = 1, ... do names[i] = "t" .. i end`, "names.lua", lua.LNumber(b.N)); err != nil {
		b.Fatal(err)
	}
	before := heapNow()
	b.ResetTimer()
	if err := rt.RunString(`
		local s, n, names = shield.scheduler(), ..., names
		local function job() end
		for i = 1, n do s:interval(names[i], 3600000, job) end`, "bench.lua", lua.LNumber(b.N)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	after := heapNow()
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "heap-B/task")
	b.ReportMetric(float64(int64(after.HeapObjects)-int64(before.HeapObjects))/float64(b.N), "heap-objs/task")
}

// BenchmarkSchedulerRegisterCron is BenchmarkSchedulerRegister with a cron
// schedule (the same expression for every task, as a server registers
// them).
func BenchmarkSchedulerRegisterCron(b *testing.B) {
	rt := schedulerRuntime(b, nil)
	if err := rt.RunString(`names = {} for i = 1, ... do names[i] = "t" .. i end`, "names.lua", lua.LNumber(b.N)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := rt.RunString(`
		local s, n, names = shield.scheduler(), ..., names
		local function job() end
		for i = 1, n do s:cron(names[i], "*/5 * * * *", job) end`, "bench.lua", lua.LNumber(b.N)); err != nil {
		b.Fatal(err)
	}
}

// schedulerRuntime is a runtime of the CLI's state whose shield.scheduler
// is an Engine of its own on clk (nil: the real clock), all closed when b
// ends.
func schedulerRuntime(b *testing.B, clk *benchClock) *runtime.Runtime {
	s := NewScheduler()
	cfg := scheduler.Config{Events: s.Event, Defaults: edge.SchedulerOptions(config.Default().Scheduler)}
	svc := &runtime.Services{Capabilities: []runtime.Capability{s}}
	if clk != nil {
		cfg.Clock, s.Now, svc.Now = clk, clk.Now, clk.Now
	}
	e, err := scheduler.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	s.Engine = e
	b.Cleanup(func() { e.Close(context.Background()) })
	L := lua.NewState(runtime.StateOptions())
	b.Cleanup(L.Close)
	rt, err := runtime.NewRuntime(L, svc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(0) })
	return rt
}

// heapNow is the live heap after a full GC.
func heapNow() goruntime.MemStats {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m
}

// benchClock is a clock the benchmark moves: AfterFunc keeps the latest
// function (the Engine arms one timer at a time) and Advance calls it, so
// the clock itself allocates nothing.
type benchClock struct {
	now atomic.Int64 // Unix ns
	mu  sync.Mutex
	f   func()
}

func (c *benchClock) Now() time.Time { return time.Unix(0, c.now.Load()) }

func (c *benchClock) AfterFunc(d time.Duration, f func()) scheduler.Timer {
	c.mu.Lock()
	c.f = f
	c.mu.Unlock()
	return c
}

func (c *benchClock) Stop() bool { return true }

func (c *benchClock) Advance(d time.Duration) {
	c.now.Add(int64(d))
	c.mu.Lock()
	f := c.f
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

// BenchmarkSchedulerFiring is the whole cost of one firing of a local task
// from Lua: the Engine's firing, the run posted to the runtime, the Lua
// function called with its info table (it reads info.scheduled, as most
// jobs read something of it) and the run's end back in the Engine. 1 000
// interval tasks fire in turn, one per millisecond of a manual clock.
func BenchmarkSchedulerFiring(b *testing.B) {
	clk := &benchClock{}
	clk.now.Store(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	rt := schedulerRuntime(b, clk)
	fired := make(chan struct{}, 1<<16)
	if err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("bench_fired", L.NewFunction(func(L *lua.LState) int { fired <- struct{}{}; return 0 }))
		L.SetGlobal("bench_tick", L.NewFunction(func(L *lua.LState) int { clk.now.Add(int64(time.Millisecond)); return 0 }))
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	// One registration a millisecond: the anchors are spread over a second.
	if err := rt.RunString(`
		local s, fired, tick = shield.scheduler(), bench_fired, bench_tick
		local function job(info) local _ = info.scheduled; fired() end
		for i = 1, 1000 do
			s:interval("t" .. i, 1000, job, { overlap = "allow" })
			tick()
		end`, "bench.lua"); err != nil {
		b.Fatal(err)
	}
	tick := func(n int) {
		for range n {
			clk.Advance(time.Millisecond)
			<-fired
		}
	}
	tick(2000) // warm up: every pool and slice at its size
	b.ReportAllocs()
	b.ResetTimer()
	tick(b.N)
}
