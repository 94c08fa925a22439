package runtime

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync/atomic"

	lua "github.com/yuin/gopher-lua"
)

// taskIDs numbers tasks process-wide, so owner ids
// ("node:service:coroutine-N") are unique across every Lua state.
var taskIDs atomic.Int64

// Task is a coroutine run by the loop: a script's main chunk, a callback or a
// shield.spawn'ed function.
type Task struct {
	ID      int64
	Name    string
	co      *lua.LState
	runs    int    // tasks co ran before this one (see retireThreadAfter)
	tb      string // traceback captured when the task raised
	done    func(err error)
	end     func(t *Task, err error) // instead of done, with the task (Results)
	group   *Group
	results []lua.LValue // what the task function returned

	owner   string // OwnerID, built once
	waiting *Wait  // the blocking call the task is suspended in, if any
	ended   bool
	// killedAt is the line the task was at when Close's interrupt stopped
	// the Lua it ran (see vmContext.slow).
	killedAt string
	closed   bool // its pending call was ended by the closing runtime
	// ends has the bits of the task-end hooks to run when it ends (see
	// OnTaskEnd): a capability marks a task that took something it must
	// give back (a lock hold, a reliable message).
	ends uint32
}

// TaskError is an uncaught error of a task, with its Lua traceback.
type TaskError struct {
	Task      string
	Message   string
	Traceback string
	// Value is the Lua value the task raised (a string, or the table given
	// to error()); nil when the task ended for another reason.
	Value lua.LValue

	err error // ErrClosed or ErrInterrupted when the runtime ended the task
}

// Unwrap is ErrClosed for a task whose pending call the closing runtime
// ended, ErrInterrupted for one Close or InterruptGroup interrupted, nil for
// an error the task raised by itself.
func (e *TaskError) Unwrap() error { return e.err }

// Group gathers the failures of the tasks started in it and of every task
// those spawn, directly or not (shield.spawn inherits the spawner's group):
// the spec runner fails a test when a task it spawned raised. Without a
// group a failed task is logged and counted (see Wait).
type Group struct {
	// OnError receives each failure, on the loop, instead of the log.
	OnError func(err *TaskError)
	// Inherited makes the tasks these tasks spawn members too (the spec
	// runner's groups); otherwise they belong to no group.
	Inherited bool
}

func (e *TaskError) Error() string {
	if e.Traceback == "" {
		return e.Message
	}
	return e.Message + "\n" + e.Traceback
}

// Thread sizes of tasks and of the coroutines scripts create. Of the host's
// lua.Options only CallStackSize (the deepest Lua recursion a task may
// reach) carries over: with gopher-lua's other defaults every thread would
// take ~105 KB (a 5 120-slot registry and a fixed call stack). Threads start
// small and grow on demand. Each 1 024 frames of CallStackSize cost a task
// 1 KB up front (gopher-lua sizes a table of stack segments by it), which the
// garbage collector scans on every cycle; use StateOptions for a state whose
// tasks may recurse 2 000 levels deep.
const (
	// ThreadRegistrySize is the initial data stack of a thread (slots); it
	// grows by threadRegistryGrowStep up to ThreadRegistryMaxSize. A task
	// parked in a blocking call uses 4-15 slots; 64 (1 KB) cover it, and
	// every byte a spawn allocates brings the next GC cycle closer (128
	// slots made a spawn ~15 % slower, 8 % with StateOptions). gopher-lua
	// grows a registry to the size needed plus the step, so the step is
	// also the most a thread over-allocates (2 KB), and a task recursing
	// 2 000 calls deep (~2 slots a frame) copies its stack ~30 times on
	// the way down, once per thread.
	ThreadRegistrySize     = 64
	ThreadRegistryMaxSize  = 1 << 22
	threadRegistryGrowStep = 128
	// stateRegistryGrowStep is StateOptions' step for the main state, one
	// per runtime: there, fewer copies matter more than bytes.
	stateRegistryGrowStep = 512
	// maxSpareThreads bounds the idle task threads kept for reuse.
	maxSpareThreads = 256
	// retireThreadAfter is how many tasks a thread runs before it is let
	// go instead of reused. A pooled thread's body (the prelude's loop)
	// tail-calls itself once per task, and gopher-lua counts every tail
	// call as a stack level: debug.traceback on a thread that had run
	// 20 000 tasks walked 20 000 levels (2.7 ms). A new thread per 512
	// tasks costs about 40 ns a task.
	retireThreadAfter = 512
)

// spareThread is an idle task thread and the tasks it ran.
type spareThread struct {
	co   *lua.LState
	runs int
}

// StateOptions are the lua.Options recommended for a Lua state given to a
// Runtime (the shield CLI uses them): tasks may recurse 2 000 levels deep
// (8x gopher-lua's default), and the main state's own stacks grow on demand.
// Deeper recursion is a larger CallStackSize away; 10 240 frames made a
// spawn 1.5x slower (10 KB more per task for the collector to scan).
func StateOptions() lua.Options {
	return lua.Options{CallStackSize: 2048, RegistrySize: 1024, RegistryMaxSize: ThreadRegistryMaxSize,
		RegistryGrowStep: stateRegistryGrowStep, MinimizeStackMemory: true}
}

func threadOptions(host lua.Options) lua.Options {
	if host.CallStackSize < 64 {
		host.CallStackSize = lua.CallStackSize
	}
	host.RegistrySize = ThreadRegistrySize
	host.RegistryMaxSize = max(host.RegistryMaxSize, ThreadRegistryMaxSize)
	host.RegistryGrowStep = threadRegistryGrowStep
	host.MinimizeStackMemory = true
	return host
}

// newThread creates a thread with the runtime's thread options and its
// interrupt context, as a child of L (the main state or a task thread). It
// never derives a context per thread (gopher-lua's NewThread would register
// a cancel func in the parent context for every coroutine).
func (rt *Runtime) newThread(L *lua.LState) *lua.LState {
	saved, ctx := L.Options, L.RemoveContext()
	L.Options = rt.threadOpts
	co, _ := L.NewThread()
	L.Options = saved
	if ctx != nil {
		L.SetContext(ctx)
	}
	co.SetContext(rt.vm)
	return co
}

// Spawn starts fn(args...) as a new task. Loop only. done, if not nil, is
// called on the loop when the task ends; without it an uncaught error goes
// to the task's group, or is logged with its traceback and counted (see
// Wait).
func (rt *Runtime) Spawn(name string, fn *lua.LFunction, args []lua.LValue, done func(err error)) *Task {
	return rt.SpawnIn(nil, name, fn, args, done)
}

// SpawnIn is Spawn for a task of group g (nil: none). Loop only.
func (rt *Runtime) SpawnIn(g *Group, name string, fn *lua.LFunction, args []lua.LValue, done func(err error)) *Task {
	t := &Task{done: done}
	rt.spawnTask(t, g, name, fn, args)
	return t
}

// spawnTask starts t (its done or end set by the caller). Loop only.
func (rt *Runtime) spawnTask(t *Task, g *Group, name string, fn *lua.LFunction, args []lua.LValue) {
	t.ID, t.Name, t.group = taskIDs.Add(1), name, g
	rt.live.Add(1)
	if n := len(rt.spareThreads); n > 0 {
		s := rt.spareThreads[n-1]
		t.co, t.runs = s.co, s.runs
		rt.spareThreads = rt.spareThreads[:n-1]
		rt.threads[t.co] = t
		rt.resume(t, append([]lua.LValue{fn}, args...)...)
		return
	}
	t.co = rt.newThread(rt.L)
	rt.threads[t.co] = t
	rt.resumeFn(t, rt.trampoline, append([]lua.LValue{fn}, args...))
}

// resume runs task t until it yields or ends. Loop only.
func (rt *Runtime) resume(t *Task, args ...lua.LValue) { rt.resumeFn(t, nil, args) }

func (rt *Runtime) resumeFn(t *Task, fn *lua.LFunction, args []lua.LValue) {
	prev := rt.running
	rt.running = t
	rt.mon.enter(t)
	st, err, vals := rt.guardedResume(t, fn, args)
	rt.mon.leave()
	rt.running = prev
	switch st {
	case lua.ResumeOK:
		t.results = vals
		rt.finishTask(t, nil, false)
	case lua.ResumeError:
		rt.finishTask(t, err, false)
	case lua.ResumeYield:
		switch {
		case len(vals) > 0 && vals[0] == rt.mark:
			// Suspended in a blocking call: its op resumes it.
		case len(vals) > 0 && vals[0] == rt.doneMark:
			t.results = vals[1:]
			rt.finishTask(t, nil, true)
		default:
			// A plain coroutine.yield() at a task's top level yields to the
			// other tasks: resume it on the next loop turn.
			rt.postLocal(func() {
				if rt.threads[t.co] == t {
					rt.resume(t)
				}
			})
		}
	}
}

// guardedResume resumes t's thread. Every Resume is guarded: a Go panic
// escaping gopher-lua ends the task, never the process.
func (rt *Runtime) guardedResume(t *Task, fn *lua.LFunction, args []lua.LValue) (st lua.ResumeState, err error, vals []lua.LValue) {
	top := rt.L.GetTop()
	defer func() {
		if r := recover(); r != nil {
			rt.L.G.CurrentThread = rt.L
			rt.L.SetTop(top)
			st, err, vals = lua.ResumeError, fmt.Errorf("%v", r), nil
		}
	}()
	return rt.L.Resume(t.co, fn, args...)
}

// finishTask ends t: its cleanups run (holds it kept are released), its
// thread goes back to the pool when it ended cleanly, and done or the
// failure count learns the outcome.
func (rt *Runtime) finishTask(t *Task, err error, reusable bool) {
	killed := rt.vm.killed()
	var cause error
	if t.group != nil {
		cause = rt.vm.aimed(t.group)
	}
	t.ended = true
	if w := t.waiting; w != nil {
		rt.unpark(w)
		w.abandon() // the task will not take the call's result
	}
	rt.live.Add(-1)
	rt.runEndHooks(t)
	delete(rt.threads, t.co)
	if reusable && len(rt.spareThreads) < maxSpareThreads && t.runs+1 < retireThreadAfter {
		rt.threads[t.co] = nil
		rt.spareThreads = append(rt.spareThreads, spareThread{t.co, t.runs + 1})
	}
	var terr *TaskError
	if err != nil {
		terr = &TaskError{Task: t.Name, Message: err.Error(), Traceback: t.tb}
		var api *lua.ApiError
		if errors.As(err, &api) {
			terr.Message, terr.Value = errorText(rt.L, api.Object), api.Object
			// A task function that is a Go function (shield.spawn(tostring))
			// raised at the prelude's call site: no script line to give.
			if msg, ok := stripRuntimePosition(terr.Message); ok {
				if _, isStr := api.Object.(lua.LString); isStr {
					terr.Message, terr.Value = msg, lua.LString(msg)
				}
			}
		}
		if cause != nil && !strings.Contains(terr.Message, cause.Error()) {
			terr.Message = cause.Error() + ": " + terr.Message
		}
		switch {
		case t.closed:
			terr.err = ErrClosed
		case killed || cause != nil:
			terr.err = ErrInterrupted
		}
	}
	switch {
	case t.end != nil:
		if terr == nil {
			t.end(t, nil)
		} else {
			t.end(t, terr)
		}
	case t.done != nil:
		if terr == nil {
			t.done(nil)
		} else {
			t.done(terr)
		}
	case terr == nil, t.closed:
	case killed:
		// Close names the interrupted tasks once (Interrupted), not one
		// log line each.
		rt.noteInterrupted(t, err)
	case t.group != nil && t.group.OnError != nil:
		t.group.OnError(terr)
	default:
		rt.failures.Add(1)
		rt.log.Error("shield: task failed", "task", t.Name, "error", terr.Error())
		if f := rt.svc.Observe.TaskFailed; f != nil {
			f()
		}
	}
	if killed && (t.done != nil || t.end != nil) && terr != nil && !t.closed {
		rt.noteInterrupted(t, err)
	}
}

// Results returns what the task's function returned (valid once it ended).
func (t *Task) Results() []lua.LValue { return t.results }

// InterruptGroup ends every task of group g with ErrInterrupted: the running
// one at its next Lua instruction (also when it never yields), suspended
// ones at once. Safe from any goroutine.
func (rt *Runtime) InterruptGroup(g *Group) { rt.interruptGroup(g, ErrInterrupted) }

func (rt *Runtime) interruptGroup(g *Group, cause error) {
	rt.vm.aim(g, cause)
	rt.Post(func() {
		for _, t := range rt.threads {
			if t != nil && !t.ended && t.group == g {
				rt.finishTask(t, cause, false) // the loop is here: t is suspended
			}
		}
		rt.vm.unaim(g)
	})
}

// EndHook names a capability's task-end hook (see OnTaskEnd): one bit of
// a task's ends.
type EndHook uint32

// OnTaskEnd registers a capability's task-end hook, once, at install: fn
// runs on the loop for every task marked with the returned hook (see
// MarkTask) when it ends — normally, by an error, interrupted, or when the
// runtime closes. It is how a task gives back what it took that outlives a
// blocking call (a lock hold, a reliable message); a pending call's own
// cleanup is its cancel (see Block). Loop only.
func (rt *Runtime) OnTaskEnd(fn func(t *Task)) EndHook {
	if len(rt.endHooks) == 32 {
		panic("shield: too many task-end hooks")
	}
	rt.endHooks = append(rt.endHooks, fn)
	return EndHook(1) << (len(rt.endHooks) - 1)
}

// MarkTask makes the task-end hook h run when t ends (at once if t has
// ended). It sets a bit: nothing is registered per hold. Loop only.
func (rt *Runtime) MarkTask(t *Task, h EndHook) {
	if t.ended {
		rt.endHooks[bits.TrailingZeros32(uint32(h))](t)
		return
	}
	t.ends |= uint32(h)
}

func (rt *Runtime) runEndHooks(t *Task) {
	for t.ends != 0 {
		i := bits.TrailingZeros32(t.ends)
		t.ends &^= 1 << i
		rt.endHooks[i](t)
	}
}

// ErrorMessage is the message of err, an error of L.PCall: the Lua error
// value rendered as errorText does.
func ErrorMessage(L *lua.LState, err error) string { return errorText(L, errorValue(err)) }

// errorText renders an uncaught error value: a string as it is, a table
// through its __tostring or as its fields ({code = 1}), anything else as Lua
// prints it.
func errorText(L *lua.LState, v lua.LValue) string {
	switch x := v.(type) {
	case lua.LString:
		return string(x)
	case *lua.LTable:
		if mt, ok := L.GetMetatable(x).(*lua.LTable); ok && mt.RawGetString("__tostring") != lua.LNil {
			if s, err := tostringSafely(L, x); err == nil {
				return s
			}
		}
		return "error object " + describeTable(x)
	}
	return v.String()
}

func tostringSafely(L *lua.LState, v lua.LValue) (s string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return L.ToStringMeta(v).String(), nil
}

// arm is called first by every task thread: it installs the traceback hook
// on the thread (Resume resets Panic when a thread starts).
func (rt *Runtime) arm(L *lua.LState) int {
	L.Panic = rt.panicWithTraceback
	return 0
}

// panicWithTraceback runs while the failing task's stack is still intact.
func (rt *Runtime) panicWithTraceback(L *lua.LState) {
	if t := rt.threads[L]; t != nil {
		t.tb = traceback(L)
	}
	panic(&lua.ApiError{Type: lua.ApiErrorRun, Object: L.Get(-1)})
}

// CurrentTask returns the task running now (the task whose thread, or a
// coroutine of it, executes the calling Lua code), or nil outside tasks.
// Loop only.
func (rt *Runtime) CurrentTask(*lua.LState) *Task { return rt.running }

// Owner is the lock-owner id OwnerID gave t ("" when nothing asked for it:
// the task took nothing under its name). Loop only.
func (t *Task) Owner() string { return t.owner }

// Ended reports whether t has ended. Loop only.
func (t *Task) Ended() bool { return t.ended }
