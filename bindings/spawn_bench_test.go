package bindings

import (
	"runtime"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// BenchmarkSpawnParked spawns b.N tasks that park in shield.sleep and
// reports the Go heap each parked task holds.
func BenchmarkSpawnParked(b *testing.B) {
	rt := newTestRuntime(&testing.T{}, nil)
	mustRun(&testing.T{}, rt, `shield.sleep(1)`)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_ = rt.Do(func(L *lua.LState) error { L.SetGlobal("N", lua.LNumber(b.N)); return nil })
	b.ResetTimer()
	if err := rt.RunString(`for i = 1, N do shield.spawn(function() shield.sleep(600000) end) end shield.sleep(1)`, "spawn.lua"); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N)/1024, "KB/task")
}
