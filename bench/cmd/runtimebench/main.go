// Command runtimebench measures the Lua runtime's call path against plain
// go-redis and bsm/redislock in one run on one Redis server, and prints a
// markdown report (docs/performance.md quotes it):
//
//   - a yield round trip against an empty Go call from Lua (no Redis);
//   - 32 tasks of one runtime doing g:get against 32 goroutines doing GET,
//     and against one goroutine sending pipelines of 32 GETs;
//   - 32 tasks doing distributed_mutex acquire+release on distinct keys
//     against bsm/redislock with 32 goroutines;
//   - CPU time per g:get of one task against one goroutine's GET;
//   - Go heap per task parked in shield.sleep, and spawn time, at 10 000
//     tasks, with lua.NewState() defaults and with the CLI's state, in this
//     process after the other cases (which spawns faster than a fresh
//     process: cmd/spawnbench measures fresh processes).
//
// Throughput cases run in interleaved rounds (round 1 of every case, then
// round 2, ...); each ratio is computed per round and the median of the
// rounds is reported, so a busy moment of the machine hits both sides of a
// ratio alike.
//
//	bash scripts/with-redis.sh sh -c 'cd bench && go run ./cmd/runtimebench'   # from the repo root
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/bsm/redislock"
	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/bench/internal/benchutil"
	"github.com/shieldrt/shieldglobal/config"
)

var (
	flagRedis    = flag.String("redis", os.Getenv("SHIELD_TEST_REDIS_URL"), "Redis URL, loopback only (default $SHIELD_TEST_REDIS_URL)")
	flagSlice    = flag.Duration("slice", time.Second, "measuring time of one case in one round")
	flagRounds   = flag.Int("rounds", 3, "interleaved rounds")
	flagTasks    = flag.Int("tasks", 32, "concurrent tasks (and goroutines) of the throughput cases")
	flagParked   = flag.Int("parked", 10000, "tasks parked in shield.sleep for the memory case")
	flagYieldOps = flag.Int("yield-ops", 2_000_000, "iterations of the in-process yield and empty-call loops")
	flagCPUOps   = flag.Int("cpu-ops", 20000, "sequential calls of the CPU-per-call case")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	rc, opt := benchutil.Connect(ctx, *flagRedis)
	defer rc.Close()
	prefix := "runtimebench:" + benchutil.RandHex(6) + ":"
	defer benchutil.Cleanup(rc, prefix)

	cfg := config.Default()
	cfg.Global.Redis.URL = *flagRedis
	cfg.Global.Redis.Prefix = prefix
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mod, err := shieldglobal.New(cfg, shieldglobal.WithLogger(log))
	if err != nil {
		benchutil.Fatalf("shieldglobal.New: %v", err)
	}
	defer mod.Close()
	mem, err := shieldglobal.New(config.Default(), shieldglobal.WithLogger(log))
	if err != nil {
		benchutil.Fatalf("shieldglobal.New (memory): %v", err)
	}
	defer mem.Close()

	rt := newRuntime(mod, lua.NewState())
	memRT := newRuntime(mem, lua.NewState())
	if err := rt.RunString(`shield.global():set("k", "value")`, "setup.lua"); err != nil {
		benchutil.Fatalf("setup: %v", err)
	}
	rl := redislock.New(rc)
	n := *flagTasks

	fmt.Printf("# runtimebench: the Lua runtime's call path\n\n")
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("- Go %s, %d CPUs, load average at start %s; Redis %s at %s (loopback, sharing the CPUs)\n",
		runtime.Version(), runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "), benchutil.RedisVersion(ctx, rc), opt.Addr)
	fmt.Printf("- throughput: %d tasks / goroutines, %v per case per round, %d interleaved rounds; ratios are per-round, median reported\n\n",
		n, *flagSlice, *flagRounds)

	// ---- in-process: yield round trip vs empty Go call
	yieldRatios, emptyNs, yieldNs := []float64{}, []float64{}, []float64{}
	for r := 0; r < *flagRounds; r++ {
		e := benchutil.LuaLoopNs(memRT, `empty()`, *flagYieldOps)
		y := benchutil.LuaLoopNs(memRT, `block(0)`, *flagYieldOps/4)
		emptyNs, yieldNs = append(emptyNs, e), append(yieldNs, y)
		yieldRatios = append(yieldRatios, y/e)
	}
	fmt.Printf("## Yield round trip (memory backend, no I/O)\n\n")
	fmt.Printf("| case | ns/op (median) |\n|---|---|\n")
	fmt.Printf("| empty Go function called from Lua | %.0f |\n", benchutil.Median(emptyNs))
	fmt.Printf("| blocking call completed on the next loop turn (yield + resume) | %.0f |\n", benchutil.Median(yieldNs))
	fmt.Printf("| **ratio yield ÷ empty call** | **%.1f×** |\n\n", benchutil.Median(yieldRatios))

	// ---- throughput cases
	getLua := &benchutil.Case{Name: fmt.Sprintf("%d tasks in one runtime, `g:get` (Redis)", n), Run: func(d time.Duration) int {
		return benchutil.LuaTasks(rt, n, 1, d, `local g = shield.global()`, `g:get("k")`)
	}}
	getGo := &benchutil.Case{Name: fmt.Sprintf("%d goroutines, go-redis `GET`", n), Run: func(d time.Duration) int {
		return benchutil.Goroutines(n, 1, d, func(int, int) { rc.Get(ctx, prefix+"global:k") })
	}}
	getPipe := &benchutil.Case{Name: fmt.Sprintf("1 goroutine, pipelines of %d `GET`", n), Run: func(d time.Duration) int {
		return benchutil.Goroutines(1, 1, d, func(int, int) {
			p := rc.Pipeline()
			for i := 0; i < n; i++ {
				p.Get(ctx, prefix+"global:k")
			}
			p.Exec(ctx)
		}) * n
	}}
	lockLua := &benchutil.Case{Name: fmt.Sprintf("%d tasks, `distributed_mutex` acquire+release, distinct keys", n), Run: func(d time.Duration) int {
		return benchutil.LuaTasks(rt, n, 1, d, `local l = shield.distributed_mutex("k" .. w)`, `assert(l:acquire()); assert(l:release())`)
	}}
	lockGo := &benchutil.Case{Name: fmt.Sprintf("%d goroutines, bsm/redislock Obtain+Release, distinct keys", n), Run: func(d time.Duration) int {
		return benchutil.Goroutines(n, 1, d, func(w, _ int) {
			l, err := rl.Obtain(ctx, prefix+"rl:"+strconv.Itoa(w), 30*time.Second, nil)
			if err != nil {
				benchutil.Fatalf("redislock: %v", err)
			}
			l.Release(ctx)
		})
	}}
	cases := []*benchutil.Case{getLua, getGo, getPipe, lockLua, lockGo}
	benchutil.Interleave(cases, *flagRounds, *flagSlice)
	ratio := benchutil.Ratio
	fmt.Printf("## Throughput (Redis)\n\n| case | ops/s (median) |\n|---|---|\n")
	for _, c := range cases {
		fmt.Printf("| %s | %s |\n", c.Name, benchutil.FmtOps(benchutil.Median(c.Rates)))
	}
	fmt.Printf("\n| ratio | median of rounds |\n|---|---|\n")
	fmt.Printf("| `g:get` from %d tasks ÷ %d goroutines `GET` | **%.2f×** |\n", n, n, ratio(getLua, getGo))
	fmt.Printf("| `g:get` from %d tasks ÷ 1 goroutine pipelining %d | %.2f× |\n", n, n, ratio(getLua, getPipe))
	fmt.Printf("| `distributed_mutex` pairs, %d tasks ÷ bsm/redislock %d goroutines | **%.2f×** |\n\n", n, n, ratio(lockLua, lockGo))

	// ---- CPU per call, one caller
	var luaCPU, goCPU []float64
	for r := 0; r < *flagRounds; r++ {
		ops := *flagCPUOps
		luaCPU = append(luaCPU, cpuPerOp(ops, func() {
			if err := rt.RunString(`local g = shield.global(); for i = 1, `+strconv.Itoa(ops)+` do g:get("k") end`, "cpu.lua"); err != nil {
				benchutil.Fatalf("cpu: %v", err)
			}
		}))
		goCPU = append(goCPU, cpuPerOp(ops, func() {
			for i := 0; i < ops; i++ {
				rc.Get(ctx, prefix+"global:k")
			}
		}))
	}
	var cpuRatios []float64
	for i := range luaCPU {
		cpuRatios = append(cpuRatios, luaCPU[i]/goCPU[i])
	}
	fmt.Printf("## CPU time per call, one caller (getrusage: user + system of this process)\n\n| case | µs CPU per call (median) |\n|---|---|\n")
	fmt.Printf("| 1 task, `g:get` | %.2f |\n| 1 goroutine, go-redis `GET` | %.2f |\n| **ratio** | **%.2f×** |\n\n",
		benchutil.Median(luaCPU), benchutil.Median(goCPU), benchutil.Median(cpuRatios))

	// ---- parked tasks
	fmt.Printf("## %d tasks parked in `shield.sleep`\n\n| Lua state | Go heap per parked task | spawn time per task |\n|---|---|---|\n", *flagParked)
	for _, st := range benchutil.ParkedStates {
		heap, spawn, _ := benchutil.Parked(mem, st.L(), *flagParked)
		fmt.Printf("| %s | %.1f KB | %.1f µs |\n", st.Name, heap/1024, spawn/1e3)
	}
	fmt.Println()
}

func newRuntime(mod *shieldglobal.Module, L *lua.LState) *shieldglobal.Runtime {
	rt, err := mod.NewRuntime(L)
	if err != nil {
		benchutil.Fatalf("NewRuntime: %v", err)
	}
	err = rt.Do(func(L *lua.LState) error {
		L.SetGlobal("empty", L.NewFunction(func(*lua.LState) int { return 0 }))
		// block(0) is shield.sleep(0): it completes on the loop's next turn,
		// one full yield and resume (the blocking protocol's cost alone).
		L.SetGlobal("block", L.GetField(L.GetGlobal("shield"), "sleep"))
		return nil
	})
	if err != nil {
		benchutil.Fatalf("setup: %v", err)
	}
	return rt
}

// cpuPerOp returns µs of this process's CPU per op of run (ops ops).
func cpuPerOp(ops int, run func()) float64 {
	runtime.GC()
	start := benchutil.CPUTime()
	run()
	return float64((benchutil.CPUTime() - start).Nanoseconds()) / float64(ops) / 1e3
}
