package bindings

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// shield.scheduler(): the Lua face of core/scheduler. The Module runs one
// Engine per process (Scheduler); every runtime registers its tasks there
// under an owner id of its own, and each firing of a task runs as a task of
// the runtime that registered it (one of them, in turn, when several did).
//
// The Engine calls back on its own loop goroutine (RunFunc, Events), which
// must never wait: each callback only posts to the runtime's loop.

const (
	schedulerType = "shield.scheduler"
	schedTaskType = "shield.scheduler_task"
)

// Scheduler backs shield.scheduler(): the Module's Engine, shared by every
// runtime, and the routing of its lifecycle events to the runtimes that
// registered each task (by the events' Owners). Create it with
// NewScheduler before the Engine, pass its Event method as
// scheduler.Config.Events, then set Engine.
type Scheduler struct {
	Engine *scheduler.Engine
	// Now is the clock of scheduler:preview (time.Now when nil).
	Now func() time.Time

	ids atomic.Int64 // runtime owner ids

	mu       sync.Mutex
	bindings map[string]*schedBinding // owner id -> the runtime's binding
}

// NewScheduler returns a Scheduler without an Engine yet.
func NewScheduler() *Scheduler {
	return &Scheduler{bindings: map[string]*schedBinding{}}
}

func (s *Scheduler) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Event is the Engine's Config.Events: it hands each lifecycle event to the
// runtimes that registered the task (ev.Owners) and listen for its kind.
// It runs on the Engine's loop and only posts.
func (s *Scheduler) Event(ev scheduler.Event) {
	for _, owner := range ev.Owners {
		s.mu.Lock()
		b := s.bindings[owner]
		s.mu.Unlock()
		if b != nil && b.listens(ev.Kind) {
			e := ev // a copy per delivery: capturing ev itself would put it on the heap for every event
			b.rt.Post(func() { b.deliver(e) })
		}
	}
}

// schedBinding is shield.scheduler() in one runtime. Loop-only except
// listening (read by Event) and closed (read by RunFuncs).
type schedBinding struct {
	rt    *runtime.Runtime
	s     *Scheduler
	owner string
	ud    *lua.LUserData

	tasks     map[string]boundTask  // registered (or being registered) by this runtime; by value: no object per task
	labeled   map[string]taskLabels // of the tasks in tasks that fired
	gens      uint64                // numbers this runtime's registrations
	listeners map[scheduler.EventKind][]*lua.LFunction
	listening atomic.Uint32 // bit per event kind with a listener

	attempts sync.Pool // of *attempt

	mu     sync.Mutex
	closed bool // the runtime is closing: firings are refused
}

// boundTask is what this runtime knows of one task name it registered.
// Each Register call is a generation; the Engine calls the Task.Gone of
// the generation whose RunFunc it holds when the task leaves it for good.
// The runtime is held (Ref) while live is set.
type boundTask struct {
	live    uint64              // the generation the Engine holds, 0 when none
	pending int                 // registrations in flight
	early   map[uint64]struct{} // generations told gone before their Register returned
}

// taskLabels are what a firing of a task needs of its name, made at its
// first firing and kept while this runtime holds the task, so a firing
// does not allocate them (and tasks that never fire cost nothing).
type taskLabels struct {
	label string     // the name of its runs' Lua tasks: "scheduled <name>"
	name  lua.LValue // its name as a Lua string (info.task)
}

// beginRegister numbers a registration of name and returns its
// generation. Loop only.
func (b *schedBinding) beginRegister(name string) uint64 {
	t := b.tasks[name]
	t.pending++
	b.tasks[name] = t
	b.gens++
	return b.gens
}

// endRegister records the outcome of registration gen of name: when ok and
// the Engine took its RunFunc (info.Registered; a one-shot task that
// already ran elsewhere takes none), it is the live one, unless the
// Engine already told it gone. Loop only.
func (b *schedBinding) endRegister(name string, gen uint64, info scheduler.Info, ok bool) {
	t, found := b.tasks[name]
	if !found {
		return // the runtime closed meanwhile
	}
	t.pending--
	if ok && info.Registered && gen > t.live {
		b.setLive(&t, gen)
	}
	if _, gone := t.early[gen]; gone {
		delete(t.early, gen)
		if t.live == gen {
			b.setLive(&t, 0)
		}
	}
	b.keep(name, t)
}

// gone handles the Engine's Task.Gone of registration gen of name. Loop
// only.
func (b *schedBinding) gone(name string, gen uint64) {
	t, found := b.tasks[name]
	switch {
	case !found || gen < t.live:
		return // a registration another one replaced, or the runtime closed
	case gen == t.live:
		b.setLive(&t, 0)
	default: // its Register has not returned yet
		if t.early == nil {
			t.early = map[uint64]struct{}{}
		}
		t.early[gen] = struct{}{}
	}
	b.keep(name, t)
}

// setLive sets t's live generation, holding the runtime while there is one.
func (b *schedBinding) setLive(t *boundTask, gen uint64) {
	switch {
	case t.live == 0 && gen != 0:
		b.rt.Ref()
	case t.live != 0 && gen == 0:
		b.rt.Unref()
	}
	t.live = gen
}

// keep stores name's entry, or drops it once nothing is live nor in
// flight.
func (b *schedBinding) keep(name string, t boundTask) {
	if t.live == 0 && t.pending == 0 {
		delete(b.tasks, name)
		delete(b.labeled, name)
		return
	}
	b.tasks[name] = t
}

// labels returns the Lua task name and the Lua name value of a run of
// task name. Loop only.
func (b *schedBinding) labels(name string) (string, lua.LValue) {
	if l, ok := b.labeled[name]; ok {
		return l.label, l.name
	}
	l := taskLabels{label: "scheduled " + name, name: lua.LString(name)}
	// Kept only for a task this runtime holds (keep drops it with the
	// task): a run of a removed task makes its own.
	if _, held := b.tasks[name]; held {
		b.labeled[name] = l
	}
	return l.label, l.name
}

// eventBits numbers the event kinds for schedBinding.listening.
var eventBits = map[scheduler.EventKind]uint32{
	scheduler.EventBefore: 1, scheduler.EventAfter: 2, scheduler.EventFailed: 4,
	scheduler.EventSkipped: 8, scheduler.EventMissed: 16,
}

func (b *schedBinding) listens(k scheduler.EventKind) bool {
	return b.listening.Load()&eventBits[k] != 0
}

// installScheduler registers shield.scheduler() in this runtime.
func installScheduler(rt *runtime.Runtime, lib *lua.LTable, s *Scheduler) {
	L := rt.L
	b := &schedBinding{rt: rt, s: s, owner: "rt-" + strconv.FormatInt(s.ids.Add(1), 10),
		tasks: map[string]boundTask{}, labeled: map[string]taskLabels{}, listeners: map[scheduler.EventKind][]*lua.LFunction{}}
	b.attempts.New = b.newAttempt
	rt.OnClose(b.close)
	s.mu.Lock()
	s.bindings[b.owner] = b
	s.mu.Unlock()

	mt := L.NewTypeMetatable(schedulerType)
	mt.RawSetString("__name", lua.LString(schedulerType))
	methods := L.NewTable()
	for _, m := range []struct {
		name string
		fn   lua.LGFunction
	}{
		{"cron", b.cron}, {"interval", b.interval}, {"once", b.once}, {"add", b.add},
		{"get", b.get}, {"pause", b.pause}, {"resume", b.resume},
		{"disable", b.disable}, {"enable", b.enable}, {"remove", b.remove}, {"trigger", b.trigger},
		{"list", b.list},
	} {
		methods.RawSetString(m.name, rt.Blocking(m.fn))
	}
	methods.RawSetString("preview", L.NewFunction(b.preview))
	methods.RawSetString("on", L.NewFunction(b.on))
	methods.RawSetString("load", b.loader())
	runtime.SetMethods(L, mt, methods)
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LString(schedulerType)); return 1 }))
	b.ud = L.NewUserData()
	b.ud.Value = b
	b.ud.Metatable = mt
	lib.RawSetString("scheduler", L.NewFunction(func(L *lua.LState) int { L.Push(b.ud); return 1 }))
	b.installTaskType()
}

func (b *schedBinding) args(L *lua.LState, fn string) runtime.Args {
	a := runtime.ArgsOf(L, schedulerType, fn)
	runtime.SelfAs[*schedBinding](a, 1, schedulerType)
	return a
}

func (b *schedBinding) name(fn string) string { return schedulerType + ":" + fn }

// goneFunc is the Task.Gone of registration gen of name: the Engine calls
// it on its loop when the task leaves it for good (removed in any process,
// a one-shot task that ran or was missed anywhere), so this runtime stops
// holding it.
func (b *schedBinding) goneFunc(name string, gen uint64) func() {
	return func() { b.rt.Post(func() { b.gone(name, gen) }) }
}

// close runs when the runtime closes: firings are refused from now on and
// the Engine drops this runtime's callbacks (a task nobody else registered
// stops in this process; a distributed one keeps running elsewhere).
func (b *schedBinding) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	for name, t := range b.tasks {
		delete(b.tasks, name)
		if t.live != 0 {
			b.rt.Unref()
		}
	}
	clear(b.labeled)
	b.s.mu.Lock()
	delete(b.s.bindings, b.owner)
	b.s.mu.Unlock()
	b.s.Engine.Detach(b.owner)
}

func (b *schedBinding) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// errRuntimeClosing fails a firing handed to a runtime that is closing.
var errRuntimeClosing = errors.New("shield.scheduler: the runtime that registered the task is closing")

// runFunc is the Engine's RunFunc of one task registered here: each attempt
// of a firing runs fn(info) as a task of this runtime; an error is logged
// with its traceback, passed to onError (itself a task) and reported to the
// Engine, which counts it and retries per the task's options.
func (b *schedBinding) runFunc(fn, onError *lua.LFunction) scheduler.RunFunc {
	return func(f scheduler.Firing, done func(error)) {
		a := b.attempts.Get().(*attempt)
		a.fn, a.onError, a.f, a.done = fn, onError, f, done
		b.mu.Lock()
		queued := !b.closed && b.rt.TryPost(a.startFn)
		b.mu.Unlock()
		if !queued {
			a.release()
			done(errRuntimeClosing)
		}
	}
}

// attempt is one attempt of a firing handed to this runtime, from the
// Engine's RunFunc call to the end of its Lua task. Attempts are pooled,
// with the two callbacks they need made once per attempt object: fresh
// closures for every firing were garbage at thousands of firings a second.
type attempt struct {
	b           *schedBinding
	fn, onError *lua.LFunction
	f           scheduler.Firing
	done        func(error)
	info        *lua.LTable
	args        [1]lua.LValue

	startFn func()      // a.start, posted to the runtime
	endFn   func(error) // a.end, the Lua task's done
}

// newAttempt is the New of b.attempts.
func (b *schedBinding) newAttempt() any {
	a := &attempt{b: b}
	a.startFn, a.endFn = a.start, a.end
	return a
}

// release clears a and puts it back in its binding's pool.
func (a *attempt) release() {
	b := a.b
	*a = attempt{b: b, startFn: a.startFn, endFn: a.endFn}
	b.attempts.Put(a)
}

// start runs the attempt's Lua task. Loop only.
func (a *attempt) start() {
	label, name := a.b.labels(a.f.Task)
	a.info = firingTable(a.b.rt.L, a.f, name)
	a.args[0] = a.info
	// The task may end, and a be released, before Spawn returns.
	a.b.rt.Spawn(label, a.fn, a.args[:], a.endFn)
}

// end is the attempt's Lua task's done. Loop only.
func (a *attempt) end(err error) {
	b, onError, f, info, done := a.b, a.onError, a.f, a.info, a.done
	a.release()
	if err == nil {
		done(nil)
		return
	}
	rt := b.rt
	msg := err.Error()
	var te *runtime.TaskError
	if errors.As(err, &te) {
		msg = te.Message
	}
	if b.isClosed() || errors.Is(err, runtime.ErrInterrupted) || errors.Is(err, runtime.ErrClosed) {
		// Interrupted by the runtime's shutdown: Close names such
		// tasks; the Engine learns the run did not end well.
		done(errors.New(msg))
		return
	}
	rt.CountFailure() // shield_task_errors_total counts scheduled runs (docs/ops.md)
	rt.Log().Error("shield: scheduled task failed", "task", f.Task, "attempt", f.Attempt,
		"scheduled", f.Scheduled.UTC().Format(time.RFC3339Nano), "error", err.Error())
	if onError != nil {
		rt.Spawn("on_error "+f.Task, onError, []lua.LValue{lua.LString(msg), info}, func(err error) {
			if err != nil {
				rt.CallbackFailed("scheduler on_error", f.Task, err)
			}
		})
	}
	done(errors.New(msg))
}

// attemptNumbers are info.attempt's first values, boxed once (a Lua number
// in an LValue is an allocation).
var attemptNumbers = func() (v [8]lua.LValue) {
	for i := range v {
		v[i] = lua.LNumber(i)
	}
	return v
}()

// firingTable is the table a run receives: what firing it is. name is
// f.Task as a Lua value.
func firingTable(L *lua.LState, f scheduler.Firing, name lua.LValue) *lua.LTable {
	t := L.CreateTable(0, 8)
	t.RawSetString("task", name)
	t.RawSetString("scheduled", lua.LNumber(f.Scheduled.UnixMilli()))
	if f.Attempt >= 0 && f.Attempt < len(attemptNumbers) {
		t.RawSetString("attempt", attemptNumbers[f.Attempt])
	} else {
		t.RawSetString("attempt", lua.LNumber(f.Attempt))
	}
	t.RawSetString("manual", lua.LBool(f.Manual))
	t.RawSetString("recovered", lua.LBool(f.Recovered))
	t.RawSetString("late", lua.LBool(f.Late))
	t.RawSetString("local", lua.LBool(f.Local))
	return t
}

// deliver runs this runtime's listeners of ev's kind, each as a task:
// fn(task_name, info). Loop only.
func (b *schedBinding) deliver(ev scheduler.Event) {
	fns := b.listeners[ev.Kind]
	if len(fns) == 0 {
		return
	}
	L := b.rt.L
	_, nameV := b.labels(ev.Firing.Task) // the firing's cached name
	info := firingTable(L, ev.Firing, nameV)
	info.RawSetString("event", lua.LString(ev.Kind))
	if !ev.Started.IsZero() {
		info.RawSetString("started", lua.LNumber(ev.Started.UnixMilli()))
		info.RawSetString("duration", lua.LNumber(float64(ev.Duration)/float64(time.Millisecond)))
	}
	if ev.Err != nil {
		info.RawSetString("error", lua.LString(ev.Err.Error()))
	}
	if ev.Kind == scheduler.EventFailed {
		info.RawSetString("final", lua.LBool(ev.Final))
	}
	if ev.Kind == scheduler.EventMissed {
		info.RawSetString("count", lua.LNumber(ev.Count))
		info.RawSetString("last_scheduled", lua.LNumber(ev.Last.UnixMilli()))
	}
	name := ev.Firing.Task
	for _, fn := range fns {
		b.rt.Spawn("scheduler "+string(ev.Kind)+" listener", fn, []lua.LValue{nameV, info}, func(err error) {
			if err != nil {
				b.rt.CallbackFailed("scheduler listener", name, err)
			}
		})
	}
}
