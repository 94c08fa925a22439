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
	"slices"

	shieldglobal "github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/bench/internal/benchutil"
	"github.com/shieldrt/shieldglobal/config"
)

var (
	flagTasks  = flag.Int("tasks", 10000, "tasks parked in shield.sleep")
	flagRounds = flag.Int("rounds", 5, "fresh processes per Lua state")
	flagChild  = flag.Int("child", -1, "internal: measure state N of benchutil.ParkedStates once and print the result as JSON")
)

var states = benchutil.ParkedStates

type result struct{ Heap, Wall, CPU float64 }

func main() {
	flag.Parse()
	if *flagTasks < 1 || *flagRounds < 1 {
		benchutil.Fatalf("-tasks and -rounds must be at least 1")
	}
	if *flagChild >= 0 {
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
			cmd := exec.Command(self, "-tasks", fmt.Sprint(*flagTasks), "-child", fmt.Sprint(i))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				benchutil.Fatalf("round %d, %s: %v", r+1, states[i].Name, err)
			}
			var res result
			if err := json.Unmarshal(out, &res); err != nil {
				benchutil.Fatalf("round %d: %v (%q)", r+1, err, out)
			}
			fmt.Fprintf(os.Stderr, "spawnbench: round %d/%d %s: %.1f µs, %.1f µs CPU\n", r+1, *flagRounds, states[i].Name, res.Wall/1e3, res.CPU/1e3)
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
		fmt.Printf("| %s | %.1f KB | %.1f µs (%.1f–%.1f) | %.1f µs |\n", st.Name,
			benchutil.Median(pick(func(r result) float64 { return r.Heap / 1024 })),
			benchutil.Median(walls), slices.Min(walls), slices.Max(walls),
			benchutil.Median(pick(func(r result) float64 { return r.CPU / 1e3 })))
	}
}

func child(i int) {
	if i >= len(states) {
		benchutil.Fatalf("-child %d: no such state", i)
	}
	mod, err := shieldglobal.New(config.Default(), shieldglobal.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		benchutil.Fatalf("%v", err)
	}
	defer mod.Close()
	var res result
	res.Heap, res.Wall, res.CPU = benchutil.Parked(mod, states[i].L(), *flagTasks)
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		benchutil.Fatalf("%v", err)
	}
}
