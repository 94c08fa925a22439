// Command spawnbench measures what a task parked in shield.sleep costs: the
// Go heap it holds and the time to spawn it, at 10 000 tasks, with
// lua.NewState() defaults (the README's embedding) and with the shield
// CLI's state. No Redis is involved.
//
// Each measurement runs in a fresh process (this command re-runs itself),
// as a server that has just started spawns its tasks: in a process that
// already grew and collected a heap, the same spawns run up to 1.5x faster
// (the runtime reuses memory it has, instead of faulting in new pages and
// collecting a small heap often). The two states alternate, round by
// round; the report gives the median of the rounds and the range.
//
//	cd bench && go run ./cmd/spawnbench
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"

	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/bench/internal/benchutil"
	"github.com/shieldrt/shieldglobal/config"
)

var (
	flagTasks  = flag.Int("tasks", 10000, "tasks parked in shield.sleep")
	flagRounds = flag.Int("rounds", 5, "fresh processes per Lua state")
	flagChild  = flag.String("child", "", "internal: measure this state once and print the result as JSON")
)

type state struct {
	name string
	new  func() *lua.LState
}

var states = []state{
	{"`lua.NewState()` (the README's embedding)", func() *lua.LState { return lua.NewState() }},
	{"`lua.NewState(shieldglobal.StateOptions())` (the `shield` CLI's state)", func() *lua.LState { return lua.NewState(shieldglobal.StateOptions()) }},
}

type result struct{ Heap, Wall, CPU float64 }

func main() {
	flag.Parse()
	if *flagChild != "" {
		child(*flagChild)
		return
	}
	self, err := os.Executable()
	if err != nil {
		benchutil.Fatalf("%v", err)
	}
	runs := make([][]result, len(states))
	for r := range *flagRounds {
		for i := range states {
			out, err := exec.Command(self, "-tasks", fmt.Sprint(*flagTasks), "-child", fmt.Sprint(i)).Output()
			if err != nil {
				benchutil.Fatalf("round %d, %s: %v", r+1, states[i].name, err)
			}
			var res result
			if err := json.Unmarshal(out, &res); err != nil {
				benchutil.Fatalf("round %d: %v (%q)", r+1, err, out)
			}
			fmt.Fprintf(os.Stderr, "spawnbench: round %d/%d %s: %.1f µs, %.1f µs CPU\n", r+1, *flagRounds, states[i].name, res.Wall/1e3, res.CPU/1e3)
			runs[i] = append(runs[i], res)
		}
	}
	fmt.Printf("## %d tasks parked in `shield.sleep` (a fresh process each, %d rounds)\n\n", *flagTasks, *flagRounds)
	fmt.Println("| Lua state | Go heap per parked task | spawn time per task (median, range) | CPU per spawn (GC included) |\n|---|---|---|---|")
	for i, st := range states {
		pick := func(f func(result) float64) []float64 {
			var xs []float64
			for _, r := range runs[i] {
				xs = append(xs, f(r))
			}
			return xs
		}
		walls := pick(func(r result) float64 { return r.Wall / 1e3 })
		fmt.Printf("| %s | %.1f KB | %.1f µs (%.1f–%.1f) | %.1f µs |\n", st.name,
			benchutil.Median(pick(func(r result) float64 { return r.Heap / 1024 })),
			benchutil.Median(walls), minOf(walls), maxOf(walls),
			benchutil.Median(pick(func(r result) float64 { return r.CPU / 1e3 })))
	}
}

func child(which string) {
	var i int
	if _, err := fmt.Sscan(which, &i); err != nil || i < 0 || i >= len(states) {
		benchutil.Fatalf("-child %q: no such state", which)
	}
	mod, err := shieldglobal.New(config.Default(), shieldglobal.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		benchutil.Fatalf("%v", err)
	}
	defer mod.Close()
	var res result
	res.Heap, res.Wall, res.CPU = benchutil.Parked(mod, states[i].new(), *flagTasks)
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		benchutil.Fatalf("%v", err)
	}
}

func minOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}
