// Command limitbench measures shield.rate_limiter against its baselines and
// peers in one run on one Redis server, and prints a markdown report
// (docs/rate_limiter.md and docs/performance.md quote it):
//
//   - token-bucket allow() from Lua against an empty Go function and an
//     empty Go method called from Lua the same way (the spec: < 1 µs);
//   - the token bucket's Allow from Go against golang.org/x/time/rate;
//   - decisions per second against go-redis/redis_rate (GCRA, one Redis
//     call per decision) on the same Redis: the token bucket (local
//     decisions, shares synced every interval) and the sliding window (one
//     script call per decision), 32 goroutines each;
//   - sliding-window allow() from 32 tasks of one runtime against the raw
//     EVALSHA of the same script from 32 goroutines, and an empty script.
//
// Cases run in interleaved rounds (round 1 of every case, then round 2,
// ...); each ratio is computed per round and the median of the rounds is
// reported, so a busy moment of the machine hits both sides alike.
//
//	bash scripts/with-redis.sh sh -c 'cd bench && go run ./cmd/limitbench'   # from the repo root
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	lua "github.com/yuin/gopher-lua"
	"golang.org/x/time/rate"

	shieldglobal "github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/bench/internal/benchutil"
	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/ratelimit"
)

var (
	flagRedis   = flag.String("redis", os.Getenv("SHIELD_TEST_REDIS_URL"), "Redis URL, loopback only (default $SHIELD_TEST_REDIS_URL)")
	flagSlice   = flag.Duration("slice", time.Second, "measuring time of one throughput case in one round")
	flagRounds  = flag.Int("rounds", 3, "interleaved rounds")
	flagTasks   = flag.Int("tasks", 32, "concurrent tasks (and goroutines) of the Redis cases")
	flagLuaOps  = flag.Int("lua-ops", 2_000_000, "iterations of each in-process Lua loop")
	flagGoOps   = flag.Int("go-ops", 10_000_000, "iterations of each Go decision loop")
	flagScripts = flag.String("scripts", "../core/ratelimit/scripts", "directory of the limiter's Lua scripts (for the raw EVALSHA case)")
)

// never is a rate no run reaches: every request is allowed, so each case
// measures the decision itself.
const never = 1e12

func main() {
	flag.Parse()
	ctx := context.Background()
	rc, opt := benchutil.Connect(ctx, *flagRedis)
	defer rc.Close()
	prefix := "limitbench:" + benchutil.RandHex(6) + ":"
	defer benchutil.Cleanup(rc, prefix)
	src, err := os.ReadFile(filepath.Join(*flagScripts, "window_allow.lua"))
	if err != nil {
		benchutil.Fatalf("-scripts: %v (run from bench/, or pass -scripts)", err)
	}
	windowScript := redis.NewScript(string(src))
	emptyScript := redis.NewScript("return 1")
	for _, s := range []*redis.Script{windowScript, emptyScript} {
		if err := s.Load(ctx, rc).Err(); err != nil {
			benchutil.Fatalf("SCRIPT LOAD: %v", err)
		}
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := config.Default()
	cfg.Global.Redis.URL = *flagRedis
	cfg.Global.Redis.Prefix = prefix
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
	rt, memRT := newRuntime(mod), newRuntime(mem)
	const tbOpts = `{ rate = 1e12, burst = 1e12 }`
	const swOpts = `{ window = 1000, max_requests = 1e12, sliding = true }`
	for _, r := range []*shieldglobal.Runtime{rt, memRT} {
		if err := r.RunString(`tb = shield.rate_limiter("tb", `+tbOpts+`); sw = shield.rate_limiter("sw", `+swOpts+`)`, "setup.lua"); err != nil {
			benchutil.Fatalf("setup: %v", err)
		}
	}
	// The Go cases use limiter Sets of their own (the Module keeps its
	// own private): the same code the Module's limiters run.
	goSet := ratelimit.NewRedis(rc, prefix+"go:", limiterConfig(cfg.RateLimiter))
	goSet.Start()
	defer goSet.Stop()
	memSet := ratelimit.NewMemory(limiterConfig(cfg.RateLimiter))
	memSet.Start()
	defer memSet.Stop()
	tbRedis, err := goSet.TokenBucket("tb", ratelimit.Options{Rate: never, Burst: never})
	if err != nil {
		benchutil.Fatalf("token bucket: %v", err)
	}
	tbMem, err := memSet.TokenBucket("tb", ratelimit.Options{Rate: never, Burst: never})
	if err != nil {
		benchutil.Fatalf("token bucket: %v", err)
	}
	swRedis, err := goSet.SlidingWindow("sw", ratelimit.Options{Window: time.Second, MaxRequests: never})
	if err != nil {
		benchutil.Fatalf("sliding window: %v", err)
	}
	limiter := redis_rate.NewLimiter(rc)
	rrLimit := redis_rate.Limit{Rate: 1 << 40, Burst: 1 << 40, Period: time.Second}
	n := *flagTasks
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}

	fmt.Printf("# limitbench: shield.rate_limiter\n\n")
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("- Go %s, %d CPUs, load average at start %s; Redis %s at %s (loopback, sharing the CPUs); redis_rate v10\n",
		runtime.Version(), runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "), benchutil.RedisVersion(ctx, rc), opt.Addr)
	fmt.Printf("- %d interleaved rounds; Redis cases: %d goroutines / tasks, %v per case per round, 64 keys; ratios per round, median reported\n\n",
		*flagRounds, n, *flagSlice)

	// ---- 1. allow() from Lua: ns per call
	type nsCase struct {
		name string
		run  func() float64
		ns   []float64
	}
	luaOps := *flagLuaOps
	emptyFn := &nsCase{name: "empty Go function `empty()`", run: func() float64 { return benchutil.LuaLoopNs(memRT, `empty()`, luaOps) }}
	emptyMethod := &nsCase{name: "empty Go method, same call shape `obj:allow(\"client-ip\")`", run: func() float64 {
		return benchutil.LuaLoopNs(memRT, `obj:allow("client-ip")`, luaOps)
	}}
	allowMem := &nsCase{name: "token bucket `tb:allow(\"client-ip\")`, memory backend", run: func() float64 {
		return benchutil.LuaLoopNs(memRT, `tb:allow("client-ip")`, luaOps)
	}}
	allowRedis := &nsCase{name: "token bucket `tb:allow(\"client-ip\")`, Redis backend (global share)", run: func() float64 {
		return benchutil.LuaLoopNs(rt, `tb:allow("client-ip")`, luaOps)
	}}
	goOps := *flagGoOps
	goShield := &nsCase{name: "core `TokenBucket.Allow`, memory", run: func() float64 {
		return goLoopNs(goOps, func() { tbMem.Allow("client-ip", 1) })
	}}
	goShieldRedis := &nsCase{name: "core `TokenBucket.Allow`, Redis backend", run: func() float64 {
		return goLoopNs(goOps, func() { tbRedis.Allow("client-ip", 1) })
	}}
	xrate := rate.NewLimiter(never, 1<<40)
	goXRate := &nsCase{name: "golang.org/x/time/rate `Limiter.Allow` (one limiter, no key)", run: func() float64 {
		return goLoopNs(goOps, func() { xrate.Allow() })
	}}
	nsCases := []*nsCase{emptyFn, emptyMethod, allowMem, allowRedis, goShield, goShieldRedis, goXRate}
	for _, c := range nsCases {
		c.run() // warm-up
	}
	for r := 0; r < *flagRounds; r++ {
		for _, c := range nsCases {
			c.ns = append(c.ns, c.run())
			fmt.Fprintf(os.Stderr, "round %d: %s: %.1f ns\n", r+1, c.name, c.ns[r])
		}
	}
	nsRatio := func(a, b *nsCase) float64 {
		var rs []float64
		for i := range a.ns {
			rs = append(rs, a.ns[i]/b.ns[i])
		}
		return benchutil.Median(rs)
	}
	fmt.Printf("## Token-bucket decision (no Redis on the call path)\n\n| case | ns/op (median) |\n|---|---|\n")
	for _, c := range nsCases {
		fmt.Printf("| %s | %.1f |\n", c.name, benchutil.Median(c.ns))
	}
	fmt.Printf("\n| ratio | median of rounds |\n|---|---|\n")
	fmt.Printf("| `tb:allow` (memory) ÷ empty Go method | **%.2f×** |\n", nsRatio(allowMem, emptyMethod))
	fmt.Printf("| `tb:allow` (memory) ÷ empty Go function | %.2f× |\n", nsRatio(allowMem, emptyFn))
	fmt.Printf("| `tb:allow` (Redis) ÷ empty Go method | %.2f× |\n", nsRatio(allowRedis, emptyMethod))
	fmt.Printf("| core `Allow` (memory) ÷ x/time/rate | **%.2f×** |\n", nsRatio(goShield, goXRate))
	fmt.Printf("| core `Allow` (Redis) ÷ x/time/rate | %.2f× |\n\n", nsRatio(goShieldRedis, goXRate))

	// ---- 2. throughput against redis_rate, and the sliding window's overhead
	redisRate := &benchutil.Case{Name: fmt.Sprintf("go-redis/redis_rate `Allow`, %d goroutines", n), Run: func(d time.Duration) int {
		return benchutil.Goroutines(n, 1, d, func(w, i int) {
			if _, err := limiter.Allow(ctx, prefix+"rr:"+keys[(w+i)%64], rrLimit); err != nil {
				benchutil.Fatalf("redis_rate: %v", err)
			}
		})
	}}
	tbGo := &benchutil.Case{Name: fmt.Sprintf("shield token bucket on Redis, core `Allow`, %d goroutines", n), Run: func(d time.Duration) int {
		return benchutil.Goroutines(n, 64, d, func(w, i int) { tbRedis.Allow(keys[(w+i)%64], 1) })
	}}
	tbLua := &benchutil.Case{Name: "shield token bucket on Redis, `tb:allow` from 1 task", Run: func(d time.Duration) int {
		return benchutil.LuaTasks(rt, 1, 64, d, ``, `tb:allow(keys[k % 64 + 1])`)
	}}
	swGo := &benchutil.Case{Name: fmt.Sprintf("shield sliding window, core `AllowOp(...).Do`, %d goroutines", n), Run: func(d time.Duration) int {
		return benchutil.Goroutines(n, 1, d, func(w, i int) {
			if _, err := swRedis.AllowOp(keys[(w+i)%64], 1).Do(ctx); err != nil {
				benchutil.Fatalf("sliding window: %v", err)
			}
		})
	}}
	swLua := &benchutil.Case{Name: fmt.Sprintf("shield sliding window, `sw:allow` from %d tasks of one runtime", n), Run: func(d time.Duration) int {
		return benchutil.LuaTasks(rt, n, 1, d, ``, `sw:allow(keys[(w + k) % 64 + 1])`)
	}}
	rawKeys := make([]string, 64)
	for i := range rawKeys {
		rawKeys[i] = prefix + "ratelimit:{raw}:sw:" + keys[i]
	}
	swRaw := &benchutil.Case{Name: fmt.Sprintf("raw `EVALSHA` of window_allow.lua, %d goroutines", n), Run: func(d time.Duration) int {
		return benchutil.Goroutines(n, 1, d, func(w, i int) {
			if err := windowScript.EvalSha(ctx, rc, []string{rawKeys[(w+i)%64]}, 1000000, int64(never), 1).Err(); err != nil {
				benchutil.Fatalf("EVALSHA: %v", err)
			}
		})
	}}
	emptyRaw := &benchutil.Case{Name: fmt.Sprintf("raw `EVALSHA` of `return 1`, %d goroutines", n), Run: func(d time.Duration) int {
		return benchutil.Goroutines(n, 1, d, func(w, i int) {
			if err := emptyScript.EvalSha(ctx, rc, []string{rawKeys[(w+i)%64]}).Err(); err != nil {
				benchutil.Fatalf("EVALSHA: %v", err)
			}
		})
	}}
	if err := rt.Do(func(L *lua.LState) error {
		t := L.NewTable()
		for _, k := range keys {
			t.Append(lua.LString(k))
		}
		L.SetGlobal("keys", t)
		return nil
	}); err != nil {
		benchutil.Fatalf("setup: %v", err)
	}
	cases := []*benchutil.Case{redisRate, tbGo, tbLua, swGo, swLua, swRaw, emptyRaw}
	benchutil.Interleave(cases, *flagRounds, *flagSlice)
	ratio := benchutil.Ratio
	fmt.Printf("## Decisions per second with Redis\n\n| case | decisions/s (median) |\n|---|---|\n")
	for _, c := range cases {
		fmt.Printf("| %s | %s |\n", c.Name, benchutil.FmtOps(benchutil.Median(c.Rates)))
	}
	fmt.Printf("\n| ratio (throughput) | median of rounds |\n|---|---|\n")
	fmt.Printf("| token bucket (Go, %d goroutines) ÷ redis_rate | **%.0f×** |\n", n, ratio(tbGo, redisRate))
	fmt.Printf("| token bucket (Lua, 1 task) ÷ redis_rate (%d goroutines) | %.0f× |\n", n, ratio(tbLua, redisRate))
	fmt.Printf("| sliding window (Go, %d goroutines) ÷ redis_rate | %.2f× |\n", n, ratio(swGo, redisRate))
	fmt.Printf("| sliding window `sw:allow` from %d tasks ÷ raw EVALSHA from %d goroutines | **%.2f×** |\n", n, n, ratio(swLua, swRaw))
	fmt.Printf("| sliding window core `AllowOp` ÷ raw EVALSHA | %.2f× |\n", ratio(swGo, swRaw))
	fmt.Printf("| raw EVALSHA of window_allow.lua ÷ empty script | %.2f× |\n\n", ratio(swRaw, emptyRaw))
	st := mod.RateLimiterStats()
	fmt.Printf("Token bucket on Redis during the run: %d report rounds, %d failed, %d decisions degraded.\n", st.Syncs, st.SyncFailures, st.Degraded)
}

func newRuntime(mod *shieldglobal.Module) *shieldglobal.Runtime {
	rt, err := mod.NewRuntime(lua.NewState())
	if err != nil {
		benchutil.Fatalf("NewRuntime: %v", err)
	}
	err = rt.Do(func(L *lua.LState) error {
		L.SetGlobal("empty", L.NewFunction(func(*lua.LState) int { return 0 }))
		// obj:allow(key) -> true: what a limiter method costs with no work.
		mt := L.NewTable()
		methods := L.NewTable()
		methods.RawSetString("allow", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LTrue); return 1 }))
		mt.RawSetString("__index", methods)
		ud := L.NewUserData()
		ud.Metatable = mt
		L.SetGlobal("obj", ud)
		return nil
	})
	if err != nil {
		benchutil.Fatalf("setup: %v", err)
	}
	return rt
}

func goLoopNs(n int, f func()) float64 {
	start := time.Now()
	for i := 0; i < n; i++ {
		f()
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

// limiterConfig is the ratelimit.Config of the rate_limiter section, as the
// Module builds it.
func limiterConfig(c config.RateLimiter) ratelimit.Config {
	return ratelimit.Config{
		Algorithm:       ratelimit.Algorithm(c.Algorithm),
		SyncInterval:    time.Duration(c.SyncInterval) * time.Millisecond,
		CleanupInterval: time.Duration(c.CleanupInterval) * time.Millisecond,
		Timeout:         time.Duration(c.Timeout) * time.Millisecond,
	}
}
