// Package bindings is the gopher-lua glue of shield_global: the per-state
// runtime loop, the blocking-call protocol, and one file per capability that
// checks arguments and converts values. Business logic lives in core/.
package bindings

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	shieldlua "github.com/shieldrt/shieldglobal/lua/shield"
)

// ErrClosed is returned by Do, RunFile and RunString once the runtime is closing.
var ErrClosed = errors.New("shield: runtime closed")

// Runtime owns one *lua.LState. Only the loop touches the state — a role one
// goroutine at a time holds (see loop.go) — and everything else (Redis
// replies, timers, pub/sub messages) posts work to it. Scripts run as tasks:
// coroutines the loop starts and resumes.
type Runtime struct {
	L   *lua.LState
	svc *Services
	log *slog.Logger

	mu       sync.Mutex
	queue    []func()
	spare    []func()
	owned    bool // a goroutine holds the loop role (see loop.go)
	closing  bool
	stopped  bool // Close ended the runtime: Post drops work, nobody takes the loop again
	stopOnce sync.Once
	stopFns  []func() // OnStop

	ctx    context.Context // cancelled when the runtime stops; in-flight work sees it
	cancel context.CancelFunc
	jobs   chan func()   // hands work to an idle worker
	done   chan struct{} // closed when the loop has stopped for good

	vm          *vmContext
	mon         monitor
	live        atomic.Int64 // tasks alive (Tasks)
	interrupted []string     // tasks Close interrupted; guarded by mu

	// Loop-only state.
	local        []func()              // posted by the loop itself, for the next turn
	batch        []batchItem           // Redis operations of this turn
	inflight     int                   // batches being sent
	starting     int                   // tasks shield.spawn queued for the next turn
	threads      map[*lua.LState]*Task // every task thread; nil = idle in the pool
	spareThreads []spareThread
	threadOpts   lua.Options
	running      *Task                       // the task being resumed now
	parked       map[*lua.LState]*op         // coroutines of tasks inside a pending call
	owners       map[*lua.LState]*lua.LState // pcall workers -> the coroutine they run for (nil: main)
	keepalive    int
	idle         []chan struct{}
	drains       []chan struct{} // closed once no Redis operation is queued or in flight (Close)
	closers      map[int]func()
	nextCloser   int
	failures     int
	callbackErrs int

	mark, fail, doneMark *lua.LUserData
	trampoline           *lua.LFunction
	wrap                 *lua.LFunction
	with                 lua.LValue     // the prelude's l:with helper
	lib                  *lua.LTable    // the shield module table
	rawCreate            lua.LGFunction // gopher-lua's coroutine.create

	locks *lockBinding // nil when the lock capability is off
}

// NewRuntime installs the shield library into L (require("shield") and the
// global `shield`), replaces pcall/xpcall and the coroutine functions with
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
		ctx: ctx, cancel: cancel, done: make(chan struct{}), jobs: make(chan func()),
		threads: map[*lua.LState]*Task{}, parked: map[*lua.LState]*op{}, owners: map[*lua.LState]*lua.LState{}, closers: map[int]func(){},
		threadOpts: threadOptions(L.Options),
	}
	rt.vm = &vmContext{kill: make(chan struct{}), rt: rt}
	rt.mon.threshold = svc.SlowTask
	if err := rt.install(); err != nil {
		cancel()
		return nil, err
	}
	go rt.watch(rt.done)
	return rt, nil
}

func (rt *Runtime) install() error {
	L := rt.L
	rt.mark, rt.fail, rt.doneMark = L.NewUserData(), L.NewUserData(), L.NewUserData()
	co, ok := L.GetGlobal("coroutine").(*lua.LTable)
	if !ok {
		return errors.New("shield: the Lua state has no coroutine library (open the base libraries first)")
	}
	create, ok := co.RawGetString("create").(*lua.LFunction)
	if !ok || !create.IsG {
		return errors.New("shield: coroutine.create is not gopher-lua's")
	}
	rt.rawCreate = create.GFunction
	priv := L.NewTable()
	priv.RawSetString("mark", rt.mark)
	priv.RawSetString("fail", rt.fail)
	priv.RawSetString("done", rt.doneMark)
	priv.RawSetString("arm", L.NewFunction(rt.arm))
	priv.RawSetString("create", L.NewFunction(rt.coCreate))
	priv.RawSetString("busy", L.NewFunction(rt.busy))
	priv.RawSetString("callable", L.NewFunction(callable))
	priv.RawSetString("adopt", L.NewFunction(rt.adopt))
	priv.RawSetString("disown", L.NewFunction(rt.disown))
	priv.RawSetString("running", L.NewFunction(rt.coRunning))
	priv.RawSetString("where", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LString(userWhere(L))); return 1 }))
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
	if r := rt.svc.Ranks; r != nil {
		rt.installRanks(rt.lib, r)
	}
	if q := rt.svc.Queues; q != nil {
		rt.installQueues(rt.lib, q)
	}
	if l := rt.svc.Limiters; l != nil {
		rt.installRateLimiter(rt.lib, l)
	}
	if s := rt.svc.Scheduler; s != nil {
		rt.installScheduler(rt.lib, s)
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
		select {
		case err := <-res: // ended while the runtime closed (interrupted)
			return err
		default:
		}
		return ErrClosed
	}
}

// CallbackErrors is the number of callbacks (subscribers, on_lost) that
// raised; each was logged with its traceback and the callback's owner went on.
func (rt *Runtime) CallbackErrors() (n int) {
	_ = rt.Do(func(*lua.LState) error { n = rt.callbackErrs; return nil })
	return n
}

// callbackFailed logs a callback's uncaught error with its traceback and
// counts it; the subscription (or schedule) carries on.
func (rt *Runtime) callbackFailed(kind, name string, err error) {
	rt.callbackErrs++
	if f := rt.svc.Observe.TaskFailed; f != nil {
		f()
	}
	rt.log.Error("shield: callback failed", "kind", kind, "name", name, "error", err.Error())
}

// Ref keeps the runtime busy (Wait does not return) until the matching Unref:
// subscriptions and scheduled work hold a reference. Loop only.
func (rt *Runtime) Ref() { rt.keepalive++ }

// Unref releases a reference taken by Ref. Loop only.
func (rt *Runtime) Unref() { rt.keepalive-- }

// OnClose registers fn to run on the loop when the runtime closes (before
// in-flight work is cancelled) and returns a function that unregisters it.
// Loop only (both).
func (rt *Runtime) OnClose(fn func()) (forget func()) {
	id := rt.nextCloser
	rt.nextCloser++
	rt.closers[id] = fn
	return func() { delete(rt.closers, id) }
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

// killWait bounds how long Close waits for the loop once it has interrupted
// the Lua code still running: the time for the interrupted task to unwind,
// or for a Go function that does not return to be given up on.
const killWait = 2 * time.Second

// Close stops the runtime: closers run (subscriptions end), running tasks get
// up to grace to finish; then Lua that is still running is interrupted (it
// raises ErrInterrupted at its next instruction), in-flight work is
// cancelled and the loop ends. Close returns within grace + 2 s even when a
// task never yields. The LState itself is left to its owner. Idempotent.
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
		for len(rt.closers) > 0 {
			for id, fn := range rt.closers {
				delete(rt.closers, id)
				fn()
			}
		}
		rt.keepalive = 0
		rt.idle = append(rt.idle, idle)
		rt.checkIdle()
	})
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-idle:
	case <-timer.C:
		rt.interruptRunning(grace)
	}
	rt.drain(killWait / 2)
	rt.cancel()
	rt.mu.Lock()
	rt.stopped = true
	idleNow := !rt.owned // else the holder closes done when it lets go
	rt.mu.Unlock()
	if idleNow {
		rt.stopOnce.Do(func() { close(rt.done) })
	}
	select {
	case <-rt.done:
	case <-time.After(killWait):
		rt.log.Error("shield: the runtime loop did not stop: a Go function called from Lua does not return; giving up on it")
	}
	rt.mu.Lock()
	stops := rt.stopFns
	rt.stopFns = nil
	rt.mu.Unlock()
	for _, fn := range stops {
		fn()
	}
}

// interruptRunning is Close's last resort after grace: Lua that is running
// (a task that never yields) is made to raise at its next instruction, and
// every task still alive ends with ErrInterrupted.
func (rt *Runtime) interruptRunning(grace time.Duration) {
	running := "none"
	if t := rt.mon.task.Load(); t != nil && rt.mon.start.Load() != 0 {
		running = t.Name
		if p := rt.vm.line.Load(); p != nil && *p != "" {
			running += " at " + *p
		}
	}
	if grace > 0 {
		rt.log.Warn("shield: tasks still running after the shutdown grace period; interrupting them",
			"grace", grace, "running", running)
	}
	rt.vm.interrupt()
	ended := make(chan struct{})
	rt.Post(func() {
		for _, t := range rt.threads {
			if t != nil && !t.ended {
				rt.finishTask(t, ErrInterrupted, false)
			}
		}
		close(ended)
	})
	select {
	case <-ended:
		rt.mu.Lock()
		names := append([]string(nil), rt.interrupted...)
		rt.mu.Unlock()
		if n := len(names); n > 0 {
			if n > 10 {
				names = append(names[:10:10], fmt.Sprintf("and %d more", n-10))
			}
			rt.log.Warn("shield: interrupted tasks", "count", n, "tasks", strings.Join(names, ", "))
		}
	case <-time.After(killWait):
	}
}

// Tasks is the number of tasks alive now (running or suspended). Safe from
// any goroutine.
func (rt *Runtime) Tasks() int { return int(rt.live.Load()) }

// Library returns the shield table (what require("shield") returns).
func (rt *Runtime) Library() *lua.LTable { return rt.lib }

// OnStop registers fn to run when Close has stopped the runtime (on the
// goroutine that called Close).
func (rt *Runtime) OnStop(fn func()) {
	rt.mu.Lock()
	rt.stopFns = append(rt.stopFns, fn)
	rt.mu.Unlock()
}

// Interrupted returns the names of the tasks Close had to interrupt after
// its grace period (empty after a clean stop). Call it after Close.
func (rt *Runtime) Interrupted() []string {
	select {
	case <-rt.done:
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return append([]string(nil), rt.interrupted...)
	default:
		return nil
	}
}
