package runtime

import (
	"fmt"
	goruntime "runtime"
	"testing"
)

// BenchmarkSpawnParked spawns b.N tasks that park in shield.sleep and
// reports the Go heap each parked task holds.
func BenchmarkSpawnParked(b *testing.B) {
	rt := newTestRuntime(&testing.T{}, nil)
	mustRun(&testing.T{}, rt, `shield.sleep(1)`)
	goruntime.GC()
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	b.ResetTimer()
	if err := rt.RunString(spawnParked(b.N), "spawn.lua"); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N)/1024, "KB/task")
}

// spawnParked is a script that spawns n tasks parked in shield.sleep and
// returns once every one of them has started: spawned tasks start on a
// later loop turn, and a script that only slept 1 ms could end before them
// (and a measurement stop early).
func spawnParked(n int) string {
	return fmt.Sprintf(`local started = 0
		for i = 1, %d do shield.spawn(function() started = started + 1; shield.sleep(600000) end) end
		while started < %d do shield.sleep(0) end`, n, n)
}
