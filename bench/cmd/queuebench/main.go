// Command queuebench measures shield_global's queues from Lua against raw
// go-redis and hibiken/asynq in one run on one Redis server, and prints a
// markdown report (docs/performance.md quotes it):
//
//   - push+pop pairs/s per kind from 32 Lua tasks of one runtime against 32
//     goroutines doing the raw commands of the spec's table: LPUSH/RPOP
//     (plain), ZADD/ZPOPMIN (delay, priority), XADD/XREADGROUP/XACK
//     (reliable: push, pop, ack);
//   - reliable push → process → ack end to end: 32 producer tasks and a
//     consumer with concurrency 32 (two runtimes) against asynq: 32
//     goroutines enqueueing and a server with Concurrency 32;
//   - reclaim time after SIGKILL: a child process holding a reliable message
//     is killed; the time until this process gets the message;
//   - delay lateness (due → handler start), P50/P99/max, against asynq's
//     ProcessIn.
//
// Throughput cases run in interleaved rounds (round 1 of every case, then
// round 2, ...); each ratio is computed per round and the median of the
// rounds is reported, so a busy moment of the machine hits both sides alike.
//
//	bash scripts/with-redis.sh sh -c 'cd bench && go run ./cmd/queuebench'   # from the repo root
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/bench/internal/benchutil"
	"github.com/shieldrt/shieldglobal/config"
)

var (
	flagRedis      = flag.String("redis", os.Getenv("SHIELD_TEST_REDIS_URL"), "Redis URL, loopback only (default $SHIELD_TEST_REDIS_URL)")
	flagSlice      = flag.Duration("slice", time.Second, "measuring time of one pairs case in one round")
	flagRounds     = flag.Int("rounds", 3, "interleaved rounds")
	flagTasks      = flag.Int("tasks", 32, "concurrent tasks / goroutines / consumer slots")
	flagE2E        = flag.Int("e2e", 20000, "messages per round of the end-to-end case")
	flagDelayN     = flag.Int("delay-n", 2000, "messages of the delay-lateness case")
	flagVisibility = flag.Duration("visibility", time.Second, "visibility timeout of the reclaim case")
	flagAsynqDelay = flag.Bool("asynq-delay", true, "also measure asynq's delay lateness (takes about 7 s)")

	// child mode (the reclaim case starts this binary again)
	flagChild  = flag.Bool("child-hold", false, "internal: hold one reliable message until killed")
	flagPrefix = flag.String("prefix", "", "internal: key prefix of the child")
)

func main() {
	flag.Parse()
	if *flagChild {
		childHold()
		return
	}
	ctx := context.Background()
	rc, opt := benchutil.Connect(ctx, *flagRedis)
	defer rc.Close()
	run := benchutil.RandHex(6)
	prefix := "queuebench:" + run + ":"
	asynqQueue := "queuebench_" + run
	defer benchutil.Cleanup(rc, prefix)
	defer deleteAsynqQueue(opt, asynqQueue)

	mod := newModule(prefix, *flagVisibility)
	defer mod.Close()
	rt := newRuntime(mod)
	prod := newRuntime(mod)
	n := *flagTasks

	fmt.Printf("# queuebench: shield_global queues\n\n")
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("- Go %s, %d CPUs, load average at start %s; Redis %s at %s (loopback, sharing the CPUs); asynq v0.26.0\n",
		runtime.Version(), runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "), benchutil.RedisVersion(ctx, rc), opt.Addr)
	fmt.Printf("- %d tasks / goroutines; pairs: %v per case per round; end to end: %d messages per round; %d interleaved rounds; ratios per round, median reported\n\n",
		n, *flagSlice, *flagE2E, *flagRounds)

	// ---- push+pop pairs
	key := func(s string) string { return prefix + "raw:{" + s + "}" }
	rc.XGroupCreateMkStream(ctx, key("stream"), "g", "$")
	luaPairs := func(label, ctor, body string) *benchutil.Case {
		return &benchutil.Case{Name: fmt.Sprintf("%d tasks, %s", n, label), Run: func(d time.Duration) int {
			return benchutil.LuaTasks(rt, n, 1, d, "local q = "+ctor, body)
		}}
	}
	plainLua := luaPairs("`shield.queue` push + pop", `shield.queue("pairs_plain")`, `q:push(w); q:pop()`)
	plainGo := &benchutil.Case{Name: fmt.Sprintf("%d goroutines, `LPUSH` + `RPOP`", n), Run: func(d time.Duration) int {
		return benchutil.Goroutines(n, 1, d, func(w, _ int) { rc.LPush(ctx, key("list"), w); rc.RPop(ctx, key("list")) })
	}}
	delayLua := luaPairs("`shield.delay_queue` push(v, 0) + pop", `shield.delay_queue("pairs_delay")`, `q:push(w, 0); q:pop()`)
	prioLua := luaPairs("`shield.priority_queue` push(v, p) + pop", `shield.priority_queue("pairs_prio")`, `q:push(w, w % 8); q:pop()`)
	zsetGo := &benchutil.Case{Name: fmt.Sprintf("%d goroutines, `ZADD` + `ZPOPMIN`", n), Run: func(d time.Duration) int {
		return benchutil.Goroutines(n, 1, d, func(w, i int) {
			rc.ZAdd(ctx, key("zset"), redis.Z{Score: float64(w % 8), Member: strconv.Itoa(w) + ":" + strconv.Itoa(i)})
			rc.ZPopMin(ctx, key("zset"), 1)
		})
	}}
	relLua := luaPairs("`shield.reliable_queue` push + pop + `handle:ack()`", `shield.reliable_queue("pairs_rel")`,
		`q:push(w); local _, h = q:pop(); if h then h:ack() end`)
	relGo := &benchutil.Case{Name: fmt.Sprintf("%d goroutines, `XADD` + `XREADGROUP` + `XACK`", n), Run: func(d time.Duration) int {
		return benchutil.Goroutines(n, 1, d, func(w, _ int) {
			rc.XAdd(ctx, &redis.XAddArgs{Stream: key("stream"), Values: []string{"d", strconv.Itoa(w)}})
			res, err := rc.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c" + strconv.Itoa(w),
				Streams: []string{key("stream"), ">"}, Count: 1, Block: -1}).Result()
			if err == nil && len(res) > 0 && len(res[0].Messages) > 0 {
				rc.XAck(ctx, key("stream"), "g", res[0].Messages[0].ID)
			}
		})
	}}
	pairs := []*benchutil.Case{plainLua, plainGo, delayLua, prioLua, zsetGo, relLua, relGo}
	benchutil.Interleave(pairs, *flagRounds, *flagSlice)
	ratio := benchutil.MedianRatio
	fmt.Printf("## Push + pop pairs (Redis)\n\n| case | pairs/s (median) |\n|---|---|\n")
	for _, c := range pairs {
		fmt.Printf("| %s | %s |\n", c.Name, benchutil.FmtOps(benchutil.Median(c.Rates)))
	}
	fmt.Printf("\n| ratio (Lua ÷ raw go-redis) | median of rounds |\n|---|---|\n")
	fmt.Printf("| plain ÷ `LPUSH`+`RPOP` | **%.2f×** |\n", ratio(plainLua.Rates, plainGo.Rates))
	fmt.Printf("| delay ÷ `ZADD`+`ZPOPMIN` | **%.2f×** |\n", ratio(delayLua.Rates, zsetGo.Rates))
	fmt.Printf("| priority ÷ `ZADD`+`ZPOPMIN` | **%.2f×** |\n", ratio(prioLua.Rates, zsetGo.Rates))
	fmt.Printf("| reliable ÷ `XADD`+`XREADGROUP`+`XACK` | **%.2f×** |\n\n", ratio(relLua.Rates, relGo.Rates))

	// ---- end to end against asynq
	var shieldE2E, asynqE2E []float64
	runShield := func(m int) float64 { return e2eShield(prod, rt, n, m) }
	runAsynq := func(m int) float64 { return e2eAsynq(opt, asynqQueue, n, m) }
	runShield(*flagE2E / 10) // warm-up
	runAsynq(*flagE2E / 10)
	for r := 0; r < *flagRounds; r++ {
		shieldE2E = append(shieldE2E, runShield(*flagE2E))
		asynqE2E = append(asynqE2E, runAsynq(*flagE2E))
		fmt.Fprintf(os.Stderr, "round %d: end to end: shield %.0f/s, asynq %.0f/s\n", r+1, shieldE2E[r], asynqE2E[r])
	}
	fmt.Printf("## Reliable push → process → ack, end to end (Redis)\n\n")
	fmt.Printf("%d messages per round; the consumers start first, then %d producers push as fast as they can; the clock stops when every handler has run.\n\n", *flagE2E, n)
	fmt.Printf("| case | tasks/s (median) |\n|---|---|\n")
	fmt.Printf("| shield: %d Lua producer tasks, `reliable_queue:consume` concurrency %d (two runtimes) | %s |\n", n, n, benchutil.FmtOps(benchutil.Median(shieldE2E)))
	fmt.Printf("| asynq: %d goroutines `Enqueue`, server Concurrency %d | %s |\n", n, n, benchutil.FmtOps(benchutil.Median(asynqE2E)))
	fmt.Printf("| **ratio shield ÷ asynq** (target ≥ 2×) | **%.2f×** |\n\n", ratio(shieldE2E, asynqE2E))

	// ---- reclaim after SIGKILL
	var reclaims []float64
	for r := 0; r < *flagRounds; r++ {
		reclaims = append(reclaims, reclaimAfterKill(rt, opt, prefix, r))
		fmt.Fprintf(os.Stderr, "round %d: reclaim after SIGKILL: %.0f ms\n", r+1, reclaims[r])
	}
	fmt.Printf("## Reclaim after SIGKILL (Redis)\n\n")
	fmt.Printf("A child process consumes a reliable queue (visibility timeout %v, extended every %v while held) and holds one message; it is SIGKILLed; this process is already waiting in `pop`.\n\n",
		*flagVisibility, (*flagVisibility / 3).Round(time.Millisecond))
	fmt.Printf("| | ms |\n|---|---|\n| kill → message delivered here (median of %d) | %.0f |\n| each round | %s |\n", *flagRounds, benchutil.Median(reclaims), joinMs(reclaims))
	fmt.Printf("| visibility timeout | %d |\n| asynq (for reference, not measured): 30 s lease + recoverer every 60 s | 30 000 – 90 000 |\n\n", flagVisibility.Milliseconds())

	// ---- delay lateness
	fmt.Printf("## Delay lateness, due → handler start (Redis)\n\n")
	fmt.Printf("%d messages due 200 ms to 2.2 s after their push, spread evenly; one consumer (shield: concurrency %d; asynq: Concurrency %d).\n\n", *flagDelayN, n, n)
	fmt.Printf("| case | P50 ms | P99 ms | max ms |\n|---|---|---|---|\n")
	l := delayShield(prod, rt, n, *flagDelayN)
	fmt.Printf("| shield `delay_queue` | %d | %d | %d |\n", pct(l, 50), pct(l, 99), l[len(l)-1])
	if *flagAsynqDelay {
		l = delayAsynq(opt, asynqQueue, n, *flagDelayN)
		fmt.Printf("| asynq `ProcessIn` (default DelayedTaskCheckInterval 5 s) | %d | %d | %d |\n", pct(l, 50), pct(l, 99), l[len(l)-1])
	}
	fmt.Println()
}

func newModule(prefix string, visibility time.Duration) *shieldglobal.Module {
	cfg := config.Default()
	cfg.Global.Redis.URL = *flagRedis
	cfg.Global.Redis.Prefix = prefix
	cfg.Queue.Defaults.VisibilityTimeout = visibility.Milliseconds()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	mod, err := shieldglobal.New(cfg, shieldglobal.WithLogger(log))
	if err != nil {
		benchutil.Fatalf("shieldglobal.New: %v", err)
	}
	return mod
}

func newRuntime(mod *shieldglobal.Module) *shieldglobal.Runtime {
	rt, err := mod.NewRuntime(lua.NewState())
	if err != nil {
		benchutil.Fatalf("NewRuntime: %v", err)
	}
	return rt
}

func mustRun(rt *shieldglobal.Runtime, src string) {
	if err := rt.RunString(src, "bench.lua"); err != nil {
		benchutil.Fatalf("lua: %v", err)
	}
}

func intGlobal(rt *shieldglobal.Runtime, name string) int {
	var v int
	rt.Do(func(L *lua.LState) error { v = int(lua.LVAsNumber(L.GetGlobal(name))); return nil })
	return v
}

var e2eRound atomic.Int64

// e2eShield: a consumer (concurrency n) in cons, then n producer tasks in
// prod pushing m messages; returns messages/s until every handler ran.
func e2eShield(prod, cons *shieldglobal.Runtime, n, m int) float64 {
	q := fmt.Sprintf("e2e_%d", e2eRound.Add(1))
	mustRun(cons, fmt.Sprintf(`
		processed = 0
		consumer = shield.reliable_queue(%q):consume("bench", function() processed = processed + 1 end, { concurrency = %d })`, q, n))
	start := time.Now()
	mustRun(prod, fmt.Sprintf(`
		local q, n, m = shield.reliable_queue(%q), %d, %d
		local running = n
		for w = 1, n do
			shield.spawn(function()
				for i = w, m, n do assert(q:push(i)) end
				running = running - 1
			end)
		end
		while running > 0 do shield.sleep(1) end`, q, n, m))
	for intGlobal(cons, "processed") < m {
		time.Sleep(2 * time.Millisecond)
	}
	took := time.Since(start)
	mustRun(cons, fmt.Sprintf(`
		consumer:stop()
		local q = shield.reliable_queue(%q)
		for _ = 1, 500 do if q:length() == 0 then break end shield.sleep(10) end
		assert(q:length() == 0, "messages left unacknowledged")`, q))
	return float64(m) / took.Seconds()
}

type quietLogger struct{}

func (quietLogger) Debug(...any) {}
func (quietLogger) Info(...any)  {}
func (quietLogger) Warn(...any)  {}
func (quietLogger) Error(...any) {}
func (quietLogger) Fatal(a ...any) {
	benchutil.Fatalf("asynq: %v", fmt.Sprint(a...))
}

func asynqOpt(opt *redis.Options) asynq.RedisClientOpt {
	return asynq.RedisClientOpt{Addr: opt.Addr, DB: opt.DB, Password: opt.Password}
}

// e2eAsynq: a server (Concurrency n) started, then n goroutines enqueue m
// tasks; returns tasks/s until every handler ran.
func e2eAsynq(opt *redis.Options, queue string, n, m int) float64 {
	var processed atomic.Int64
	srv := asynq.NewServer(asynqOpt(opt), asynq.Config{Concurrency: n, Queues: map[string]int{queue: 1}, Logger: quietLogger{}, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("bench", func(context.Context, *asynq.Task) error { processed.Add(1); return nil })
	if err := srv.Start(mux); err != nil {
		benchutil.Fatalf("asynq server: %v", err)
	}
	client := asynq.NewClient(asynqOpt(opt))
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < m; i += n {
				if _, err := client.Enqueue(asynq.NewTask("bench", []byte(strconv.Itoa(i))), asynq.Queue(queue)); err != nil {
					benchutil.Fatalf("asynq enqueue: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	for processed.Load() < int64(m) {
		time.Sleep(2 * time.Millisecond)
	}
	took := time.Since(start)
	srv.Shutdown()
	client.Close()
	return float64(m) / took.Seconds()
}

// reclaimAfterKill starts a child that holds a reliable message, kills it
// and returns ms until a pop of this process gets the message.
func reclaimAfterKill(rt *shieldglobal.Runtime, opt *redis.Options, prefix string, round int) float64 {
	q := fmt.Sprintf("reclaim_%d", round)
	mustRun(rt, fmt.Sprintf(`shield.reliable_queue(%q):push("held")`, q))
	cmd := exec.Command(os.Args[0], "-child-hold", "-redis", *flagRedis, "-prefix", prefix, "-visibility", flagVisibility.String(), q)
	out, err := cmd.StdoutPipe()
	if err != nil {
		benchutil.Fatalf("child: %v", err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		benchutil.Fatalf("child: %v", err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "holding") {
	}
	// Wait in pop first, so the measure is the reclaim, not our start.
	mustRun(rt, fmt.Sprintf(`
		local q = shield.reliable_queue(%q)
		shield.spawn(function()
			local msg, h = q:pop(60000)
			assert(msg == "held", "no reclaim within 60 s")
			got_at = shield.now_ms()
			h:ack()
		end)
		got_at = nil
		shield.sleep(20)`, q))
	killedAt := time.Now()
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for {
		var got float64
		rt.Do(func(L *lua.LState) error { got = float64(lua.LVAsNumber(L.GetGlobal("got_at"))); return nil })
		if got > 0 {
			return got - float64(killedAt.UnixMilli())
		}
		if time.Since(killedAt) > 70*time.Second {
			benchutil.Fatalf("reclaim: the message never came back")
		}
		time.Sleep(time.Millisecond)
	}
}

// childHold consumes queue (the first argument) and holds its message until
// killed.
func childHold() {
	mod := newModule(*flagPrefix, *flagVisibility)
	rt := newRuntime(mod)
	mustRun(rt, fmt.Sprintf(`
		shield.reliable_queue(%q):consume("holder", function()
			print("holding")
			shield.sleep(math.huge)
		end)`, flag.Arg(0)))
	select {}
}

// delayShield pushes m messages due 200..2200 ms later from prod and
// consumes them in cons; returns the sorted lateness (ms).
func delayShield(prod, cons *shieldglobal.Runtime, n, m int) []int64 {
	mustRun(cons, fmt.Sprintf(`
		late = {}
		consumer = shield.delay_queue("lateness"):consume("bench", function(msg)
			late[#late + 1] = shield.now_ms() - msg.due
		end, { concurrency = %d })`, n))
	mustRun(prod, fmt.Sprintf(`
		local q, m = shield.delay_queue("lateness"), %d
		for i = 1, m do
			local delay = 200 + math.floor(2000 * i / m)
			assert(q:push({ due = shield.now_ms() + delay }, delay))
		end`, m))
	var out []int64
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < m {
		if time.Now().After(deadline) {
			benchutil.Fatalf("delay: %d of %d delivered", len(out), m)
		}
		time.Sleep(20 * time.Millisecond)
		rt := cons
		out = out[:0]
		rt.Do(func(L *lua.LState) error {
			t := L.GetGlobal("late").(*lua.LTable)
			for i := 1; i <= t.Len(); i++ {
				out = append(out, int64(lua.LVAsNumber(t.RawGetInt(i))))
			}
			return nil
		})
	}
	mustRun(cons, `consumer:stop()`)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// delayAsynq is delayShield with asynq's ProcessIn.
func delayAsynq(opt *redis.Options, queue string, n, m int) []int64 {
	var mu sync.Mutex
	var out []int64
	srv := asynq.NewServer(asynqOpt(opt), asynq.Config{Concurrency: n, Queues: map[string]int{queue: 1}, Logger: quietLogger{}, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("delay", func(_ context.Context, t *asynq.Task) error {
		due, _ := strconv.ParseInt(string(t.Payload()), 10, 64)
		mu.Lock()
		out = append(out, time.Now().UnixMilli()-due)
		mu.Unlock()
		return nil
	})
	if err := srv.Start(mux); err != nil {
		benchutil.Fatalf("asynq server: %v", err)
	}
	defer srv.Shutdown()
	client := asynq.NewClient(asynqOpt(opt))
	defer client.Close()
	for i := 1; i <= m; i++ {
		delay := time.Duration(200+2000*i/m) * time.Millisecond
		due := time.Now().Add(delay).UnixMilli()
		if _, err := client.Enqueue(asynq.NewTask("delay", []byte(strconv.FormatInt(due, 10))), asynq.Queue(queue), asynq.ProcessIn(delay)); err != nil {
			benchutil.Fatalf("asynq enqueue: %v", err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		k := len(out)
		mu.Unlock()
		if k >= m {
			break
		}
		if time.Now().After(deadline) {
			benchutil.Fatalf("asynq delay: %d of %d delivered", k, m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func deleteAsynqQueue(opt *redis.Options, queue string) {
	ins := asynq.NewInspector(asynqOpt(opt))
	defer ins.Close()
	_ = ins.DeleteQueue(queue, true)
}

func pct(sorted []int64, p int) int64 { return sorted[min(len(sorted)-1, len(sorted)*p/100)] }

func joinMs(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(parts, ", ")
}
