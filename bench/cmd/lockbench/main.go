// Command lockbench compares the distributed locks of shield_global
// (shield.distributed_mutex from Lua, on Redis) with the Go peers
// bsm/redislock and go-redsync/redsync, and the in-process shield.mutex with
// an empty Go call, in one run on one Redis server, and prints a markdown
// table. See ../../README.md.
//
//	bash scripts/with-redis.sh sh -c 'cd bench && go run ./cmd/lockbench'   # from the repo root
//	go run ./cmd/lockbench -redis redis://127.0.0.1:6379/0 -duration 3s
//
// Each case runs for -duration in total, split into -rounds slices that are
// interleaved across the cases (round 1 of every case, then round 2, ...),
// so a busy moment of the machine hits every case alike; the ratios come
// from the totals. Every loop is bounded both by a count and by time. Keys
// live under a random prefix and are deleted at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/bench/internal/benchutil"
	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/lock"
)

var (
	flagRedis    = flag.String("redis", os.Getenv("SHIELD_TEST_REDIS_URL"), "Redis URL, loopback only (default $SHIELD_TEST_REDIS_URL)")
	flagDuration = flag.Duration("duration", 3*time.Second, "measuring time of each case (total over the rounds)")
	flagRounds   = flag.Int("rounds", 3, "interleaved rounds the duration of each case is split into")
	flagWaiters  = flag.Int("waiters", 32, "contended cases: waiters on the one key")
	flagRuntimes = flag.Int("runtimes", 4, "contended shield case: Lua states (on one Module) the waiters are spread over")
	flagMaxOps   = flag.Int("max-ops", 10_000_000, "count bound of every loop (per case and round)")
	flagCmds     = flag.Bool("cmds", true, "also print the Redis commands per op (INFO commandstats)")
	flagSections = flag.String("sections", "", "run only these sections (comma-separated numbers, e.g. 1,4); default all")
)

const (
	lockTTL  = 30 * time.Second // every lock of every library
	keySpace = 64               // uncontended: distinct keys, cycled
)

var benchStart = time.Now()

// clock is the monotonic time since start in seconds (Lua's clock()).
func clock() float64 { return time.Since(benchStart).Seconds() }

// ---- measurements

// sample is what one round of a case measured.
type sample struct {
	n       int             // ops: pairs, grants or iterations
	elapsed time.Duration   // the measured window
	waited  time.Duration   // contended: sum of acquire waits of the counted grants
	per     []int           // contended: grants per waiter
	fails   int             // contended: acquires that gave up inside the window
	changes int             // contended: grants that went to another waiter than the previous grant
	waits   []time.Duration // contended: every counted acquire wait
}

// cmdDelta is INFO commandstats calls and usec since a snapshot.
type cmdDelta map[string][2]int64

// bcase is one row: warm runs once before the first round, run measures one
// round of about d.
type bcase struct {
	section  string
	name     string
	baseline string // name of the row the ratio is against
	note     string
	warm     func()
	run      func(d time.Duration) sample
	// derived rows have no run: they are computed from another row.
	derive func(rows map[string]*bcase) (ops float64, lat time.Duration)

	total   sample
	rates   []float64 // ops/s of each round
	cmds    cmdDelta
	derived struct {
		ops float64
		lat time.Duration
	}
}

func (c *bcase) add(s sample, cmds cmdDelta) {
	t := &c.total
	t.n += s.n
	t.elapsed += s.elapsed
	t.waited += s.waited
	t.fails += s.fails
	t.changes += s.changes
	t.waits = append(t.waits, s.waits...)
	if len(t.per) < len(s.per) {
		t.per = append(t.per, make([]int, len(s.per)-len(t.per))...)
	}
	for i, v := range s.per {
		t.per[i] += v
	}
	if s.elapsed > 0 {
		c.rates = append(c.rates, float64(s.n)/s.elapsed.Seconds())
	}
	if c.cmds == nil {
		c.cmds = cmdDelta{}
	}
	for k, v := range cmds {
		o := c.cmds[k]
		c.cmds[k] = [2]int64{o[0] + v[0], o[1] + v[1]}
	}
}

func (c *bcase) ops() float64 {
	if c.derive != nil {
		return c.derived.ops
	}
	if c.total.elapsed <= 0 {
		return 0
	}
	return float64(c.total.n) / c.total.elapsed.Seconds()
}

// latency: the mean time of one op for one caller (contended: acquire wait).
func (c *bcase) latency() time.Duration {
	switch {
	case c.derive != nil:
		return c.derived.lat
	case c.total.per != nil:
		if c.total.n == 0 {
			return 0
		}
		return c.total.waited / time.Duration(c.total.n)
	case c.total.n == 0:
		return 0
	}
	return c.total.elapsed / time.Duration(c.total.n)
}

func main() {
	flag.Parse()
	if *flagRedis == "" {
		benchutil.Fatalf("no Redis: pass -redis redis://127.0.0.1:PORT/0 or set SHIELD_TEST_REDIS_URL (from the repo root, bash scripts/with-redis.sh starts a throwaway one)")
	}
	if *flagDuration <= 0 || *flagRounds < 1 || *flagWaiters < 1 || *flagRuntimes < 1 || *flagMaxOps < 1 {
		benchutil.Fatalf("-duration, -rounds, -waiters, -runtimes and -max-ops must be positive")
	}
	ctx := context.Background()
	rc, opt := benchutil.Connect(ctx, *flagRedis) // the Go peers' client: go-redis defaults, like shield's (pool_size 0)
	defer rc.Close()
	prefix := "lockbench:" + benchutil.RandHex(6) + ":"
	defer benchutil.Cleanup(rc, prefix)
	d := *flagDuration
	slice := d / time.Duration(*flagRounds)

	// One Module for every shield case, as a game server has one per process.
	cfg := config.Default()
	cfg.Global.Redis.URL = *flagRedis
	cfg.Global.Redis.Prefix = prefix + "shield:"
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mod, err := shieldglobal.New(cfg, shieldglobal.WithLogger(logger))
	if err != nil {
		benchutil.Fatalf("shieldglobal.New: %v", err)
	}
	defer mod.Close()
	rts := make([]*shieldglobal.Runtime, *flagRuntimes)
	for i := range rts {
		rts[i] = newRuntime(mod)
	}
	defer func() {
		for _, rt := range rts {
			L := stateOf(rt)
			rt.Close(5 * time.Second)
			L.Close()
		}
	}()
	// Separate Modules stand for separate processes: each has its own
	// connections, pub/sub bus and in-process lock state.
	procs := make([]*shieldglobal.Runtime, *flagRuntimes)
	procs[0] = newRuntime(mod)
	for i := 1; i < len(procs); i++ {
		m, err := shieldglobal.New(cfg, shieldglobal.WithLogger(logger))
		if err != nil {
			benchutil.Fatalf("shieldglobal.New: %v", err)
		}
		defer m.Close()
		procs[i] = newRuntime(m)
	}
	defer func() {
		for _, rt := range procs {
			L := stateOf(rt)
			rt.Close(5 * time.Second)
			L.Close()
		}
	}()
	rt := rts[0]
	rl := redislock.New(rc)
	rs := redsync.New(rsgoredis.NewPool(rc))
	n := *flagWaiters

	// ---- the cases
	const (
		sec1 = "1"
		sec2 = "2"
		sec3 = "3"
		sec4 = "4"
	)
	const (
		rawName   = "raw EVALSHA `return 1` (1 round trip)"
		floorName = "pair floor = 2 round trips (raw EVALSHA ÷ 2)"
		emptyName = "empty Go function call from Lua"
	)
	var cases []*bcase

	sha, err := rc.ScriptLoad(ctx, "return 1").Result()
	if err != nil {
		benchutil.Fatalf("SCRIPT LOAD: %v", err)
	}
	cases = append(cases, goCase(sec1, rawName, "", func(i int) error { return rc.EvalSha(ctx, sha, nil).Err() }))
	cases = append(cases, &bcase{section: sec1, name: floorName, baseline: rawName,
		note: "the floor of any script-based acquire+release",
		derive: func(rows map[string]*bcase) (float64, time.Duration) {
			r := rows[rawName]
			return r.ops() / 2, 2 * r.latency()
		}})
	cases = append(cases, luaCase(sec1, "shield distributed_mutex from Lua (auto_extend = false)", floorName, rt, "",
		`local l = shield.distributed_mutex("u0:k" .. (i % 64), {ttl = 30000, auto_extend = false}); assert(l:acquire()); assert(l:release())`, 8))
	cases = append(cases, luaCase(sec1, "shield distributed_mutex from Lua, watchdog on (auto_extend default)", floorName, rt, "",
		`local l = shield.distributed_mutex("u1:k" .. (i % 64), {ttl = 30000}); assert(l:acquire()); assert(l:release())`, 8))
	goLocks := lock.NewRedis(rc, prefix+"shield:", nil) // the Module's scripts and keys, without Lua
	c := goCase(sec1, "shield core/lock TryAcquire+Release from Go (same scripts, no Lua; reference)", floorName, func(i int) error {
		name := "u2:k" + strconv.Itoa(i%keySpace)
		a, err := goLocks.TryAcquire(name, "lockbench:go", lock.Exclusive, lock.Options{TTL: lockTTL, Reentrant: true}).Do(ctx)
		if err != nil || !a.Granted {
			return fmt.Errorf("TryAcquire %q: granted=%v err=%v", name, a.Granted, err)
		}
		_, err = goLocks.Release(name, "lockbench:go", lock.Exclusive, a.Token, 0).Do(ctx)
		return err
	})
	c.note = "isolates the Lua binding's cost"
	cases = append(cases, c)
	cases = append(cases, goCase(sec1, "bsm/redislock Obtain+Release from Go", floorName, func(i int) error {
		l, err := rl.Obtain(ctx, prefix+"rl:k"+strconv.Itoa(i%keySpace), lockTTL, nil)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}))
	cases = append(cases, goCase(sec1, "go-redsync Lock+Unlock from Go (1 node, goredis/v9 pool)", floorName, func(i int) error {
		m := rs.NewMutex(prefix+"rs:k"+strconv.Itoa(i%keySpace), redsync.WithExpiry(lockTTL))
		if err := m.LockContext(ctx); err != nil {
			return err
		}
		if ok, err := m.UnlockContext(ctx); !ok || err != nil {
			return fmt.Errorf("unlock: ok=%v err=%v", ok, err)
		}
		return nil
	}))

	cases = append(cases, luaContendedCase(sec2, fmt.Sprintf("shield distributed_mutex, %d tasks in 1 runtime, acquire() (pub/sub wake-up)", n), floorName, rts[:1], n, "hot1"))
	cases = append(cases, luaContendedCase(sec2, fmt.Sprintf("shield distributed_mutex, %d tasks over %d runtimes on one Module", n, len(rts)), floorName, rts, n, "hot4"))
	c = luaContendedCase(sec2, fmt.Sprintf("shield distributed_mutex, %d tasks over %d Modules (as %d processes)", n, len(procs), len(procs)), floorName, procs, n, "hotp")
	c.note = "extra: each Module has its own connections, bus and local queue"
	cases = append(cases, c)
	cases = append(cases, goContendedCase(sec2, fmt.Sprintf("bsm/redislock, %d goroutines, LinearBackoff(10ms)", n), floorName, n,
		func(ctx context.Context, _ int) (func() error, error) {
			l, err := rl.Obtain(ctx, prefix+"rl:hot", lockTTL, &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
			if err != nil {
				return nil, err
			}
			return func() error { return l.Release(context.Background()) }, nil
		}))
	mutexes := make([]*redsync.Mutex, n)
	for i := range mutexes {
		mutexes[i] = rs.NewMutex(prefix+"rs:hot", redsync.WithExpiry(lockTTL))
	}
	cases = append(cases, goContendedCase(sec2, fmt.Sprintf("go-redsync, %d goroutines, default retries (32 tries, 50-250ms)", n), floorName, n,
		func(ctx context.Context, w int) (func() error, error) {
			m := mutexes[w]
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return func() error {
				if ok, err := m.UnlockContext(context.Background()); !ok || err != nil {
					return fmt.Errorf("unlock: ok=%v err=%v", ok, err)
				}
				return nil
			}, nil
		}))

	const bsmParallel = "bsm/redislock Obtain+Release, 32 goroutines, distinct keys"
	cases = append(cases, goParallelCase(sec4, bsmParallel, "", 32, func(w, i int) error {
		l, err := rl.Obtain(ctx, prefix+"rlp:"+strconv.Itoa(w)+":"+strconv.Itoa(i%8), lockTTL, nil)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}))
	cases = append(cases, luaParallelCase(sec4, "shield distributed_mutex, 32 tasks in 1 runtime, distinct keys (auto_extend = false)", bsmParallel, rt, 32,
		`local ls = {}; for k = 0, 7 do ls[k] = shield.distributed_mutex("p0:" .. t .. ":" .. k, {ttl = 30000, auto_extend = false}) end`,
		`ls[i % 8]`))
	cases = append(cases, luaParallelCase(sec4, "shield distributed_mutex, 32 tasks in 1 runtime, distinct keys, watchdog on", bsmParallel, rt, 32,
		`local ls = {}; for k = 0, 7 do ls[k] = shield.distributed_mutex("p1:" .. t .. ":" .. k, {ttl = 30000}) end`,
		`ls[i % 8]`))
	cases = append(cases, luaParallelCase(sec4, "shield distributed_mutex, 32 tasks in 1 runtime, distinct keys, object made per pair", bsmParallel, rt, 32,
		``, `shield.distributed_mutex("p2:" .. t .. ":" .. (i % 8), {ttl = 30000, auto_extend = false})`))

	cases = append(cases, luaCase(sec3, emptyName, "", rt, "", `empty()`, 1024))
	cases = append(cases, luaCase(sec3, "shield.mutex acquire+release (object made once)", emptyName, rt,
		`local m = shield.mutex("local0")`, `assert(m:acquire()); assert(m:release())`, 1024))
	cases = append(cases, luaCase(sec3, "shield.mutex(name) + acquire+release (object per iteration)", emptyName, rt,
		"", `local m = shield.mutex("local1"); assert(m:acquire()); assert(m:release())`, 1024))

	if *flagSections != "" {
		keep := map[string]bool{}
		for _, sec := range strings.Split(*flagSections, ",") {
			keep[strings.TrimSpace(sec)] = true
		}
		kept := cases[:0]
		for _, c := range cases {
			if keep[c.section] {
				kept = append(kept, c)
			}
		}
		cases = kept
	}

	// ---- header
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("# lockbench: shield_global locks vs Go peers\n\n")
	fmt.Printf("- Go %s %s/%s, %d CPUs (GOMAXPROCS %d), load average at start %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.GOMAXPROCS(0), strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	fmt.Printf("- Redis %s at %s (loopback; the server shares the CPUs with this process)\n", benchutil.RedisVersion(ctx, rc), opt.Addr)
	fmt.Printf("- each case: %v in %d interleaved rounds; lock TTL %v everywhere; uncontended keys cycle over %d names; contended: %d waiters on one key, hold 0\n",
		d, *flagRounds, lockTTL, keySpace, n)
	fmt.Printf("- ratio = baseline ops/s ÷ row ops/s: the row's cost in units of the baseline's (> 1 = slower)\n\n")

	// ---- run
	stats := &cmdStats{c: rc}
	for r := 0; r < *flagRounds; r++ {
		for _, c := range cases {
			if c.run == nil {
				continue
			}
			if r == 0 && c.warm != nil {
				c.warm()
			}
			base := stats.read(ctx)
			s := c.run(slice)
			c.add(s, stats.since(ctx, base))
			fmt.Fprintf(os.Stderr, "lockbench: round %d/%d %-80s %10.0f ops/s\n", r+1, *flagRounds, c.name, float64(s.n)/s.elapsed.Seconds())
		}
	}
	byName := map[string]*bcase{}
	for _, c := range cases {
		byName[c.name] = c
	}
	for _, c := range cases {
		if c.derive != nil {
			c.derived.ops, c.derived.lat = c.derive(byName)
		}
	}

	printTable(cases, byName)
	printSummary(cases)
	if *flagCmds {
		printCmds(cases)
	}
}

// ---- Go loops

// goCase: op in a loop for d (at most -max-ops times), one caller.
func goCase(section, name, baseline string, op func(i int) error) *bcase {
	i := 0
	return &bcase{section: section, name: name, baseline: baseline,
		warm: func() {
			for j := 0; j < 50; j++ {
				if err := op(j); err != nil {
					benchutil.Fatalf("%s: warm-up: %v", name, err)
				}
			}
		},
		run: func(d time.Duration) sample {
			start := time.Now()
			n := 0
			for ; n < *flagMaxOps && time.Since(start) < d; n++ {
				if err := op(i); err != nil {
					benchutil.Fatalf("%s: op %d: %v", name, i, err)
				}
				i++
			}
			return sample{n: n, elapsed: time.Since(start)}
		}}
}

// ---- Lua loops

// stateOf returns the Lua state of rt (the one Do hands to its function).
func stateOf(rt *shieldglobal.Runtime) *lua.LState {
	var L *lua.LState
	if err := rt.Do(func(l *lua.LState) error { L = l; return nil }); err != nil {
		benchutil.Fatalf("stateOf: %v", err)
	}
	return L
}

func newRuntime(mod *shieldglobal.Module) *shieldglobal.Runtime {
	rt, err := mod.NewRuntime(lua.NewState())
	if err != nil {
		benchutil.Fatalf("NewRuntime: %v", err)
	}
	err = rt.Do(func(L *lua.LState) error {
		L.SetGlobal("empty", L.NewFunction(func(*lua.LState) int { return 0 }))
		L.SetGlobal("clock", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LNumber(clock())); return 1 }))
		L.SetGlobal("note_grant", L.NewFunction(func(L *lua.LState) int { grants.note(L.CheckInt(1)); return 0 }))
		return nil
	})
	if err != nil {
		benchutil.Fatalf("runtime setup: %v", err)
	}
	return rt
}

// luaLoop is `for i = 1, N do BODY end` in chunks of k iterations, with a
// clock check between chunks (count- and time-bounded), timed in Lua, run
// as a task by RunString. The loop variable i runs on across rounds.
const luaLoop = `
local chunks, k, deadline, first = ...
%s
local t0 = clock()
local done = 0
for c = 1, chunks do
  for j = 1, k do
    local i = first + done + j
    %s
  end
  done = done + k
  if clock() >= deadline then break end
end
RESULT = {done = done, elapsed = clock() - t0}
`

func luaRun(rt *shieldglobal.Runtime, src string, n, k, first int, limit time.Duration) sample {
	chunks := max((n+k-1)/k, 1)
	deadline := clock() + limit.Seconds()
	if err := rt.RunString(src, "lockbench.lua", lua.LNumber(chunks), lua.LNumber(k), lua.LNumber(deadline), lua.LNumber(first)); err != nil {
		benchutil.Fatalf("lua: %v", err)
	}
	var s sample
	err := rt.Do(func(L *lua.LState) error {
		t, ok := L.GetGlobal("RESULT").(*lua.LTable)
		if !ok {
			return errors.New("no RESULT")
		}
		s.n = int(lua.LVAsNumber(t.RawGetString("done")))
		s.elapsed = time.Duration(float64(lua.LVAsNumber(t.RawGetString("elapsed"))) * float64(time.Second))
		L.SetGlobal("RESULT", lua.LNil)
		return nil
	})
	if err != nil {
		benchutil.Fatalf("lua result: %v", err)
	}
	return s
}

// luaCase times `for i = 1, N do body end` inside a task; the warm-up is a
// short probe run that calibrates N so that a round runs about d (2d is
// the time bound).
func luaCase(section, name, baseline string, rt *shieldglobal.Runtime, setup, body string, k int) *bcase {
	src := fmt.Sprintf(luaLoop, setup, body)
	var rate float64
	first := 0
	return &bcase{section: section, name: name, baseline: baseline,
		warm: func() {
			p := luaRun(rt, src, *flagMaxOps, k, first, min(*flagDuration/10, 300*time.Millisecond)+time.Millisecond)
			first += p.n
			rate = float64(p.n) / p.elapsed.Seconds()
		},
		run: func(d time.Duration) sample {
			n := max(min(int(rate*d.Seconds()), *flagMaxOps), k)
			s := luaRun(rt, src, n, k, first, 2*d)
			first += s.n
			return s
		}}
}

// ---- concurrent callers on distinct keys

// goParallelCase: n goroutines each loop op(w, i) for d.
func goParallelCase(section, name, baseline string, n int, op func(w, i int) error) *bcase {
	run := func(d time.Duration) sample {
		start := time.Now()
		deadline := start.Add(d)
		var (
			mu    sync.Mutex
			wg    sync.WaitGroup
			total int
		)
		for w := 0; w < n; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				i := 0
				for ; i < *flagMaxOps/n && time.Now().Before(deadline); i++ {
					if err := op(w, i); err != nil {
						benchutil.Fatalf("%s: %v", name, err)
					}
				}
				mu.Lock()
				total += i
				mu.Unlock()
			}()
		}
		wg.Wait()
		return sample{n: total, elapsed: time.Since(start)}
	}
	return &bcase{section: section, name: name, baseline: baseline,
		warm: func() { run(min(*flagDuration/10, 300*time.Millisecond)) },
		run:  run}
}

// luaParallelSrc: ntasks tasks of one runtime each run setup (t in scope),
// then loop acquire+release on the lock the expression lock (t and i in
// scope) gives, until the deadline.
const luaParallelSrc = `
local ntasks, deadline, maxops = ...
local count, finished = 0, 0
local t0 = clock()
for t = 1, ntasks do
  shield.spawn(function()
    %s
    local i = 0
    while i < maxops and clock() < deadline do
      i = i + 1
      local l = %s
      assert(l:acquire())
      assert(l:release())
    end
    count = count + i
    finished = finished + 1
  end)
end
while finished < ntasks do shield.sleep(5) end
RESULT = {done = count, elapsed = clock() - t0}
`

func luaParallelCase(section, name, baseline string, rt *shieldglobal.Runtime, n int, setup, lock string) *bcase {
	src := fmt.Sprintf(luaParallelSrc, setup, lock)
	run := func(d time.Duration) sample {
		deadline := clock() + d.Seconds()
		if err := rt.RunString(src, "parallel.lua", lua.LNumber(n), lua.LNumber(deadline), lua.LNumber(*flagMaxOps/n)); err != nil {
			benchutil.Fatalf("%s: %v", name, err)
		}
		var s sample
		err := rt.Do(func(L *lua.LState) error {
			t, ok := L.GetGlobal("RESULT").(*lua.LTable)
			if !ok {
				return errors.New("no RESULT")
			}
			s.n = int(lua.LVAsNumber(t.RawGetString("done")))
			s.elapsed = time.Duration(float64(lua.LVAsNumber(t.RawGetString("elapsed"))) * float64(time.Second))
			L.SetGlobal("RESULT", lua.LNil)
			return nil
		})
		if err != nil {
			benchutil.Fatalf("%s: result: %v", name, err)
		}
		return s
	}
	return &bcase{section: section, name: name, baseline: baseline,
		warm: func() { run(min(*flagDuration/10, 300*time.Millisecond)) },
		run:  run}
}

// ---- contended

// grantLog records the order of grants on the contended key, to count the
// grants that changed the owner (a releaser that takes the lock straight
// back — barging — makes a grant, not a handoff to another waiter). Grants
// of one key are serialized by the lock itself.
type grantLog struct {
	mu      sync.Mutex
	last    int
	changes int
}

var grants grantLog

func (g *grantLog) reset() { g.mu.Lock(); g.last, g.changes = -1, 0; g.mu.Unlock() }

func (g *grantLog) note(w int) {
	g.mu.Lock()
	if g.last != w {
		g.changes++
	}
	g.last = w
	g.mu.Unlock()
}

func (g *grantLog) count() int { g.mu.Lock(); defer g.mu.Unlock(); return g.changes }

// luaContendedSrc: the main chunk of one runtime spawns ntasks waiters;
// each loops acquire -> release on one key until the deadline (or maxops
// grants). A grant counts when it comes before the deadline.
const luaContendedSrc = `
local ntasks, name, deadline, maxops, base = ...
local count, waited, finished, per, waits = 0, 0, 0, {}, {}
for t = 1, ntasks do
  shield.spawn(function()
    local l = shield.distributed_mutex(name, {ttl = 30000, auto_extend = false})
    local mine = 0
    while mine < maxops do
      local t0 = clock()
      if t0 >= deadline then break end
      assert(l:acquire())
      local t1 = clock()
      if t1 < deadline then
        count, mine, waited = count + 1, mine + 1, waited + (t1 - t0)
        waits[count] = t1 - t0
        note_grant(base + t)
      end
      assert(l:release())
    end
    per[t] = mine
    finished = finished + 1
  end)
end
while finished < ntasks and clock() < deadline + 60 do shield.sleep(5) end
assert(finished == ntasks, "waiters did not finish within 60s of the deadline")
RESULT = {count = count, waited = waited, per = per, waits = waits}
`

func luaContendedCase(section, name, baseline string, rts []*shieldglobal.Runtime, waiters int, key string) *bcase {
	run := func(d time.Duration, maxOps int) sample {
		grants.reset()
		start := clock()
		deadline := start + d.Seconds()
		out := sample{per: make([]int, waiters)}
		var (
			mu  sync.Mutex
			wg  sync.WaitGroup
			off int
		)
		for i, rt := range rts {
			tasks := waiters / len(rts)
			if i < waiters%len(rts) {
				tasks++
			}
			if tasks == 0 {
				continue
			}
			wg.Add(1)
			go func(off int) {
				defer wg.Done()
				err := rt.RunString(luaContendedSrc, "contended.lua",
					lua.LNumber(tasks), lua.LString(key), lua.LNumber(deadline), lua.LNumber(maxOps), lua.LNumber(off))
				if err != nil {
					benchutil.Fatalf("%s: %v", name, err)
				}
				err = rt.Do(func(L *lua.LState) error {
					t := L.GetGlobal("RESULT").(*lua.LTable)
					mu.Lock()
					defer mu.Unlock()
					out.n += int(lua.LVAsNumber(t.RawGetString("count")))
					out.waited += time.Duration(float64(lua.LVAsNumber(t.RawGetString("waited"))) * float64(time.Second))
					per := t.RawGetString("per").(*lua.LTable)
					for j := 1; j <= tasks; j++ {
						out.per[off+j-1] = int(lua.LVAsNumber(per.RawGetInt(j)))
					}
					ws := t.RawGetString("waits").(*lua.LTable)
					for j := 1; j <= ws.Len(); j++ {
						out.waits = append(out.waits, time.Duration(float64(lua.LVAsNumber(ws.RawGetInt(j)))*float64(time.Second)))
					}
					L.SetGlobal("RESULT", lua.LNil)
					return nil
				})
				if err != nil {
					benchutil.Fatalf("%s: result: %v", name, err)
				}
			}(off)
			off += tasks
		}
		wg.Wait()
		out.elapsed = time.Duration((deadline - start) * float64(time.Second))
		out.changes = grants.count()
		return out
	}
	return &bcase{section: section, name: name, baseline: baseline,
		warm: func() { run(min(*flagDuration/10, 300*time.Millisecond), *flagMaxOps) },
		run:  func(d time.Duration) sample { return run(d, *flagMaxOps/waiters+1) }}
}

// goContendedCase: waiters goroutines loop acquire -> release until the
// deadline (or max-ops grants); acquire's ctx ends at the deadline.
func goContendedCase(section, name, baseline string, waiters int, acquire func(ctx context.Context, w int) (release func() error, err error)) *bcase {
	run := func(d time.Duration, maxOps int) sample {
		grants.reset()
		start := time.Now()
		deadline := start.Add(d)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		out := sample{per: make([]int, waiters)}
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		for w := 0; w < waiters; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mine, fails := 0, 0
				var (
					waited time.Duration
					waits  []time.Duration
				)
				for mine < maxOps && time.Now().Before(deadline) {
					t0 := time.Now()
					release, err := acquire(ctx, w)
					t1 := time.Now()
					if err != nil {
						if ctx.Err() == nil {
							fails++
						}
						continue
					}
					if t1.Before(deadline) {
						mine++
						waited += t1.Sub(t0)
						waits = append(waits, t1.Sub(t0))
						grants.note(w)
					}
					if err := release(); err != nil {
						benchutil.Fatalf("%s: release: %v", name, err)
					}
				}
				mu.Lock()
				out.n += mine
				out.waited += waited
				out.fails += fails
				out.per[w] = mine
				out.waits = append(out.waits, waits...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		out.elapsed = d
		out.changes = grants.count()
		return out
	}
	return &bcase{section: section, name: name, baseline: baseline,
		warm: func() { run(min(*flagDuration/10, 300*time.Millisecond), *flagMaxOps) },
		run:  func(d time.Duration) sample { return run(d, *flagMaxOps/waiters+1) }}
}

// ---- Redis command counts (INFO commandstats deltas)

type cmdStats struct{ c *redis.Client }

func (s *cmdStats) read(ctx context.Context) cmdDelta {
	info, err := s.c.Info(ctx, "commandstats").Result()
	if err != nil {
		benchutil.Fatalf("INFO commandstats: %v", err)
	}
	out := cmdDelta{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var v [2]int64
		for _, f := range strings.Split(rest, ",") {
			if x, ok := strings.CutPrefix(f, "calls="); ok {
				v[0], _ = strconv.ParseInt(x, 10, 64)
			} else if x, ok := strings.CutPrefix(f, "usec="); ok {
				v[1], _ = strconv.ParseInt(x, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = v
	}
	return out
}

// since returns the calls and usec of each command since base (INFO excluded).
func (s *cmdStats) since(ctx context.Context, base cmdDelta) cmdDelta {
	out := cmdDelta{}
	for k, v := range s.read(ctx) {
		if k == "info" {
			continue
		}
		b := base[k]
		if v[0] > b[0] {
			out[k] = [2]int64{v[0] - b[0], v[1] - b[1]}
		}
	}
	return out
}

// ---- output

func printTable(cases []*bcase, byName map[string]*bcase) {
	fmt.Println("| # | case | ops/s | mean latency | ratio | baseline | notes |")
	fmt.Println("|---|---|---:|---:|---:|---|---|")
	idx := map[string]int{}
	for _, c := range cases {
		idx[c.section]++
		ratio, base := "", ""
		if b := byName[c.baseline]; b != nil && c.ops() > 0 {
			ratio = fmt.Sprintf("%.2f×", b.ops()/c.ops())
			base = fmt.Sprintf("%s.%d", b.section, idx0(cases, b))
		}
		notes := []string{}
		if c.note != "" {
			notes = append(notes, c.note)
		}
		if c.total.per != nil {
			lo, hi := math.MaxInt, 0
			for _, v := range c.total.per {
				lo, hi = min(lo, v), max(hi, v)
			}
			notes = append(notes, fmt.Sprintf("latency = mean acquire wait (p99 %s, max %s); grants per waiter %d..%d",
				fmtDur(quantile(c.total.waits, 0.99)), fmtDur(quantile(c.total.waits, 1)), lo, hi))
			if c.total.n > 0 {
				notes = append(notes, fmt.Sprintf("owner changed on %.0f%% of grants (%s handoffs/s)",
					100*float64(c.total.changes)/float64(c.total.n), fmtOps(float64(c.total.changes)/c.total.elapsed.Seconds())))
			}
			if c.total.fails > 0 {
				notes = append(notes, fmt.Sprintf("%d acquires gave up", c.total.fails))
			}
		}
		if len(c.rates) > 1 {
			lo, hi := c.rates[0], c.rates[0]
			for _, r := range c.rates {
				lo, hi = math.Min(lo, r), math.Max(hi, r)
			}
			notes = append(notes, fmt.Sprintf("rounds %s..%s ops/s", fmtOps(lo), fmtOps(hi)))
		}
		fmt.Printf("| %s.%d | %s | %s | %s | %s | %s | %s |\n",
			c.section, idx[c.section], c.name, fmtOps(c.ops()), fmtDur(c.latency()), ratio, base, strings.Join(notes, "; "))
	}
	fmt.Println()
	fmt.Println("1.x: uncontended acquire+release pairs on distinct keys, one caller (ops = pairs).")
	fmt.Println("2.x: contended, one key; ops = successful acquires (grants) per second; \"handoffs\" = grants that changed the owner.")
	fmt.Println("3.x: in-process, one Lua state; ops = loop iterations.")
	fmt.Println("4.x: 32 concurrent callers, each on its own keys (cycling over 8), acquire+release pairs (ops = pairs).")
}

// quantile returns the q-quantile of ws (nearest rank).
func quantile(ws []time.Duration, q float64) time.Duration {
	if len(ws) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ws...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func idx0(cases []*bcase, b *bcase) int {
	i := 0
	for _, c := range cases {
		if c.section == b.section {
			i++
		}
		if c == b {
			return i
		}
	}
	return 0
}

func printSummary(cases []*bcase) {
	get := func(prefix string) *bcase {
		for _, c := range cases {
			if strings.HasPrefix(c.name, prefix) {
				return c
			}
		}
		return nil
	}
	cmp := func(label, a, b string, handoffs bool) {
		ra, rb := get(a), get(b)
		if ra == nil || rb == nil || ra.ops() <= 0 {
			return
		}
		oa, ob := ra.ops(), rb.ops()
		unit := "ops/s"
		if handoffs {
			oa, ob = float64(ra.total.changes)/ra.total.elapsed.Seconds(), float64(rb.total.changes)/rb.total.elapsed.Seconds()
			unit = "handoffs/s"
		}
		if oa > 0 {
			fmt.Printf("- %s: %.2f× (%s vs %s %s)\n", label, ob/oa, fmtOps(oa), fmtOps(ob), unit)
		}
	}
	shield1 := "shield distributed_mutex, " + strconv.Itoa(*flagWaiters) + " tasks in 1"
	fmt.Println("\nshield against the peers (peer ÷ shield; > 1 = shield slower):")
	cmp("uncontended pairs, shield from Lua (no watchdog) vs bsm/redislock", "shield distributed_mutex from Lua (auto", "bsm/redislock Obtain", false)
	cmp("uncontended pairs, shield from Lua (no watchdog) vs go-redsync", "shield distributed_mutex from Lua (auto", "go-redsync Lock", false)
	cmp("32 callers on distinct keys, shield tasks (no watchdog) vs bsm/redislock goroutines", "shield distributed_mutex, 32 tasks in 1 runtime, distinct keys (auto", "bsm/redislock Obtain+Release, 32", false)
	cmp("contended grants, shield 1 runtime vs bsm/redislock", shield1, "bsm/redislock, ", false)
	cmp("contended grants, shield 1 runtime vs go-redsync", shield1, "go-redsync, ", false)
	cmp("contended handoffs to another waiter, shield 1 runtime vs bsm/redislock", shield1, "bsm/redislock, ", true)
	cmp("contended handoffs to another waiter, shield 1 runtime vs go-redsync", shield1, "go-redsync, ", true)
}

func printCmds(cases []*bcase) {
	fmt.Println("\nRedis commands per op, with the server time per call in parentheses (INFO commandstats deltas; commands")
	fmt.Println("run inside a script are counted too, and the script's time includes theirs):")
	fmt.Println()
	for _, c := range cases {
		if len(c.cmds) == 0 || c.total.n == 0 {
			continue
		}
		ops := float64(c.total.n)
		keys := make([]string, 0, len(c.cmds))
		for k := range c.cmds {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := c.cmds[keys[i]][0], c.cmds[keys[j]][0]
			return a > b || a == b && keys[i] < keys[j]
		})
		parts := []string{}
		for _, k := range keys {
			if per := float64(c.cmds[k][0]) / ops; per >= 0.01 {
				parts = append(parts, fmt.Sprintf("%s %.2f (%.1f µs)", k, per, float64(c.cmds[k][1])/float64(c.cmds[k][0])))
			}
		}
		if len(parts) > 0 {
			fmt.Printf("- %s.%d %s: %s\n", c.section, idx0(cases, c), c.name, strings.Join(parts, ", "))
		}
	}
}

func fmtOps(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Microsecond:
		return fmt.Sprintf("%d ns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1e3)
	default:
		return fmt.Sprintf("%.2f ms", float64(d.Nanoseconds())/1e6)
	}
}

// ---- misc
