// Command callcount runs one Lua call path case N times on the memory
// backend, for counting instructions under valgrind --tool=callgrind
// (bench/callgrind.sh runs it at two N and divides the difference, so the
// setup's instructions cancel). Wall time on a shared VM swings 2× between
// rounds; the instruction count of the same work is repeatable.
//
// Cases (one per run, -case):
//
//	loop   for i = 1, n do end            (the loop alone)
//	empty  empty()                         (an empty Go function; the unit)
//	mutex  assert(m:acquire()); assert(m:release())   (m = shield.mutex made once;
//	       lockbench section 3.2)
//	mutex_new  local m = shield.mutex(name); assert(m:acquire()); assert(m:release())
//	       (lockbench 3.3)
//	yield  shield.sleep(0)                 (one yield and resume; runtimebench's "yield")
//	get    g:get("k")                      (shield.global() on the memory backend)
//
// It runs the body warm times first (so lazily built state, map growth and
// the first calls' costs are paid in both runs of a pair), then n times, and
// prints allocations per iteration of the measured loop on stderr:
// GOGC=off (which bench/callgrind.sh sets) takes the collector out of the
// count, so allocations are the part of an op's cost not in it.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"time"

	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/bench/internal/benchutil"
	"github.com/shieldrt/shieldglobal/config"
)

var cases = map[string]struct{ setup, body string }{
	"loop":      {``, ``},
	"empty":     {``, `empty()`},
	"mutex":     {`local m = shield.mutex("callcount")`, `assert(m:acquire()); assert(m:release())`},
	"mutex_new": {``, `local m = shield.mutex("callcount_new"); assert(m:acquire()); assert(m:release())`},
	"yield":     {``, `shield.sleep(0)`},
	"get":       {`local g = shield.global(); g:set("k", "value")`, `g:get("k")`},
}

func main() {
	name := flag.String("case", "empty", "loop, empty, mutex, mutex_new, yield or get")
	n := flag.Int("n", 20000, "iterations of the measured loop")
	warm := flag.Int("warm", 2000, "iterations run first, outside the measured loop")
	flag.Parse()
	c, ok := cases[*name]
	if !ok {
		fmt.Fprintf(os.Stderr, "callcount: unknown case %q\n", *name)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mod, err := shieldglobal.New(config.Default(), shieldglobal.WithLogger(log))
	if err != nil {
		fatal("shieldglobal.New: %v", err)
	}
	defer mod.Close()
	rt, err := mod.NewRuntime(lua.NewState())
	if err != nil {
		fatal("NewRuntime: %v", err)
	}
	if err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("empty", L.NewFunction(func(*lua.LState) int { return 0 }))
		// Grow the loop goroutine's stack now (with GOGC=off it never
		// shrinks): a stack copy during the measured loop would move the
		// frames under callgrind's call tracking, which then misattributes
		// calls (callgrind_annotate's caller trees), though not the totals.
		growStack(4096)
		return nil
	}); err != nil {
		fatal("setup: %v", err)
	}
	// One chunk, one task: setup, the warm-up loop, then the measured loop,
	// with a Go function between the two to read the allocation counters.
	var m0, m1 runtime.MemStats
	var cpu0, cpu1 time.Duration
	var wall0, wall1 time.Time
	if err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("mark", L.NewFunction(func(*lua.LState) int {
			runtime.ReadMemStats(&m0)
			cpu0, wall0 = benchutil.CPUTime(), time.Now()
			return 0
		}))
		L.SetGlobal("done", L.NewFunction(func(*lua.LState) int {
			cpu1, wall1 = benchutil.CPUTime(), time.Now()
			return 0
		}))
		return nil
	}); err != nil {
		fatal("setup: %v", err)
	}
	src := c.setup + "\nlocal warm, n = ...\nfor i = 1, warm do " + c.body + " end\nmark()\nfor i = 1, n do " + c.body + " end\ndone()"
	if err := rt.RunString(src, "callcount.lua", lua.LNumber(*warm), lua.LNumber(*n)); err != nil {
		fatal("run: %v", err)
	}
	runtime.ReadMemStats(&m1)
	fmt.Fprintf(os.Stderr, "callcount: case %s, n %s, warm %d, GOMAXPROCS %d, GOGC %q: %.2f allocs, %.0f B per iteration\n",
		*name, strconv.Itoa(*n), *warm, runtime.GOMAXPROCS(0), os.Getenv("GOGC"),
		float64(m1.Mallocs-m0.Mallocs)/float64(*n), float64(m1.TotalAlloc-m0.TotalAlloc)/float64(*n))
	// Time means something only outside valgrind (bench/callgrind.sh
	// ignores it): the comparison with the instruction counts.
	fmt.Fprintf(os.Stderr, "callcount-time: case %s: %.1f ns CPU, %.1f ns wall per iteration\n",
		*name, float64((cpu1-cpu0).Nanoseconds())/float64(*n), float64(wall1.Sub(wall0).Nanoseconds())/float64(*n))
	rt.Close(0)
}

// growStack uses about n × 300 bytes of stack.
//
//go:noinline
func growStack(n int) byte {
	var pad [256]byte
	pad[n%len(pad)] = byte(n)
	if n == 0 {
		return pad[0]
	}
	return growStack(n-1) + pad[n%len(pad)]
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "callcount: "+format+"\n", args...)
	os.Exit(1)
}
