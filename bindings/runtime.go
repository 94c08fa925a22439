// Package bindings is the gopher-lua glue of shield_global: the per-state
// runtime loop, the blocking-call protocol, and one file per capability that
// checks arguments and converts values. Business logic lives in core/.
package bindings

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	shieldlua "github.com/shieldrt/shieldglobal/lua/shield"
)

// ErrClosed is returned by Do, RunFile and RunString once the runtime is closing.
var ErrClosed = errors.New("shield: runtime closed")

// Runtime owns one *lua.LState. Exactly one goroutine, the loop, ever touches
// the state: everything else (Redis replies, timers, pub/sub messages) posts
// work to it. Scripts run as tasks: coroutines the loop starts and resumes.
type Runtime struct {
	L   *lua.LState
	svc *Services
	log *slog.Logger

	mu      sync.Mutex
	queue   []func()
	spare   []func()
	wake    chan struct{}
	closing bool

	ctx    context.Context // cancelled when the runtime stops; in-flight work sees it
	cancel context.CancelFunc
	stop   chan struct{} // closed to end the loop
	jobs   chan func()   // hands Await work to an idle worker
	done   chan struct{} // closed when the loop has ended

	// Loop-only state.
	tasks          map[*lua.LState]*Task
	nextTaskID     int64
	keepalive      int
	idle           []chan struct{}
	closers        []func()
	failures       int
	callbackErrors int

	mark, fail *lua.LUserData
	trampoline *lua.LFunction
	wrap       *lua.LFunction
	with       lua.LValue  // the prelude's l:with helper
	lib        *lua.LTable // the shield module table

	locks *lockBinding // nil when the lock capability is off
}

// taskIDs numbers tasks process-wide, so owner ids
// ("node:service:coroutine-N") are unique across every Lua state.
var taskIDs atomic.Int64

// Task is a coroutine run by the loop: a script's main chunk, a callback or a
// shield.spawn'ed function.
type Task struct {
	ID    int64
	Name  string
	co    *lua.LState
	tb    string // traceback captured when the task raised
	owner string // OwnerID, built once
	done  func(err error)
}

// TaskError is an uncaught error of a task, with its Lua traceback.
type TaskError struct {
	Task      string
	Message   string
	Traceback string
}

func (e *TaskError) Error() string {
	if e.Traceback == "" {
		return e.Message
	}
	return e.Message + "\n" + e.Traceback
}

// NewRuntime installs the shield library into L (require("shield") and the
// global `shield`), replaces pcall/xpcall/coroutine.resume/coroutine.wrap with
// yield-safe versions, and starts the loop goroutine. L must not be used by
// any other goroutine afterwards: go through Do.
func NewRuntime(L *lua.LState, svc *Services) (*Runtime, error) {
	if svc == nil {
		svc = &Services{}
	}
	log := svc.Log
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt := &Runtime{
		L: L, svc: svc, log: log,
		wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), done: make(chan struct{}), jobs: make(chan func()),
		tasks: map[*lua.LState]*Task{},
	}
	if err := rt.install(); err != nil {
		cancel()
		return nil, err
	}
	go rt.loop()
	return rt, nil
}

func (rt *Runtime) install() error {
	L := rt.L
	rt.mark = L.NewUserData()
	rt.fail = L.NewUserData()
	priv := L.NewTable()
	priv.RawSetString("mark", rt.mark)
	priv.RawSetString("fail", rt.fail)
	priv.RawSetString("arm", L.NewFunction(rt.arm))
	fn, err := L.Load(stringsReader(shieldlua.Prelude), shieldlua.ChunkPrefix+"prelude.lua")
	if err != nil {
		return fmt.Errorf("shield: prelude: %w", err)
	}
	L.Push(fn)
	L.Push(priv)
	if err := L.PCall(1, 1, nil); err != nil {
		return fmt.Errorf("shield: prelude: %w", err)
	}
	helpers := L.CheckTable(-1)
	L.Pop(1)
	rt.wrap = helpers.RawGetString("wrap").(*lua.LFunction)
	rt.trampoline = helpers.RawGetString("task").(*lua.LFunction)
	rt.with = helpers.RawGetString("with")

	rt.lib = L.NewTable()
	rt.installBasics(rt.lib)
	if g := rt.svc.Global; g != nil {
		rt.installGlobal(rt.lib, g)
	}
	if l := rt.svc.Locks; l != nil {
		rt.installLocks(rt.lib, l)
	}
	L.SetGlobal("shield", rt.lib)
	preload := L.GetField(L.GetField(L.Get(lua.EnvironIndex), "package"), "preload")
	if t, ok := preload.(*lua.LTable); ok {
		lib := rt.lib
		t.RawSetString("shield", L.NewFunction(func(L *lua.LState) int { L.Push(lib); return 1 }))
		t.RawSetString("shield.spec", L.NewFunction(func(L *lua.LState) int {
			fn, err := L.Load(stringsReader(shieldlua.Spec), shieldlua.ChunkPrefix+"spec.lua")
			if err != nil {
				L.RaiseError("%s", err.Error())
			}
			L.Push(fn)
			L.Call(0, 1)
			return 1
		}))
	}
	return nil
}

// Post queues fn to run on the loop. It is safe from any goroutine; after
// Close it is dropped.
func (rt *Runtime) Post(fn func()) {
	rt.mu.Lock()
	if rt.closing && rt.stopped() {
		rt.mu.Unlock()
		return
	}
	rt.queue = append(rt.queue, fn)
	rt.mu.Unlock()
	select {
	case rt.wake <- struct{}{}:
	default:
	}
}

func (rt *Runtime) stopped() bool {
	select {
	case <-rt.stop:
		return true
	default:
		return false
	}
}

func (rt *Runtime) loop() {
	defer close(rt.done)
	for {
		rt.mu.Lock()
		q := rt.queue
		if len(q) > 0 {
			rt.queue, rt.spare = rt.spare[:0], nil
		}
		rt.mu.Unlock()
		if len(q) == 0 {
			select {
			case <-rt.wake:
				continue
			case <-rt.stop:
				return
			}
		}
		for i, fn := range q {
			rt.runPosted(fn)
			q[i] = nil
		}
		rt.spare = q[:0]
		rt.checkIdle()
	}
}

func (rt *Runtime) runPosted(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			rt.log.Error("shield: panic on the runtime loop", "panic", fmt.Sprint(r))
		}
	}()
	fn()
}

// Do runs fn on the loop and waits for it. Must not be called from the loop
// itself (from a Lua-called Go function), which would deadlock.
func (rt *Runtime) Do(fn func(L *lua.LState) error) error {
	res := make(chan error, 1)
	rt.mu.Lock()
	closing := rt.closing
	rt.mu.Unlock()
	if closing {
		return ErrClosed
	}
	rt.Post(func() { res <- fn(rt.L) })
	select {
	case err := <-res:
		return err
	case <-rt.done:
		return ErrClosed
	}
}

// RunFile runs a Lua file as a task, with args as its `...`, and waits until
// that task ends (not until the runtime is idle: see Wait). The error is a
// *TaskError for a Lua error.
func (rt *Runtime) RunFile(path string, args ...lua.LValue) error {
	return rt.run(func(L *lua.LState) (*lua.LFunction, error) { return L.LoadFile(path) }, path, args)
}

// RunString runs Lua source as a task named name, with args as its `...`,
// and waits until it ends.
func (rt *Runtime) RunString(src, name string, args ...lua.LValue) error {
	return rt.run(func(L *lua.LState) (*lua.LFunction, error) { return L.Load(stringsReader(src), name) }, name, args)
}

func (rt *Runtime) run(load func(*lua.LState) (*lua.LFunction, error), name string, args []lua.LValue) error {
	res := make(chan error, 1)
	err := rt.Do(func(L *lua.LState) error {
		fn, err := load(L)
		if err != nil {
			return err
		}
		rt.Spawn(name, fn, args, func(err error) { res <- err })
		return nil
	})
	if err != nil {
		return err
	}
	select {
	case err := <-res:
		return err
	case <-rt.done:
		return ErrClosed
	}
}

// Spawn starts fn(args...) as a new task. Loop only. done, if not nil, is
// called on the loop when the task ends; without it an uncaught error is
// logged with its traceback and counted (see Failures).
func (rt *Runtime) Spawn(name string, fn *lua.LFunction, args []lua.LValue, done func(err error)) *Task {
	co, _ := rt.L.NewThread()
	t := &Task{ID: taskIDs.Add(1), Name: name, co: co, done: done}
	rt.tasks[co] = t
	rt.resume(t, append([]lua.LValue{fn}, args...)...)
	return t
}

// resume runs task t until it yields or ends. Loop only. Every Resume is
// guarded: a Go panic escaping gopher-lua ends the task, never the process.
func (rt *Runtime) resume(t *Task, args ...lua.LValue) {
	st, err, vals := rt.guardedResume(t, args)
	switch st {
	case lua.ResumeOK:
		rt.finishTask(t, nil)
	case lua.ResumeError:
		rt.finishTask(t, err)
	case lua.ResumeYield:
		if len(vals) >= 2 && vals[0] == rt.mark {
			if ud, ok := vals[1].(*lua.LUserData); ok {
				if o, ok := ud.Value.(*op); ok {
					o.task = t
					return
				}
			}
		}
		// A plain coroutine.yield() at a task's top level yields to the
		// other tasks: resume it on the next loop turn.
		rt.Post(func() { rt.resume(t) })
	}
}

func (rt *Runtime) guardedResume(t *Task, args []lua.LValue) (st lua.ResumeState, err error, vals []lua.LValue) {
	top := rt.L.GetTop()
	defer func() {
		if r := recover(); r != nil {
			rt.L.G.CurrentThread = rt.L
			rt.L.SetTop(top)
			st, err, vals = lua.ResumeError, fmt.Errorf("%v", r), nil
		}
	}()
	return rt.L.Resume(t.co, rt.trampoline, args...)
}

func (rt *Runtime) finishTask(t *Task, err error) {
	delete(rt.tasks, t.co)
	var terr error
	if err != nil {
		msg := err.Error()
		var api *lua.ApiError
		if errors.As(err, &api) {
			msg = api.Object.String()
		}
		terr = &TaskError{Task: t.Name, Message: msg, Traceback: t.tb}
	}
	if t.done != nil {
		t.done(terr)
		return
	}
	if terr != nil {
		rt.failures++
		rt.log.Error("shield: task failed", "task", t.Name, "error", terr.Error())
	}
}

// arm is called first by every task body: it installs the traceback hook on
// the task's thread (Resume resets Panic when a thread starts).
func (rt *Runtime) arm(L *lua.LState) int {
	L.Panic = rt.panicWithTraceback
	return 0
}

// panicWithTraceback runs while the failing task's stack is still intact.
func (rt *Runtime) panicWithTraceback(L *lua.LState) {
	if t := rt.tasks[L]; t != nil {
		t.tb = traceback(L)
	}
	panic(&lua.ApiError{Type: lua.ApiErrorRun, Object: L.Get(-1)})
}

// CurrentTask returns the task the running thread L belongs to (L itself or a
// coroutine it resumed), or nil outside tasks. Loop only.
func (rt *Runtime) CurrentTask(L *lua.LState) *Task {
	for th := L; th != nil; th = th.Parent {
		if t := rt.tasks[th]; t != nil {
			return t
		}
	}
	return nil
}

// CallbackErrors is the number of callbacks (subscribers, on_lost) that
// raised; each was logged with its traceback and the callback's owner went on.
func (rt *Runtime) CallbackErrors() (n int) {
	_ = rt.Do(func(*lua.LState) error { n = rt.callbackErrors; return nil })
	return n
}

// Ref keeps the runtime busy (Wait does not return) until the matching Unref:
// subscriptions and scheduled work hold a reference. Loop only.
func (rt *Runtime) Ref() { rt.keepalive++ }

// Unref releases a reference taken by Ref. Loop only.
func (rt *Runtime) Unref() { rt.keepalive-- }

// OnClose registers fn to run on the loop when the runtime closes (before
// in-flight work is cancelled). Loop only.
func (rt *Runtime) OnClose(fn func()) { rt.closers = append(rt.closers, fn) }

func (rt *Runtime) checkIdle() {
	if len(rt.idle) == 0 || len(rt.tasks) > 0 || rt.keepalive > 0 {
		return
	}
	for _, c := range rt.idle {
		close(c)
	}
	rt.idle = nil
}

// Wait blocks until the runtime is idle — no task alive and nothing holding
// it (subscriptions, scheduled work) — or ctx ends. It returns the number of
// tasks whose uncaught errors were logged.
func (rt *Runtime) Wait(ctx context.Context) (failures int, err error) {
	ch := make(chan struct{})
	if err := rt.Do(func(*lua.LState) error { rt.idle = append(rt.idle, ch); rt.checkIdle(); return nil }); err != nil {
		return 0, err
	}
	select {
	case <-ch:
	case <-ctx.Done():
		err = ctx.Err()
	case <-rt.done:
		return 0, ErrClosed
	}
	_ = rt.Do(func(*lua.LState) error { failures = rt.failures; return nil })
	return failures, err
}

// Close stops the runtime: closers run (subscriptions end), running tasks get
// up to grace to finish, then in-flight work is cancelled and the loop ends.
// The LState itself is left to its owner. Close is idempotent.
func (rt *Runtime) Close(grace time.Duration) {
	rt.mu.Lock()
	if rt.closing {
		rt.mu.Unlock()
		<-rt.done
		return
	}
	rt.closing = true
	rt.mu.Unlock()

	idle := make(chan struct{})
	rt.Post(func() {
		closers := rt.closers
		rt.closers = nil
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		rt.keepalive = 0
		rt.idle = append(rt.idle, idle)
		rt.checkIdle()
	})
	select {
	case <-idle:
	case <-time.After(grace):
		rt.log.Warn("shield: tasks still running after the shutdown grace period", "grace", grace)
	}
	rt.cancel()
	close(rt.stop)
	<-rt.done
}
