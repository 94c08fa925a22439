// Command rankbench measures shield.rank against raw Redis commands and the
// memory backend against Redis in one run, and prints a markdown report
// (docs/performance.md quotes it):
//
//   - rank:swap from Lua, 32 tasks of one runtime, against a raw go-redis
//     EVALSHA of the very same script (core/rank/scripts/lib.lua + swap.lua,
//     same keys and arguments) from 32 goroutines, and core/rank's Swap from
//     Go; set against seed 002's 8 000–10 000 TPS;
//   - update + position from Lua (32 tasks) against raw ZADD + ZREVRANK on a
//     plain sorted set (32 goroutines), and core/rank from Go;
//   - the memory backend at 1 000 000 members from Go: update, position and
//     around(uid, 5) latency (p50, p99), against the Redis backend at the
//     same size, one caller.
//
// Throughput cases run in interleaved rounds (round 1 of every case, then
// round 2, ...); each ratio is computed per round and the median of the
// rounds is reported, so a busy moment of the machine hits both sides of a
// ratio alike.
//
//	bash scripts/with-redis.sh sh -c 'cd bench && go run ./cmd/rankbench'   # from the repo root
package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/bench/internal/benchutil"
	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/rank"
)

var (
	flagRedis      = flag.String("redis", os.Getenv("SHIELD_TEST_REDIS_URL"), "Redis URL, loopback only (default $SHIELD_TEST_REDIS_URL)")
	flagSlice      = flag.Duration("slice", time.Second, "measuring time of one case in one round")
	flagRounds     = flag.Int("rounds", 3, "interleaved rounds")
	flagTasks      = flag.Int("tasks", 32, "concurrent tasks (and goroutines) of the throughput cases")
	flagMembers    = flag.Int("members", 10000, "members of the throughput boards")
	flagBig        = flag.Int("big", 1_000_000, "members of the latency boards (memory and Redis)")
	flagMemOps     = flag.Int("mem-ops", 200_000, "timed operations per kind on the memory backend")
	flagRedisOps   = flag.Int("redis-ops", 5000, "timed operations per kind on the Redis backend")
	flagScriptsDir = flag.String("scripts", "../core/rank/scripts", "core/rank's scripts, for the raw EVALSHA case")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	rc, opt := benchutil.Connect(ctx, *flagRedis)
	defer rc.Close()
	prefix := "rankbench:" + benchutil.RandHex(6) + ":"
	defer benchutil.Cleanup(rc, prefix)

	cfg := config.Default()
	cfg.Global.Redis.URL = *flagRedis
	cfg.Global.Redis.Prefix = prefix
	cfg.Rank.MaxMembers = 2 * max(*flagMembers, *flagBig)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mod, err := shieldglobal.New(cfg, shieldglobal.WithLogger(log))
	if err != nil {
		benchutil.Fatalf("shieldglobal.New: %v", err)
	}
	defer mod.Close()
	rt, err := mod.NewRuntime(lua.NewState())
	if err != nil {
		benchutil.Fatalf("NewRuntime: %v", err)
	}
	defer rt.Close(time.Second)

	n, m := *flagTasks, *flagMembers
	fmt.Printf("# rankbench: shield.rank\n\n")
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("- Go %s, %d CPUs, load average at start %s; Redis %s at %s (loopback, sharing the CPUs)\n",
		runtime.Version(), runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "), benchutil.RedisVersion(ctx, rc), opt.Addr)
	fmt.Printf("- throughput: %d tasks / goroutines, boards of %d members (ties = \"reach\"), %v per case per round, %d interleaved rounds; ratios are per-round, median reported\n\n",
		n, m, *flagSlice, *flagRounds)

	// ---- boards for the throughput cases
	// Go reaches the boards the scripts use through a backend of its own
	// on the same keys (the Module keeps its own private).
	goRanks := rank.NewRedis(rc, prefix)
	swapBoard := board(goRanks, "swap")
	upBoard := board(goRanks, "update")
	fill(swapBoard, m, 1000)
	fill(upBoard, m, 1000)
	plainZ := prefix + "plainz"
	for i := 0; i < m; i += 1000 {
		zs := make([]redis.Z, 0, 1000)
		for j := i; j < min(i+1000, m); j++ {
			zs = append(zs, redis.Z{Score: float64(j), Member: uid(j)})
		}
		rc.ZAdd(ctx, plainZ, zs...)
	}
	swapSrc := readScript("lib.lua") + "\n" + readScript("swap.lua")
	swapSha, err := rc.ScriptLoad(ctx, swapSrc).Result()
	if err != nil {
		benchutil.Fatalf("SCRIPT LOAD: %v", err)
	}
	swapKeys := []string{prefix + "rank:{swap}", prefix + "rank:members:{swap}", prefix + "rank:meta:{swap}"}

	luaPair := fmt.Sprintf(`local i = math.random(%d); local j = math.random(%d); if j >= i then j = j + 1 end`, m, m-1)
	swapLua := &benchutil.Case{Name: fmt.Sprintf("%d tasks in one runtime, `rank:swap(a, b)`", n), Run: func(d time.Duration) int {
		return benchutil.LuaTasks(rt, n, 1, d, `local r = shield.rank("swap")`, luaPair+`; assert(r:swap("u" .. (i - 1), "u" .. (j - 1)))`)
	}}
	swapRaw := &benchutil.Case{Name: fmt.Sprintf("%d goroutines, raw `EVALSHA` of the same swap script", n), Run: func(d time.Duration) int {
		return goroutines(n, d, func(r *mrand.Rand) {
			a, b := pair(r, m)
			if err := rc.EvalSha(ctx, swapSha, swapKeys, "reach", uid(a), uid(b), "0", "0", "0").Err(); err != nil {
				benchutil.Fatalf("EVALSHA: %v", err)
			}
		})
	}}
	swapGo := &benchutil.Case{Name: fmt.Sprintf("%d goroutines, core/rank `Swap(a, b, nil).Do` (Go, no Lua)", n), Run: func(d time.Duration) int {
		return goroutines(n, d, func(r *mrand.Rand) {
			a, b := pair(r, m)
			if _, err := swapBoard.Swap(uid(a), uid(b), nil).Do(ctx); err != nil {
				benchutil.Fatalf("Swap: %v", err)
			}
		})
	}}
	upLua := &benchutil.Case{Name: fmt.Sprintf("%d tasks, `rank:update(uid, score)` + `rank:position(uid)` (pairs)", n), Run: func(d time.Duration) int {
		return benchutil.LuaTasks(rt, n, 1, d, `local r = shield.rank("update")`,
			fmt.Sprintf(`local u = "u" .. (math.random(%d) - 1); r:update(u, math.random(1000000)); assert(r:position(u))`, m))
	}}
	upRaw := &benchutil.Case{Name: fmt.Sprintf("%d goroutines, raw `ZADD` + `ZREVRANK` (pairs, plain sorted set)", n), Run: func(d time.Duration) int {
		return goroutines(n, d, func(r *mrand.Rand) {
			u := uid(r.IntN(m))
			rc.ZAdd(ctx, plainZ, redis.Z{Score: float64(r.IntN(1000000)), Member: u})
			if err := rc.ZRevRank(ctx, plainZ, u).Err(); err != nil {
				benchutil.Fatalf("ZREVRANK: %v", err)
			}
		})
	}}
	upGo := &benchutil.Case{Name: fmt.Sprintf("%d goroutines, core/rank `Update` + `Position` (Go, pairs)", n), Run: func(d time.Duration) int {
		return goroutines(n, d, func(r *mrand.Rand) {
			u := uid(r.IntN(m))
			upBoard.Update(u, float64(r.IntN(1000000)), rank.ModeSet).Do(ctx)
			if _, err := upBoard.Position(u).Do(ctx); err != nil {
				benchutil.Fatalf("Position: %v", err)
			}
		})
	}}
	cases := []*benchutil.Case{swapLua, swapRaw, swapGo, upLua, upRaw, upGo}
	benchutil.Interleave(cases, *flagRounds, *flagSlice)
	ratio := benchutil.Ratio
	same, _ := rc.ScriptExists(ctx, sha1Hex(swapSrc)).Result()
	fmt.Printf("## Throughput (Redis)\n\n| case | ops/s (median) | per round |\n|---|---|---|\n")
	for _, c := range cases {
		fmt.Printf("| %s | %s | %s |\n", c.Name, benchutil.FmtOps(benchutil.Median(c.Rates)), fmtRates(c.Rates))
	}
	fmt.Printf("\n(update + position rows count pairs: two round trips each.) The raw EVALSHA runs the script the Lua case runs: SCRIPT EXISTS of its SHA1 %v after the Lua rounds.\n\n", same)
	fmt.Printf("| ratio | median of rounds | target |\n|---|---|---|\n")
	fmt.Printf("| `rank:swap` from %d tasks ÷ raw EVALSHA from %d goroutines | **%.2f×** | ≥ 0.9× |\n", n, n, ratio(swapLua, swapRaw))
	fmt.Printf("| `rank:swap` from %d tasks ÷ seed 002's Lua-script figure (8 000–10 000 TPS; their hardware) | %.1f× – %.1f× | |\n",
		n, benchutil.Median(swapLua.Rates)/10000, benchutil.Median(swapLua.Rates)/8000)
	fmt.Printf("| core/rank Swap from Go ÷ raw EVALSHA | %.2f× | |\n", ratio(swapGo, swapRaw))
	fmt.Printf("| `update` + `position` from Lua ÷ raw ZADD + ZREVRANK | **%.2f×** | |\n", ratio(upLua, upRaw))
	fmt.Printf("| core/rank Update + Position from Go ÷ raw ZADD + ZREVRANK | %.2f× | |\n\n", ratio(upGo, upRaw))

	// ---- latency at 1 000 000 members, one caller, from Go
	big := *flagBig
	mem := rank.NewMemory(nil)
	memBoard := board(mem, "big")
	redisBig := board(goRanks, "big")
	start := time.Now()
	fill(memBoard, big, 10000)
	memLoad := time.Since(start)
	start = time.Now()
	fill(redisBig, big, 1000)
	redisLoad := time.Since(start)
	fmt.Fprintf(os.Stderr, "loaded %d members: memory %v, Redis %v\n", big, memLoad, redisLoad)

	type lat struct{ p50, p99, mean time.Duration }
	measure := func(b rank.Board, ops int, kind string) lat {
		r := mrand.New(mrand.NewPCG(1, 2))
		ds := make([]time.Duration, ops)
		for i := range ds {
			u := uid(r.IntN(big))
			var err error
			t0 := time.Now()
			switch kind {
			case "update":
				_, err = b.Update(u, float64(r.IntN(10*big)), rank.ModeSet).Do(ctx)
			case "position":
				_, err = b.Position(u).Do(ctx)
			case "around":
				_, err = b.Around(u, 5).Do(ctx)
			}
			ds[i] = time.Since(t0)
			if err != nil {
				benchutil.Fatalf("%s: %v", kind, err)
			}
		}
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return lat{ds[len(ds)/2], ds[len(ds)*99/100], sum / time.Duration(len(ds))}
	}
	fmt.Printf("## Latency at %s members (one caller, from Go; memory: %d ops per kind, Redis: %d)\n\n", benchutil.FmtOps(float64(big)), *flagMemOps, *flagRedisOps)
	fmt.Printf("| op | memory p50 | memory p99 | memory mean | Redis p50 | Redis p99 | Redis mean | Redis ÷ memory (mean) | target |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, kind := range []string{"update", "position", "around"} {
		var mems, reds []lat
		for r := 0; r < *flagRounds; r++ { // interleaved, median of rounds per figure
			mems = append(mems, measure(memBoard, *flagMemOps / *flagRounds, kind))
			reds = append(reds, measure(redisBig, *flagRedisOps / *flagRounds, kind))
		}
		ml, rl := medLat(mems, func(l lat) time.Duration { return l.p50 }), medLat(reds, func(l lat) time.Duration { return l.p50 })
		m99, r99 := medLat(mems, func(l lat) time.Duration { return l.p99 }), medLat(reds, func(l lat) time.Duration { return l.p99 })
		mm, rm := medLat(mems, func(l lat) time.Duration { return l.mean }), medLat(reds, func(l lat) time.Duration { return l.mean })
		name := kind
		if kind == "around" {
			name = "around(uid, 5)"
		}
		fmt.Printf("| `%s` | %v | **%v** | %v | %v | %v | %v | **%.0f×** | p99 ≤ 2µs, ≥ 10× |\n", name, ml, m99, mm, rl, r99, rm, float64(rm)/float64(mm))
	}
	fmt.Printf("\nLoading %s members: memory %v (MUpdate of 10 000), Redis %v (MUpdate of 1 000).\n\n", benchutil.FmtOps(float64(big)), memLoad.Round(time.Millisecond), redisLoad.Round(time.Millisecond))
}

func board(b rank.Backend, name string) rank.Board {
	bd, err := b.Board(name, rank.Options{})
	if err != nil {
		benchutil.Fatalf("Board: %v", err)
	}
	return bd
}

func uid(i int) string { return "u" + strconv.Itoa(i) }

func pair(r *mrand.Rand, m int) (int, int) {
	a, b := r.IntN(m), r.IntN(m-1)
	if b >= a {
		b++
	}
	return a, b
}

// fill puts members u0..u(n-1) with distinct scores on b, batch at a time.
func fill(b rank.Board, n, batch int) {
	ctx := context.Background()
	for i := 0; i < n; i += batch {
		scores := make(map[string]float64, batch)
		for j := i; j < min(i+batch, n); j++ {
			scores[uid(j)] = float64(j)
		}
		if _, err := b.MUpdate(scores).Do(ctx); err != nil {
			benchutil.Fatalf("fill %s: %v", b.Name(), err)
		}
	}
}

func readScript(name string) string {
	data, err := os.ReadFile(filepath.Join(*flagScriptsDir, name))
	if err != nil {
		benchutil.Fatalf("%v (run from bench/, or pass -scripts)", err)
	}
	return string(data)
}

// goroutines runs op in n goroutines for d, each with a random source of
// its own, and returns how many ops ran.
func goroutines(n int, d time.Duration, op func(r *mrand.Rand)) int {
	rs := make([]*mrand.Rand, n)
	for w := range rs {
		rs[w] = mrand.New(mrand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	}
	return benchutil.Goroutines(n, 1, d, func(w, _ int) { op(rs[w]) })
}

func medLat[T any](xs []T, f func(T) time.Duration) time.Duration {
	ds := make([]float64, len(xs))
	for i, x := range xs {
		ds[i] = float64(f(x))
	}
	d := time.Duration(benchutil.Median(ds))
	if d > 10*time.Microsecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(10 * time.Nanosecond)
}

func fmtRates(rs []float64) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = benchutil.FmtOps(r)
	}
	return strings.Join(out, ", ")
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}
