// Command schedbench measures shield.scheduler() from Lua and prints a
// markdown report (docs/performance.md quotes it):
//
//   - trigger lateness — a firing task's start, read in the Lua function
//     the firing runs, minus its scheduled time — P50/P99/max with 1 000 and
//     100 000 registered tasks at 1 000 and 10 000 firings/s, on the
//     embedded (memory) backend, without and with a parallel CPU load (a
//     busy goroutine in the process, or spinning processes, one per CPU);
//   - registration cost of 100 000 tasks from one Lua task (local, and
//     distributed on the memory store);
//   - with -redis: lateness of distributed firings (claimed in Redis) and
//     the cost of registering distributed tasks there.
//
// The firings come from 1 000 interval tasks whose anchors are spread over
// one period (interval = 1 000 / rate seconds); the other registered tasks
// wait an hour. Each case runs in a fresh Module.
//
//	cd bench && go run ./cmd/schedbench                                      # memory only
//	bash scripts/with-redis.sh sh -c 'cd bench && go run ./cmd/schedbench'   # from the repo root, adds Redis
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/trace"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/bench/internal/benchutil"
	"github.com/shieldrt/shieldglobal/config"
)

var (
	flagRedis    = flag.String("redis", os.Getenv("SHIELD_TEST_REDIS_URL"), "Redis URL, loopback only (default $SHIELD_TEST_REDIS_URL; empty: memory cases only)")
	flagDuration = flag.Duration("duration", 5*time.Second, "measuring window of one lateness case")
	flagActive   = flag.Int("active", 1000, "tasks that fire (the rest of the registered tasks wait an hour)")
	flagRegister = flag.Int("register", 100000, "tasks of the registration case")
	flagQuick    = flag.Bool("quick", false, "only the first case of each table (a smoke run)")
	// One lateness case alone, for before/after comparisons in interleaved
	// runs: -registered 100000 -rate 10000 -load none.
	flagRegistered = flag.Int("registered", 0, "run only the memory lateness case with this many registered tasks (see -rate, -load)")
	flagRate       = flag.Int("rate", 10000, "firings/s of the -registered case")
	flagLoad       = flag.String("load", "none", `parallel load of the -registered case: "none", "busy" (a busy goroutine) or "spin" (spinning processes)`)
	flagTrace      = flag.String("trace", "", "write a runtime/trace of the -registered case's window to this file (see what delays the late firings)")
)

// loadNames are the parallel loads, by their -load names.
var loadNames = map[string]string{"none": "none", "busy": "busy goroutine", "spin": "spinning processes"}

func main() {
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("# schedbench: shield.scheduler() measured from Lua\n\n")
	fmt.Printf("- Go %s, %d CPUs (GOMAXPROCS %d), load average at start %s\n", runtime.Version(), runtime.NumCPU(),
		runtime.GOMAXPROCS(0), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Printf("- lateness: %d firing tasks, window %v per case after one period of warm-up; start read in Lua (µs clock), minus the scheduled time\n\n",
		*flagActive, *flagDuration)

	if *flagRegistered > 0 {
		one(log)
		return
	}
	fmt.Printf("## Trigger lateness, memory backend (local tasks)\n\n")
	fmt.Printf("| registered | firings/s | parallel load | samples | P50 ms | P99 ms | max ms |\n|---|---|---|---|---|---|---|\n")
	loads := []string{"none", "busy goroutine", "spinning processes"}
	for _, ld := range loads {
		for _, registered := range []int{1000, 100000} {
			for _, rate := range []int{1000, 10000} {
				r := lateness(log, config.Default(), registered, rate, false, ld)
				fmt.Printf("| %d | %d | %s | %d | %.3f | %.3f | %.3f |\n", registered, rate, ld, r.n, r.p50, r.p99, r.max)
				if *flagQuick {
					break
				}
			}
			if *flagQuick {
				break
			}
		}
		if *flagQuick {
			break
		}
	}
	fmt.Println()

	fmt.Printf("## Registration from one Lua task, memory backend\n\n")
	fmt.Printf("| tasks | kind | total ms | µs per task |\n|---|---|---|---|\n")
	for _, dist := range []bool{false, true} {
		kind := "local"
		if dist {
			kind = "distributed (memory store)"
		}
		total := register(log, config.Default(), *flagRegister, 1, dist)
		fmt.Printf("| %d | %s | %.0f | %.2f |\n", *flagRegister, kind, ms(total), float64(total.Microseconds())/float64(*flagRegister))
	}
	fmt.Println()

	if *flagRedis == "" {
		fmt.Printf("(no -redis: distributed cases on Redis skipped)\n")
		return
	}
	rc, opt := benchutil.Connect(context.Background(), *flagRedis)
	defer rc.Close()
	prefix := "schedbench:" + benchutil.RandHex(6) + ":"
	defer benchutil.Cleanup(rc, prefix)
	cfg := config.Default()
	cfg.Global.Redis.URL, cfg.Global.Redis.Prefix = *flagRedis, prefix

	fmt.Printf("## Distributed tasks on Redis %s (claimed in Redis, one round trip per firing)\n\n", opt.Addr)
	fmt.Printf("| registered | firings/s | samples | P50 ms | P99 ms | max ms |\n|---|---|---|---|---|---|\n")
	for _, rate := range []int{1000, 10000} {
		r := lateness(log, cfg, *flagActive, rate, true, "none")
		fmt.Printf("| %d | %d | %d | %.3f | %.3f | %.3f |\n", *flagActive, rate, r.n, r.p50, r.p99, r.max)
		if *flagQuick {
			break
		}
	}
	fmt.Println()
	fmt.Printf("| distributed tasks registered on Redis | Lua tasks registering | total ms | µs per task |\n|---|---|---|---|\n")
	for _, par := range []int{1, 100} {
		n := 10000
		total := register(log, cfg, n, par, true)
		fmt.Printf("| %d | %d | %.0f | %.2f |\n", n, par, ms(total), float64(total.Microseconds())/float64(n))
	}
}

// one runs the -registered case alone and adds what the GC did in its
// window (the cause of the tail at 100 000 registered tasks).
func one(log *slog.Logger) {
	ld, ok := loadNames[*flagLoad]
	if !ok || *flagRate <= 0 {
		benchutil.Fatalf("-load %q -rate %d: want -load none, busy or spin and -rate > 0", *flagLoad, *flagRate)
	}
	r := lateness(log, config.Default(), *flagRegistered, *flagRate, false, ld)
	fmt.Printf("| registered | firings/s | parallel load | samples | P50 ms | P99 ms | max ms | GCs in window | heap MB at start |\n|---|---|---|---|---|---|---|---|---|\n")
	fmt.Printf("| %d | %d | %s | %d | %.3f | %.3f | %.3f | %d | %.1f |\n", *flagRegistered, *flagRate, ld, r.n, r.p50, r.p99, r.max,
		r.gcs, float64(r.heap)/(1<<20))
}

type result struct {
	n             int
	p50, p99, max float64 // ms
	gcs           uint32  // GC cycles that ended in the window
	heap          uint64  // live heap at the window's start (bytes, as of the latest GC)
}

// lateness runs one case in a fresh Module and returns the lateness
// distribution of the firings scheduled inside the window.
func lateness(log *slog.Logger, cfg config.Config, registered, rate int, dist bool, load string) result {
	mod, err := shieldglobal.New(cfg, shieldglobal.WithLogger(log))
	if err != nil {
		benchutil.Fatalf("shieldglobal.New: %v", err)
	}
	defer mod.Close()
	L := lua.NewState(shieldglobal.StateOptions())
	defer L.Close()
	rt, err := mod.NewRuntime(L)
	if err != nil {
		benchutil.Fatalf("NewRuntime: %v", err)
	}
	defer rt.Close(time.Second)

	active := min(*flagActive, registered)
	period := max(1, active*1000/rate) // ms
	var mu sync.Mutex
	var samples []float64
	var from, to atomic.Int64 // window, µs
	to.Store(1 << 62)
	from.Store(1 << 62)
	if err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("bench_now_us", L.NewFunction(func(L *lua.LState) int {
			L.Push(lua.LNumber(float64(time.Now().UnixNano()) / 1e3))
			return 1
		}))
		L.SetGlobal("bench_record", L.NewFunction(func(L *lua.LState) int {
			sched := float64(L.CheckNumber(1)) * 1e3
			if sched >= float64(from.Load()) && sched < float64(to.Load()) {
				mu.Lock()
				samples = append(samples, float64(L.CheckNumber(2))/1e3)
				mu.Unlock()
			}
			return 0
		}))
		return nil
	}); err != nil {
		benchutil.Fatalf("setup: %v", err)
	}
	err = rt.RunString(`
		local n_idle, n_active, period, dist = ...
		local s = shield.scheduler()
		local now_us, record = bench_now_us, bench_record
		local opts = { distributed = dist, overlap = "allow" }
		local function idle() end
		for i = 1, n_idle do
			s:interval("idle" .. i, 3600000, idle, opts)
			if i % 5000 == 0 then shield.sleep(0) end -- let the rest of the runtime in
		end
		local function fire(info)
			record(info.scheduled, now_us() - info.scheduled * 1000)
		end
		-- spread the anchors over one period: n_active / period tasks a millisecond
		local per_ms = math.max(1, math.ceil(n_active / period))
		local i = 0
		while i < n_active do
			for _ = 1, per_ms do
				i = i + 1
				if i > n_active then break end
				s:interval("active" .. i, period, fire, opts)
			end
			shield.sleep(1)
		end`, "schedbench.lua", lua.LNumber(registered-active), lua.LNumber(active), lua.LNumber(period), lua.LBool(dist))
	if err != nil {
		benchutil.Fatalf("register: %v", err)
	}
	stopLoad := startLoad(load)
	start := time.Now().Add(time.Duration(period)*time.Millisecond + 200*time.Millisecond)
	from.Store(start.UnixMicro())
	to.Store(start.Add(*flagDuration).UnixMicro())
	time.Sleep(time.Until(start))
	if *flagTrace != "" {
		f, err := os.Create(*flagTrace)
		if err != nil {
			benchutil.Fatalf("-trace: %v", err)
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			benchutil.Fatalf("-trace: %v", err)
		}
		defer trace.Stop()
	}
	// runtime/metrics, not ReadMemStats, which stops the world at the
	// window's edges.
	at0 := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(at0)
	time.Sleep(time.Until(start.Add(*flagDuration + 100*time.Millisecond)))
	at1 := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(at1)
	stopLoad()
	mu.Lock()
	defer mu.Unlock()
	r := summarize(samples)
	r.gcs, r.heap = uint32(at1[0].Value.Uint64()-at0[0].Value.Uint64()), at0[1].Value.Uint64()
	return r
}

func summarize(xs []float64) result {
	if len(xs) == 0 {
		return result{}
	}
	sort.Float64s(xs)
	q := func(p float64) float64 { return xs[min(len(xs)-1, int(p*float64(len(xs))))] }
	return result{n: len(xs), p50: q(0.50), p99: q(0.99), max: xs[len(xs)-1]}
}

// register times n registrations from par Lua tasks in a fresh Module.
func register(log *slog.Logger, cfg config.Config, n, par int, dist bool) time.Duration {
	mod, err := shieldglobal.New(cfg, shieldglobal.WithLogger(log))
	if err != nil {
		benchutil.Fatalf("shieldglobal.New: %v", err)
	}
	defer mod.Close()
	L := lua.NewState(shieldglobal.StateOptions())
	defer L.Close()
	rt, err := mod.NewRuntime(L)
	if err != nil {
		benchutil.Fatalf("NewRuntime: %v", err)
	}
	defer rt.Close(time.Second)
	t0 := time.Now()
	err = rt.RunString(`
		local n, par, dist = ...
		local s = shield.scheduler()
		local opts = { distributed = dist }
		local function job() end
		local done = 0
		for w = 1, par do
			shield.spawn(function()
				for i = w, n, par do
					s:interval("reg" .. i, 3600000, job, opts)
					if i % 5000 == 0 then shield.sleep(0) end -- let the rest of the runtime in
				end
				done = done + 1
			end)
		end
		while done < par do shield.sleep(1) end`, "register.lua", lua.LNumber(n), lua.LNumber(par), lua.LBool(dist))
	if err != nil {
		benchutil.Fatalf("register: %v", err)
	}
	return time.Since(t0)
}

// startLoad starts the parallel CPU load of a case and returns its stop.
func startLoad(kind string) func() {
	switch kind {
	case "busy goroutine":
		var stop atomic.Bool
		go func() {
			x := 0
			for !stop.Load() {
				x++
			}
			_ = x
		}()
		return func() { stop.Store(true) }
	case "spinning processes":
		var cmds []*exec.Cmd
		for range runtime.NumCPU() {
			c := exec.Command("sh", "-c", "while :; do :; done")
			if err := c.Start(); err != nil {
				benchutil.Fatalf("load: %v", err)
			}
			cmds = append(cmds, c)
		}
		return func() {
			for _, c := range cmds {
				c.Process.Kill()
				c.Wait()
			}
		}
	}
	return func() {}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
