package scheduler

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// Trigger lateness: the start of the RunFunc minus the scheduled fire time,
// with `tasks` registered one-shot tasks of which `rate` per second come due
// over a window; the rest are due hours later and only weigh on the heap.
// Each benchmark run measures one window (b.N is ignored beyond that):
//
//	go test -run '^$' -bench Lateness -benchtime=1x ./core/scheduler/
func BenchmarkLateness(b *testing.B) {
	for _, c := range []struct{ tasks, rate int }{{1000, 1000}, {100000, 1000}, {100000, 10000}} {
		b.Run(fmt.Sprintf("tasks=%d/rate=%d", c.tasks, c.rate), func(b *testing.B) {
			for range b.N {
				lateness(b, c.tasks, c.rate, 2*time.Second)
			}
		})
	}
}

// BenchmarkLatenessDistributed is BenchmarkLateness for distributed tasks
// on standalone Redis (claimed ClaimAhead before their fire time, so the
// claim's round trip is off the start), registered in batches of 1000 as
// the Lua runtime batches its tasks' operations.
func BenchmarkLatenessDistributed(b *testing.B) {
	c := testredis.Standalone(b)
	for _, cs := range []struct{ tasks, rate int }{{1000, 1000}, {10000, 1000}} {
		b.Run(fmt.Sprintf("tasks=%d/rate=%d", cs.tasks, cs.rate), func(b *testing.B) {
			for range b.N {
				st := NewRedis(c, testredis.Prefix(b), RedisOptions{})
				e, err := New(Config{Store: st})
				if err != nil {
					b.Fatal(err)
				}
				latenessOn(b, e, true, cs.tasks, cs.rate, 2*time.Second)
				closeEngine(b, e)
				st.Close()
			}
		})
	}
}

func lateness(b *testing.B, tasks, rate int, window time.Duration) {
	e, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer closeEngine(b, e)
	latenessOn(b, e, false, tasks, rate, window)
}

func latenessOn(b *testing.B, e *Engine, distributed bool, tasks, rate int, window time.Duration) {
	firings := min(tasks, int(window.Seconds()*float64(rate)))
	lat := make([]time.Duration, 0, firings)
	var mu sync.Mutex
	all := make(chan struct{})
	run := func(f Firing, done func(error)) {
		d := time.Since(f.Scheduled)
		mu.Lock()
		lat = append(lat, d)
		n := len(lat)
		mu.Unlock()
		done(nil)
		if n == firings {
			close(all)
		}
	}
	o := e.DefaultOptions()
	o.Distributed = distributed
	perTask := 25 * time.Microsecond
	if distributed {
		perTask = 200 * time.Microsecond
	}
	start := time.Now().Add(time.Second + time.Duration(tasks)*perTask).Truncate(time.Millisecond)
	step := time.Second / time.Duration(rate)
	var batch store.Batch
	var ops []*store.Op[Info]
	flush := func() {
		batch.Exec(context.Background())
		for _, op := range ops {
			if _, err := op.Result(); err != nil {
				b.Fatal(err)
			}
		}
		ops = ops[:0]
	}
	for i := range tasks {
		at := start.Add(time.Duration(i) * step)
		if i >= firings {
			at = start.Add(time.Hour + time.Duration(i)*time.Millisecond)
		}
		op := e.Register(Task{Name: "t" + strconv.Itoa(i), Schedule: At(at), Options: o, Run: run})
		if op.Kind() != store.KindRedis {
			if _, err := op.Do(context.Background()); err != nil {
				b.Fatal(err)
			}
			continue
		}
		batch.Add(op)
		ops = append(ops, op)
		if len(ops) == 1000 {
			flush()
		}
	}
	flush()
	if time.Now().After(start) {
		b.Fatalf("registering %d tasks took past the start", tasks)
	}
	select {
	case <-all:
	case <-time.After(window + 30*time.Second):
		b.Fatalf("only %d of %d firings ran", len(lat), firings)
	}
	reportLateness(b, lat)
}

func reportLateness(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkGoTimers is the reference: one Go runtime timer per task, the
// same load as BenchmarkLateness.
func BenchmarkGoTimers(b *testing.B) {
	for _, c := range []struct{ tasks, rate int }{{100000, 1000}} {
		b.Run(fmt.Sprintf("tasks=%d/rate=%d", c.tasks, c.rate), func(b *testing.B) {
			for range b.N {
				firings := int(2 * c.rate)
				lat := make([]time.Duration, 0, firings)
				var mu sync.Mutex
				all := make(chan struct{})
				start := time.Now().Add(time.Second)
				step := time.Second / time.Duration(c.rate)
				var timers []*time.Timer
				for i := range c.tasks {
					at := start.Add(time.Duration(i) * step)
					if i >= firings {
						at = start.Add(time.Hour)
					}
					timers = append(timers, time.AfterFunc(time.Until(at), func() {
						d := time.Since(at)
						mu.Lock()
						lat = append(lat, d)
						if len(lat) == firings {
							close(all)
						}
						mu.Unlock()
					}))
				}
				<-all
				for _, t := range timers {
					t.Stop()
				}
				reportLateness(b, lat)
			}
		})
	}
}

// BenchmarkRegister is the cost of registering one local task into an
// engine holding many (the bar: 100 000 in <= 2 s).
func BenchmarkRegister(b *testing.B) {
	e, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer closeEngine(b, e)
	o := e.DefaultOptions()
	s, _ := Cron("0 3 * * *")
	run := func(f Firing, done func(error)) { done(nil) }
	b.ResetTimer()
	for i := range b.N {
		if _, err := e.Register(Task{Name: "t" + strconv.Itoa(i), Schedule: s, Options: o, Run: run}).Do(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaim compares a distributed claim (claim.lua: the one round
// trip a firing adds) with a raw EVALSHA round trip of a trivial script on
// the same client, as concurrent throughput (16 callers; one-caller round
// trips are bimodal on a shared 2-vCPU machine). Each claim is of a new
// firing, the common path: the firing is free and gets a lease.
func BenchmarkClaim(b *testing.B) {
	c := testredis.Standalone(b)
	prefix := testredis.Prefix(b)
	st := NewRedis(c, prefix, RedisOptions{})
	every, _ := Every(time.Second)
	reg, err := st.register(def{Name: "bench", Kind: KindInterval, Spec: every.spec, Text: every.text}).op().Do(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var fire atomic.Int64 // each claim takes the next millisecond (Early lets it come before its time)
	fire.Store(reg.Cursor)
	b.Run("claim", func(b *testing.B) {
		defer reportServerTime(b, c)()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				f := fire.Add(1)
				res, err := st.claim(claim{Name: "bench", Fire: f, Owner: "o", Lease: time.Second, ExpectPrev: f - 1,
					CatchUp: time.Hour, Early: time.Hour}).op().Do(context.Background())
				if err != nil || (res.Outcome != outcomeClaimed && res.Outcome != outcomeTaken) {
					b.Errorf("claim: %+v, %v", res, err)
					return
				}
			}
		})
	})
	raw := store.NewScript("bench/raw.lua", "return redis.call('EXISTS', KEYS[1])")
	b.Run("raw-evalsha", func(b *testing.B) {
		key := []string{prefix + "raw"}
		defer reportServerTime(b, c)()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := raw.Run(context.Background(), c, key).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// reportServerTime resets the server's command statistics and returns a
// func that reports the server's time per EVALSHA (usec_per_call), the cost
// that does not depend on the client machine's load.
func reportServerTime(b *testing.B, c *redis.Client) func() {
	ctx := context.Background()
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	return func() {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if strings.HasPrefix(line, "cmdstat_evalsha:") {
				for _, kv := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_evalsha:")), ",") {
					if v, ok := strings.CutPrefix(kv, "usec_per_call="); ok {
						f, _ := strconv.ParseFloat(v, 64)
						b.ReportMetric(f, "server-µs/op")
					}
				}
			}
		}
	}
}

// BenchmarkRegisterFootprint is the heap a registered local task keeps
// (bytes and objects per task, after a GC), the weight every GC cycle
// marks: 100 000 interval tasks, as schedbench's idle ones.
func BenchmarkRegisterFootprint(b *testing.B) {
	const n = 100000
	o := builtinDefaults
	o.Overlap = OverlapAllow
	every, _ := Every(time.Hour)
	run := func(f Firing, done func(error)) { done(nil) }
	names := make([]string, n)
	for i := range names {
		names[i] = "t" + strconv.Itoa(i)
	}
	for range b.N {
		e, err := New(Config{})
		if err != nil {
			b.Fatal(err)
		}
		before := heapNow()
		for _, name := range names {
			do(b, e.Register(Task{Name: name, Schedule: every, Options: o, Run: run, Owner: "rt-1"}))
		}
		after := heapNow()
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/task")
		b.ReportMetric(float64(after.HeapObjects-before.HeapObjects)/n, "heap-objs/task")
		closeEngine(b, e)
	}
}

// heapNow is the live heap after a full GC.
func heapNow() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// manualClock is a clock the benchmark moves; AfterFunc only keeps the
// latest function (the engine arms one timer at a time) and never calls
// it, so the clock itself allocates nothing.
type manualClock struct {
	now atomic.Int64 // Unix ns
	mu  sync.Mutex
	f   func()
}

func (c *manualClock) Now() time.Time { return time.Unix(0, c.now.Load()) }

func (c *manualClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	c.f = f
	c.mu.Unlock()
	return c
}

func (c *manualClock) Stop() bool { return true }

// BenchmarkFiring is the engine's own cost of one firing of a local task:
// due, started, its RunFunc called (done at once), ended, among 1 000
// interval tasks, driven on the loop by a manual clock so that allocs/op
// counts the engine alone.
func BenchmarkFiring(b *testing.B) {
	clk := &manualClock{}
	clk.now.Store(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	e, err := New(Config{Clock: clk, Events: func(Event) {}})
	if err != nil {
		b.Fatal(err)
	}
	defer closeEngine(b, e)
	o := e.DefaultOptions()
	o.Overlap = OverlapAllow
	every, _ := Every(time.Second)
	fired := 0
	run := func(f Firing, done func(error)) { fired++; done(nil) }
	for i := range 1000 {
		do(b, e.Register(Task{Name: "t" + strconv.Itoa(i), Schedule: every, Options: o, Run: run, Owner: "rt-1"}))
		clk.now.Add(int64(time.Millisecond))
	}
	var msgs []message
	step := func() {
		clk.now.Add(int64(time.Millisecond))
		e.runDue()
		msgs = e.handleInbox(msgs)
		e.arm()
	}
	if err := e.call(func() {
		for range 2000 { // warm up: every slice at its size
			step()
		}
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := e.call(func() {
		fired = 0
		for fired < b.N {
			step()
		}
	}); err != nil {
		b.Fatal(err)
	}
}
