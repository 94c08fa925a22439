package bindings

import (
	"context"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/scheduler"
)

// BenchmarkSchedulerRegister registers b.N interval tasks from one Lua task
// (the real clock; the tasks wait an hour).
func BenchmarkSchedulerRegister(b *testing.B) {
	s := NewScheduler()
	e, err := scheduler.New(scheduler.Config{Events: s.Event, Defaults: scheduler.DefaultOptions(config.Default().Scheduler)})
	if err != nil {
		b.Fatal(err)
	}
	s.Engine = e
	defer e.Close(context.Background())
	L := lua.NewState(StateOptions())
	defer L.Close()
	rt, err := NewRuntime(L, &Services{Scheduler: s})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(0)
	b.ResetTimer()
	if err := rt.RunString(`
		local s, n = shield.scheduler(), ...
		local function job() end
		for i = 1, n do s:interval("t" .. i, 3600000, job) end`, "bench.lua", lua.LNumber(b.N)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}
