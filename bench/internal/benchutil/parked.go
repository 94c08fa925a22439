package benchutil

import (
	"fmt"
	"runtime"
	"syscall"
	"time"

	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
)

// LuaState is a way of making the Lua state a runtime is given.
type LuaState struct {
	Name string
	L    func() *lua.LState
}

// ParkedStates are the two states the parked-task figures are given for:
// gopher-lua's defaults, as the README embeds it, and the shield CLI's.
var ParkedStates = []LuaState{
	{"`lua.NewState()` (the README's embedding)", func() *lua.LState { return lua.NewState() }},
	{"`lua.NewState(shieldglobal.StateOptions())` (the `shield` CLI's state: 2 000-level recursion)", func() *lua.LState { return lua.NewState(shieldglobal.StateOptions()) }},
}

// Parked spawns n tasks that park in shield.sleep on a runtime of mod over
// L, and returns the Go heap each parked task holds (bytes), and the wall
// and CPU time (getrusage, GC included) per spawn (ns). Spawned tasks start
// on a later loop turn: the clock stops once every one of them has started.
func Parked(mod *shieldglobal.Module, L *lua.LState, n int) (heap, wall, cpu float64) {
	rt, err := mod.NewRuntime(L)
	if err != nil {
		Fatalf("parked: %v", err)
	}
	defer func() { rt.Close(time.Second); L.Close() }()
	if err := rt.RunString(`shield.sleep(1)`, "warm.lua"); err != nil {
		Fatalf("parked: %v", err)
	}
	before := heapAlloc()
	start, cpu0 := time.Now(), CPUTime()
	src := fmt.Sprintf(`local started = 0
		for i = 1, %d do shield.spawn(function() started = started + 1; shield.sleep(600000) end) end
		while started < %d do shield.sleep(0) end`, n, n)
	if err := rt.RunString(src, "spawn.lua"); err != nil {
		Fatalf("parked: %v", err)
	}
	rt.Do(func(*lua.LState) error { return nil })
	took, burnt := time.Since(start), CPUTime()-cpu0
	after := heapAlloc()
	return float64(int64(after)-int64(before)) / float64(n), float64(took.Nanoseconds()) / float64(n), float64(burnt.Nanoseconds()) / float64(n)
}

// CPUTime is the process's CPU time so far (user + system, every thread).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapAlloc is the live heap after two collections.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
