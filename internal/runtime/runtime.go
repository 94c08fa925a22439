// Package runtime is shield_global's Lua runtime: the per-state loop,
// tasks, the one blocking primitive (Block, with Run and Go for store
// operations), interrupts, frames and tracebacks, host calls. It knows no
// capability: capabilities (package bindings) install into it through
// Capability and use its small exported contract — Block/Wait, Run,
// RunOutcome, Go, Spawn, Post, Log, Context, Clock, Args and SelfAs,
// OnTaskEnd/MarkTask, Slot, Loop.
//
// The package is named runtime like its directory; files that also need
// Go's runtime package import that one as goruntime.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

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
	owned    bool         // a goroutine holds the loop role (see loop.go)
	posts    uint64       // functions posted so far (Quiet)
	sending  atomic.Int32 // batches sent whose completion has not run yet (Quiet)
	closing  bool
	stopped  bool // Close ended the runtime: Post drops work, nobody takes the loop again
	stopOnce sync.Once
	stopFns  []func() // OnStop

	syncing atomic.Pointer[syncWait] // the call the loop waits in outside any task, if any

	ctx    context.Context // cancelled when the runtime stops or its module closes; in-flight work sees it
	cancel context.CancelFunc
	jobs   chan func()   // hands work to an idle worker
	done   chan struct{} // closed when the loop has stopped for good

	vm          *vmContext
	mon         monitor
	live        atomic.Int64      // tasks alive (Tasks)
	interrupted []InterruptedTask // tasks Close interrupted; guarded by mu
	// Counted on the loop, read from anywhere: reading them must not wait
	// on a loop that a task may be hogging (Wait after a signal).
	failures     atomic.Int64
	callbackErrs atomic.Int64

	// Loop-only state.
	local        []func()              // posted by the loop itself, for the next turn
	batch        []batchItem           // Redis operations of this turn
	inflight     int                   // batches being sent
	starting     int                   // tasks shield.spawn queued for the next turn
	threads      map[*lua.LState]*Task // every task thread; nil = idle in the pool
	spareThreads []spareThread
	threadOpts   lua.Options
	running      *Task                       // the task being resumed now
	parked       map[*lua.LState]*Wait       // coroutines of tasks inside a pending call
	atOnce       *Wait                       // a call that may not wait, while it starts (see Block)
	endHooks     []func(*Task)               // capabilities' task-end hooks (OnTaskEnd)
	owners       map[*lua.LState]*lua.LState // pcall workers -> the coroutine they run for (nil: main)
	keepalive    int
	idle         []chan struct{}
	drains       []chan struct{} // closed once no Redis operation is queued or in flight (Close)
	closers      map[int]func()
	nextCloser   int

	mark, fail, doneMark *lua.LUserData
	trampoline           *lua.LFunction
	wrap                 *lua.LFunction
	with                 lua.LValue     // the prelude's l:with helper
	lib                  *lua.LTable    // the shield module table
	rawCreate            lua.LGFunction // gopher-lua's coroutine.create

	slots []any // capabilities' per-runtime state (see Slot)

	hostCtx context.Context // parent of async host calls' contexts (hostContext); loop only
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
	parent := svc.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	rt := &Runtime{
		L: L, svc: svc, log: log,
		ctx: ctx, cancel: cancel, done: make(chan struct{}), jobs: make(chan func()),
		threads: map[*lua.LState]*Task{}, parked: map[*lua.LState]*Wait{}, owners: map[*lua.LState]*lua.LState{}, closers: map[int]func(){},
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
	priv.RawSetString("relocate", L.NewFunction(relocate))
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
	for _, c := range rt.svc.Capabilities {
		c.Install(rt, rt.lib)
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
// itself (from a Lua-called Go function), which would deadlock. It waits as
// long as the loop is busy (a task that never yields holds it); Close ends
// the wait: Do then returns ErrClosed.
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
// Safe from any goroutine; it does not wait on the loop.
func (rt *Runtime) CallbackErrors() int { return int(rt.callbackErrs.Load()) }

// CallbackFailed logs a callback's uncaught error with its traceback and
// counts it; the subscription (or schedule) carries on. Loop only.
func (rt *Runtime) CallbackFailed(kind, name string, err error) {
	rt.CountFailure()
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
// it (subscriptions, scheduled work) — or ctx ends, or the runtime closes
// (ErrClosed). It returns the number of tasks whose uncaught errors were
// logged. It never waits on the loop past ctx: when ctx ends while a task
// hogs the loop (it never yields), Wait returns at once, so that the caller
// can go on to Close, which interrupts that task.
func (rt *Runtime) Wait(ctx context.Context) (failures int, err error) {
	rt.mu.Lock()
	closing := rt.closing
	rt.mu.Unlock()
	ch := make(chan struct{})
	if closing || !rt.TryPost(func() { rt.idle = append(rt.idle, ch); rt.checkIdle() }) {
		return int(rt.failures.Load()), ErrClosed
	}
	select {
	case <-ch:
	case <-ctx.Done():
		err = ctx.Err()
	case <-rt.done:
		err = ErrClosed
	}
	return int(rt.failures.Load()), err
}

// Tasks is the number of tasks alive now: running, suspended, or spawned
// and about to start. Safe from any goroutine.
func (rt *Runtime) Tasks() int { return int(rt.live.Load()) }

// Library returns the shield table (what require("shield") returns).
func (rt *Runtime) Library() *lua.LTable { return rt.lib }

// The contract of capability glue (bindings) beyond Block, Run, Go, Spawn,
// Post and Args: the runtime's logger, context, clock, identity and
// observers, the prelude's l:with helper, and a slot for per-runtime state.

// Log is the runtime's logger (Services.Log, else slog.Default).
func (rt *Runtime) Log() *slog.Logger { return rt.log }

// Context ends when the runtime stops or its module closes; work a
// capability starts for the runtime runs under it.
func (rt *Runtime) Context() context.Context { return rt.ctx }

// Owner is this process's identity (Services.Owner).
func (rt *Runtime) Owner() Owner { return rt.svc.Owner }

// Observers are the module's metric hooks (Services.Observe); any field may
// be nil.
func (rt *Runtime) Observers() *Observers { return &rt.svc.Observe }

// With is the prelude's l:with helper (a Lua function: it calls a user
// function between acquire and release, yield-safe).
func (rt *Runtime) With() lua.LValue { return rt.with }

// CountFailure counts a callback that raised (CallbackErrors, and the
// TaskFailed observer) for a capability that logs the failure itself.
// Loop only.
func (rt *Runtime) CountFailure() {
	rt.callbackErrs.Add(1)
	if f := rt.svc.Observe.TaskFailed; f != nil {
		f()
	}
}

// Slot is a capability's place in every runtime, for state it keeps per
// runtime (the lock capability's binding): an index into the runtime's
// slots, not a map lookup. Make each slot once, in a package variable
// (NewSlot); Get and Set are loop only.
type Slot[T any] struct{ i int }

var slotCount atomic.Int32

// NewSlot reserves a slot in every runtime.
func NewSlot[T any]() Slot[T] { return Slot[T]{i: int(slotCount.Add(1)) - 1} }

// Get is what Set put in rt's slot s, nil if nothing.
func (s Slot[T]) Get(rt *Runtime) *T {
	if s.i < len(rt.slots) {
		v, _ := rt.slots[s.i].(*T)
		return v
	}
	return nil
}

// Set puts v into rt's slot s.
func (s Slot[T]) Set(rt *Runtime, v *T) {
	if s.i >= len(rt.slots) {
		rt.slots = append(rt.slots, make([]any, s.i+1-len(rt.slots))...)
	}
	rt.slots[s.i] = v
}

// ModuleClosed returns the module's close error (store.ErrModuleClosed)
// once the module closed, else nil: for the calls that run no store.Op
// (an Op fails with it by itself). The context's Err (an atomic load for
// the module's cancel context) rather than a receive on its Done channel,
// which costs twice as many instructions, twice per local lock pair.
func (rt *Runtime) ModuleClosed() error {
	if rt.svc.Context == nil || rt.svc.Context.Err() == nil {
		return nil
	}
	return context.Cause(rt.svc.Context)
}
