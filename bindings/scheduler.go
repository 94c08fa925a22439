package bindings

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/scheduler"
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
// registered each task. Create it with NewScheduler before the Engine, pass
// its Event method as scheduler.Config.Events, then set Engine.
type Scheduler struct {
	Engine *scheduler.Engine
	// Now is the clock of scheduler:preview (time.Now when nil).
	Now func() time.Time

	ids atomic.Int64 // runtime owner ids

	mu    sync.Mutex
	names map[string]*schedName // task name -> the runtimes that registered it
}

// schedName is what the process knows of one task name: its kind and the
// bindings (runtimes) that registered it.
type schedName struct {
	kind     scheduler.Kind
	bindings []*schedBinding // usually one
}

// NewScheduler returns a Scheduler without an Engine yet.
func NewScheduler() *Scheduler {
	return &Scheduler{names: map[string]*schedName{}}
}

func (s *Scheduler) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Event is the Engine's Config.Events: it hands each lifecycle event to the
// runtimes that registered the task and listen for its kind, and tells them
// when a one-shot task has run (the Engine drops it then). It runs on the
// Engine's loop and only posts.
func (s *Scheduler) Event(ev scheduler.Event) {
	name := ev.Firing.Task
	s.mu.Lock()
	n := s.names[name]
	if n == nil {
		s.mu.Unlock()
		return
	}
	ended := n.kind == scheduler.KindOnce && endsOnce(ev)
	var targets []*schedBinding
	for _, b := range n.bindings {
		if ended || b.listens(ev.Kind) {
			targets = append(targets, b)
		}
	}
	if ended {
		delete(s.names, name)
	}
	s.mu.Unlock()
	for _, b := range targets {
		b.rt.Post(func() {
			b.deliver(ev)
			if ended {
				b.forget(name)
			}
		})
	}
}

// endsOnce reports an event after which a one-shot task is gone.
func endsOnce(ev scheduler.Event) bool {
	switch ev.Kind {
	case scheduler.EventAfter:
		return !ev.Firing.Manual
	case scheduler.EventFailed:
		return ev.Final && !ev.Firing.Manual
	case scheduler.EventMissed:
		return true
	}
	return false
}

// Forget tells every runtime that registered name that the task is gone
// (removed by Go code of the Module, or by one of the runtimes).
func (s *Scheduler) Forget(name string) {
	s.mu.Lock()
	n := s.names[name]
	delete(s.names, name)
	s.mu.Unlock()
	if n == nil {
		return
	}
	for _, b := range n.bindings {
		b.rt.Post(func() { b.forget(name) })
	}
}

// track records that b registered name (of kind).
func (s *Scheduler) track(b *schedBinding, name string, kind scheduler.Kind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.names[name]
	if n == nil || n.kind != kind {
		s.names[name] = &schedName{kind: kind, bindings: []*schedBinding{b}}
		return
	}
	if !slices.Contains(n.bindings, b) {
		n.bindings = append(n.bindings, b)
	}
}

// untrack drops b's registration of name (every name when name is "").
func (s *Scheduler) untrack(b *schedBinding, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	drop := func(key string, n *schedName) {
		n.bindings = slices.DeleteFunc(n.bindings, func(x *schedBinding) bool { return x == b })
		if len(n.bindings) == 0 {
			delete(s.names, key)
		}
	}
	if name != "" {
		if n := s.names[name]; n != nil {
			drop(name, n)
		}
		return
	}
	for key, n := range s.names {
		drop(key, n)
	}
}

// schedBinding is shield.scheduler() in one runtime. Loop-only except
// listening (read by Event) and closed (read by RunFuncs).
type schedBinding struct {
	rt    *Runtime
	s     *Scheduler
	owner string
	ud    *lua.LUserData

	tasks     map[string]*boundTask // registered by this runtime and still alive; each holds a Ref
	listeners map[scheduler.EventKind][]*lua.LFunction
	listening atomic.Uint32 // bit per event kind with a listener

	mu     sync.Mutex
	closed bool // the runtime is closing: firings are refused
}

// boundTask is a task this runtime registered.
type boundTask struct {
	name  string
	kind  scheduler.Kind
	dist  bool
	check *time.Timer // a distributed one-shot task: looks whether it ran elsewhere
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
func (rt *Runtime) installScheduler(lib *lua.LTable, s *Scheduler) {
	L := rt.L
	b := &schedBinding{rt: rt, s: s, owner: "rt-" + strconv.FormatInt(s.ids.Add(1), 10),
		tasks: map[string]*boundTask{}, listeners: map[scheduler.EventKind][]*lua.LFunction{}}
	rt.OnClose(b.close)

	mt := L.NewTypeMetatable(schedulerType)
	mt.RawSetString("__name", lua.LString(schedulerType))
	methods := L.NewTable()
	for _, m := range []struct {
		name string
		fn   lua.LGFunction
	}{
		{"cron", b.cron}, {"interval", b.interval}, {"once", b.once}, {"add", b.add},
		{"get", b.get}, {"pause", b.pause}, {"resume", b.resume}, {"remove", b.remove}, {"trigger", b.trigger},
		{"list", b.list},
	} {
		methods.RawSetString(m.name, rt.blocking(m.fn))
	}
	methods.RawSetString("preview", L.NewFunction(b.preview))
	methods.RawSetString("on", L.NewFunction(b.on))
	methods.RawSetString("load", b.loader())
	mt.RawSetString("__index", methods)
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LString(schedulerType)); return 1 }))
	b.ud = L.NewUserData()
	b.ud.Value = b
	b.ud.Metatable = mt
	lib.RawSetString("scheduler", L.NewFunction(func(L *lua.LState) int { L.Push(b.ud); return 1 }))
	b.installTaskType()
}

func (b *schedBinding) args(L *lua.LState, fn string) args {
	a := argsOf(L, schedulerType, fn)
	a.self(1, schedulerType)
	return a
}

func (b *schedBinding) name(fn string) string { return schedulerType + ":" + fn }

// adopt records a task this runtime registered: it keeps the runtime alive
// (shield run stays up) until the task is removed, has run (one-shot), or
// the runtime closes.
func (b *schedBinding) adopt(info scheduler.Info) {
	if info.Kind == scheduler.KindOnce && info.NextRun.IsZero() && info.Running == 0 && info.Status != scheduler.StatusPaused {
		return // a one-shot task with nothing left to run (already ran, or missed)
	}
	b.s.track(b, info.Name, info.Kind)
	if old := b.tasks[info.Name]; old != nil {
		old.kind, old.dist = info.Kind, info.Distributed
		return
	}
	t := &boundTask{name: info.Name, kind: info.Kind, dist: info.Distributed}
	b.tasks[info.Name] = t
	b.rt.Ref()
	if t.kind == scheduler.KindOnce && t.dist && !info.NextRun.IsZero() {
		// Another process may run it: this one then only hears the
		// Store's removal, which the Engine does not report. Look.
		b.watchOnce(t, time.Until(info.NextRun)+time.Second)
	}
}

// watchOnce checks after d whether the distributed one-shot task t is
// still registered here, and forgets it once it is not.
func (b *schedBinding) watchOnce(t *boundTask, d time.Duration) {
	t.check = time.AfterFunc(max(d, 100*time.Millisecond), func() {
		b.rt.Post(func() {
			if b.tasks[t.name] != t {
				return
			}
			Go(b.rt, b.s.Engine.Get(t.name), func(info scheduler.Info, err error) {
				if b.tasks[t.name] != t {
					return
				}
				if errors.Is(err, scheduler.ErrNotFound) || (err == nil && !info.Registered) {
					b.forget(t.name)
					return
				}
				b.watchOnce(t, time.Second)
			})
		})
	})
}

// forget drops a task this runtime registered (removed, or a one-shot task
// that ran) and its hold on the runtime. Loop only.
func (b *schedBinding) forget(name string) {
	t := b.tasks[name]
	if t == nil {
		return
	}
	delete(b.tasks, name)
	if t.check != nil {
		t.check.Stop()
	}
	b.s.untrack(b, name)
	b.rt.Unref()
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
		if t.check != nil {
			t.check.Stop()
		}
		b.rt.Unref()
	}
	b.s.untrack(b, "")
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
		b.mu.Lock()
		queued := !b.closed && b.rt.TryPost(func() { b.start(fn, onError, f, done) })
		b.mu.Unlock()
		if !queued {
			done(errRuntimeClosing)
		}
	}
}

func (b *schedBinding) start(fn, onError *lua.LFunction, f scheduler.Firing, done func(error)) {
	rt := b.rt
	info := firingTable(rt.L, f)
	rt.Spawn("scheduled "+f.Task, fn, []lua.LValue{info}, func(err error) {
		if err == nil {
			done(nil)
			return
		}
		msg := err.Error()
		var te *TaskError
		if errors.As(err, &te) {
			msg = te.Message
		}
		if b.isClosed() || errors.Is(err, ErrInterrupted) || errors.Is(err, ErrClosed) {
			// Interrupted by the runtime's shutdown: Close names such
			// tasks; the Engine learns the run did not end well.
			done(errors.New(msg))
			return
		}
		rt.callbackErrs++
		rt.log.Error("shield: scheduled task failed", "task", f.Task, "attempt", f.Attempt,
			"scheduled", f.Scheduled.UTC().Format(time.RFC3339Nano), "error", err.Error())
		if onError != nil {
			rt.Spawn("on_error "+f.Task, onError, []lua.LValue{lua.LString(msg), info}, func(err error) {
				if err != nil {
					rt.callbackFailed("scheduler on_error", f.Task, err)
				}
			})
		}
		done(errors.New(msg))
	})
}

// firingTable is the table a run receives: what firing it is.
func firingTable(L *lua.LState, f scheduler.Firing) *lua.LTable {
	t := L.CreateTable(0, 8)
	t.RawSetString("task", lua.LString(f.Task))
	t.RawSetString("scheduled", lua.LNumber(f.Scheduled.UnixMilli()))
	t.RawSetString("attempt", lua.LNumber(f.Attempt))
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
	info := firingTable(L, ev.Firing)
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
	}
	name := ev.Firing.Task
	for _, fn := range fns {
		b.rt.Spawn("scheduler "+string(ev.Kind)+" listener", fn, []lua.LValue{lua.LString(name), info}, func(err error) {
			if err != nil {
				b.rt.callbackFailed("scheduler listener", name, err)
			}
		})
	}
}
