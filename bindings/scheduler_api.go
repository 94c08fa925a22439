package bindings

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// taskNotFound makes ErrNotFound the value pair nil, "not_found".
func taskNotFound(err error) ([]lua.LValue, error) {
	if errors.Is(err, scheduler.ErrNotFound) {
		return notFound(), nil
	}
	return nil, err
}

// ---- registration

// scheduler:cron(name, expr, fn [, opts]) -> task. expr is a five-field
// cron expression or descriptor, or a seed-001 form that is one
// (daily:HH:MM, hourly:MM, cron:<expr>).
func (b *schedBinding) cron(L *lua.LState) int {
	a := b.args(L, "cron")
	expr := a.Str(3)
	s, err := scheduler.Parse(expr)
	if err != nil {
		a.Bad(3, invalidText(err))
	}
	if s.Kind() != scheduler.KindCron && !strings.HasPrefix(strings.TrimSpace(expr), "@every") {
		a.Bad(3, fmt.Sprintf("%q is not a cron schedule (use scheduler:interval, scheduler:once or scheduler:add)", expr))
	}
	return b.register(L, a, s)
}

// scheduler:interval(name, ms, fn [, opts]) -> task: every ms milliseconds
// (> 0; fractions round up).
func (b *schedBinding) interval(L *lua.LState) int {
	a := b.args(L, "interval")
	ms := a.Num(3)
	if ms != ms || ms <= 0 || ms > 1e13 {
		a.Bad(3, fmt.Sprintf("interval must be a positive number of milliseconds, got %s", lua.LNumber(ms).String()))
	}
	s, err := scheduler.Every(time.Duration(math.Ceil(ms)) * time.Millisecond)
	if err != nil {
		a.Bad(3, invalidText(err))
	}
	return b.register(L, a, s)
}

// scheduler:once(name, delay_ms, fn [, opts]) -> task: once, delay_ms from
// now (>= 0); removed after it runs.
func (b *schedBinding) once(L *lua.LState) int {
	a := b.args(L, "once")
	ms := a.Num(3)
	if ms != ms || ms < 0 || ms > 1e13 {
		a.Bad(3, fmt.Sprintf("delay must be a number of milliseconds >= 0, got %s", lua.LNumber(ms).String()))
	}
	s, err := scheduler.After(time.Duration(math.Ceil(ms)) * time.Millisecond)
	if err != nil {
		a.Bad(3, invalidText(err))
	}
	return b.register(L, a, s)
}

// scheduler:add(name, expression, fn [, opts]) -> task, with seed 001's
// formats: every:60 every:30s every:5m every:1h daily:03:00 hourly:30
// cron:<expr> at:<unix seconds>, or a bare cron expression.
func (b *schedBinding) add(L *lua.LState) int {
	a := b.args(L, "add")
	s, err := scheduler.Parse(a.Str(3))
	if err != nil {
		a.Bad(3, invalidText(err))
	}
	return b.register(L, a, s)
}

// register reads name (#2), fn (#4) and opts (#5) and registers the task.
func (b *schedBinding) register(L *lua.LState, a runtime.Args, s scheduler.Schedule) int {
	name := b.taskName(a, 2)
	fn := a.Function(4)
	var t *lua.LTable
	if L.Get(5) != lua.LNil {
		t = a.Table(5)
	}
	o := parseTaskOpts(b.s.Engine.DefaultOptions(), t, taskOptions, func(msg string) { a.Bad(5, msg) })
	return b.registerTask(L, a.Fn, name, s, fn, o, func(err error) error { return err })
}

// taskName checks a task name argument.
func (b *schedBinding) taskName(a runtime.Args, n int) string {
	name := a.Name(n, "task name")
	if name[0] == '}' {
		a.Bad(n, "task name must not start with '}'")
	}
	return name
}

// registerTask registers the task and returns its task object; wrap
// rewrites errors (a task file names itself).
func (b *schedBinding) registerTask(L *lua.LState, fn, name string, s scheduler.Schedule, run *lua.LFunction, o taskOpts, wrap func(error) error) int {
	gen := b.beginRegister(name)
	op := b.s.Engine.Register(scheduler.Task{Name: name, Schedule: s, Options: o.opts, Owner: b.owner,
		Run: b.runFunc(run, o.onError), Gone: b.goneFunc(name, gen)})
	return runtime.RunOutcome(b.rt, L, b.name(fn), op, func(L *lua.LState, info scheduler.Info, err error) ([]lua.LValue, error) {
		b.endRegister(name, gen, info, err == nil)
		if err != nil {
			switch {
			case errors.Is(err, scheduler.ErrInvalid):
				err = errors.New(invalidText(err))
			case errors.Is(err, scheduler.ErrKindConflict):
				msg := err.Error()
				if i := strings.LastIndex(msg, scheduler.ErrKindConflict.Error()+": "); i >= 0 {
					msg = msg[i+len(scheduler.ErrKindConflict.Error())+2:]
				}
				err = errors.New(msg + " (remove it first to change its kind)")
			}
			return nil, wrap(err)
		}
		return []lua.LValue{b.taskObject(L, info)}, nil
	})
}

// ---- control

// scheduler:get(name) -> task, or nil, "not_found".
func (b *schedBinding) get(L *lua.LState) int {
	a := b.args(L, "get")
	name := b.taskName(a, 2)
	return runtime.RunOutcome(b.rt, L, b.name("get"), b.s.Engine.Get(name), func(L *lua.LState, info scheduler.Info, err error) ([]lua.LValue, error) {
		if err != nil {
			return taskNotFound(err)
		}
		return []lua.LValue{b.taskObject(L, info)}, nil
	})
}

// scheduler:list() -> { task, ... }: the tasks registered in this process,
// by name.
func (b *schedBinding) list(L *lua.LState) int {
	b.args(L, "list")
	return runtime.RunOutcome(b.rt, L, b.name("list"), b.s.Engine.List(), func(L *lua.LState, infos []scheduler.Info, err error) ([]lua.LValue, error) {
		if err != nil {
			return nil, err
		}
		t := L.CreateTable(len(infos), 0)
		for i, info := range infos {
			t.RawSetInt(i+1, b.taskObject(L, info))
		}
		return []lua.LValue{t}, nil
	})
}

// scheduler:pause(name) -> true, or nil, "not_found". A distributed task
// pauses in every process.
func (b *schedBinding) pause(L *lua.LState) int {
	return b.control(L, "pause", b.s.Engine.Pause)
}

// scheduler:resume(name) -> true, or nil, "not_found".
func (b *schedBinding) resume(L *lua.LState) int {
	return b.control(L, "resume", b.s.Engine.Resume)
}

// scheduler:disable(name) -> true, or nil, "not_found": off the schedule
// until enable (kept registered, with its counters; status "disabled"). A
// distributed task is disabled in every process, and the state is stored
// with its record (it survives a restart on Redis).
func (b *schedBinding) disable(L *lua.LState) int {
	return b.control(L, "disable", b.s.Engine.Disable)
}

// scheduler:enable(name) -> true, or nil, "not_found": back on the schedule
// from its next fire time (the disabled period is not caught up).
func (b *schedBinding) enable(L *lua.LState) int {
	return b.control(L, "enable", b.s.Engine.Enable)
}

// scheduler:remove(name) -> true, or nil, "not_found". A distributed task
// is removed in every process (the Engine tells each registrant: Gone).
func (b *schedBinding) remove(L *lua.LState) int {
	return b.control(L, "remove", b.s.Engine.Remove)
}

// scheduler:trigger(name) -> true, or nil, "not_found" (not registered in
// this process): runs it once now, outside its schedule.
func (b *schedBinding) trigger(L *lua.LState) int {
	return b.control(L, "trigger", b.s.Engine.Trigger)
}

func (b *schedBinding) control(L *lua.LState, fn string, do func(string) *store.Op[struct{}]) int {
	a := b.args(L, fn)
	name := b.taskName(a, 2)
	return runtime.RunOutcome(b.rt, L, b.name(fn), do(name), func(L *lua.LState, _ struct{}, err error) ([]lua.LValue, error) {
		if err != nil {
			return taskNotFound(err)
		}
		return []lua.LValue{lua.LTrue}, nil
	})
}

// scheduler:preview(expression, n [, timezone]) -> { unix_ms, ... }: the
// next n fire times of a schedule (scheduler:add's formats) from now.
func (b *schedBinding) preview(L *lua.LState) int {
	a := b.args(L, "preview")
	expr := a.Str(2)
	n := a.Num(3)
	if n != math.Floor(n) || n < 1 || n > 10000 {
		a.Bad(3, fmt.Sprintf("count must be a whole number in 1..10000, got %s", lua.LNumber(n).String()))
	}
	tz := ""
	if L.Get(4) != lua.LNil {
		tz = a.Str(4)
		if msg := checkTimezone(tz); msg != "" {
			a.Bad(4, msg)
		}
	}
	times, err := scheduler.Preview(expr, int(n), tz, b.s.now())
	if err != nil {
		a.Bad(2, invalidText(err))
	}
	t := L.CreateTable(len(times), 0)
	for i, tm := range times {
		t.RawSetInt(i+1, lua.LNumber(tm.UnixMilli()))
	}
	L.Push(t)
	return 1
}

// scheduler:on(event, fn): fn(task_name, info) runs as a task at each
// lifecycle event of the tasks this runtime registered, when the run is in
// this process. Events: "before" (each attempt), "after" (a successful
// attempt), "failed" (a failed attempt; info.final when no retry follows),
// "skipped" (overlap), "missed" (info.count firings, from info.scheduled
// to info.last_scheduled).
func (b *schedBinding) on(L *lua.LState) int {
	a := b.args(L, "on")
	ev := scheduler.EventKind(a.Str(2))
	bit, ok := eventBits[ev]
	if !ok {
		a.Bad(2, fmt.Sprintf(`unknown event %q (want "before", "after", "failed", "skipped" or "missed")`, string(ev)))
	}
	fn := a.Function(3)
	b.listeners[ev] = append(b.listeners[ev], fn)
	b.listening.Or(bit)
	return 0
}

// ---- task objects

// schedTask is a task object, a live view: each method but name() reads
// the task's current state (blocking; nil, "not_found" once the task is
// gone). info is the state last read, for __tostring.
type schedTask struct {
	b    *schedBinding
	info scheduler.Info
}

func (b *schedBinding) taskObject(L *lua.LState, info scheduler.Info) *lua.LUserData {
	ud := L.NewUserData()
	ud.Value = &schedTask{b: b, info: info}
	ud.Metatable = L.GetTypeMetatable(schedTaskType)
	return ud
}

func (b *schedBinding) installTaskType() {
	L := b.rt.L
	mt := L.NewTypeMetatable(schedTaskType)
	mt.RawSetString("__name", lua.LString(schedTaskType))
	methods := L.NewTable()
	// field reads the current state and returns one part of it.
	field := func(fn string, get func(L *lua.LState, i scheduler.Info) lua.LValue) {
		methods.RawSetString(fn, b.rt.Blocking(func(L *lua.LState) int {
			t := runtime.SelfAs[*schedTask](runtime.ArgsOf(L, schedTaskType, fn), 1, schedTaskType)
			return runtime.RunOutcome(b.rt, L, schedTaskType+":"+fn, b.s.Engine.Get(t.info.Name), func(L *lua.LState, info scheduler.Info, err error) ([]lua.LValue, error) {
				if err != nil {
					return taskNotFound(err)
				}
				t.info = info
				return []lua.LValue{get(L, info)}, nil
			})
		}))
	}
	methods.RawSetString("name", L.NewFunction(func(L *lua.LState) int {
		t := runtime.SelfAs[*schedTask](runtime.ArgsOf(L, schedTaskType, "name"), 1, schedTaskType)
		L.Push(lua.LString(t.info.Name))
		return 1
	}))
	field("schedule", func(_ *lua.LState, i scheduler.Info) lua.LValue { return lua.LString(i.Schedule) })
	field("next_run", func(_ *lua.LState, i scheduler.Info) lua.LValue { return unixMs(i.NextRun) })
	field("last_run", func(_ *lua.LState, i scheduler.Info) lua.LValue { return unixMs(i.LastRun) })
	field("run_count", func(_ *lua.LState, i scheduler.Info) lua.LValue { return lua.LNumber(i.RunCount) })
	field("status", func(_ *lua.LState, i scheduler.Info) lua.LValue { return lua.LString(i.Status) })
	field("info", func(L *lua.LState, i scheduler.Info) lua.LValue { return infoTable(L, i) })
	methods.RawSetString("refresh", b.rt.Blocking(func(L *lua.LState) int {
		t := runtime.SelfAs[*schedTask](runtime.ArgsOf(L, schedTaskType, "refresh"), 1, schedTaskType)
		return runtime.RunOutcome(b.rt, L, schedTaskType+":refresh", b.s.Engine.Get(t.info.Name), func(L *lua.LState, info scheduler.Info, err error) ([]lua.LValue, error) {
			if err != nil {
				return taskNotFound(err)
			}
			t.info = info
			return []lua.LValue{L.Get(1)}, nil
		})
	}))
	runtime.SetMethods(L, mt, methods)
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		t := runtime.SelfAs[*schedTask](runtime.ArgsOf(L, schedTaskType, "__tostring"), 1, schedTaskType)
		L.Push(lua.LString(fmt.Sprintf("%s(%q, %q)", schedTaskType, t.info.Name, t.info.Schedule)))
		return 1
	}))
}

// unixMs is a time as Unix ms, nil when zero.
func unixMs(t time.Time) lua.LValue {
	if t.IsZero() {
		return lua.LNil
	}
	return lua.LNumber(t.UnixMilli())
}

// infoTable is task:info(): every field of the task's Info.
func infoTable(L *lua.LState, i scheduler.Info) *lua.LTable {
	t := L.CreateTable(0, 16)
	t.RawSetString("name", lua.LString(i.Name))
	t.RawSetString("kind", lua.LString(i.Kind))
	t.RawSetString("schedule", lua.LString(i.Schedule))
	if i.Timezone != "" {
		t.RawSetString("timezone", lua.LString(i.Timezone))
	}
	t.RawSetString("status", lua.LString(i.Status))
	t.RawSetString("next_run", unixMs(i.NextRun))
	t.RawSetString("last_run", unixMs(i.LastRun))
	t.RawSetString("run_count", lua.LNumber(i.RunCount))
	t.RawSetString("missed", lua.LNumber(i.Missed))
	t.RawSetString("skipped", lua.LNumber(i.Skipped))
	t.RawSetString("late", lua.LNumber(i.Late))
	t.RawSetString("failed", lua.LNumber(i.Failed))
	if i.LastError != "" {
		t.RawSetString("last_error", lua.LString(i.LastError))
	}
	t.RawSetString("distributed", lua.LBool(i.Distributed))
	t.RawSetString("running", lua.LNumber(i.Running))
	t.RawSetString("registered", lua.LBool(i.Registered))
	return t
}
