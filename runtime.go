package shieldglobal

import (
	"context"
	"errors"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// Runtime runs one *lua.LState: its loop is the only goroutine that touches
// the state, and scripts run on it as tasks (coroutines) that may block
// without stopping the others. Create it with Module.NewRuntime; every
// method is safe from any goroutine (none may be called from Lua, i.e. from
// a Go function running on the loop, except where it says so).
//
// Runtime wraps the module's internal runtime and exposes only what
// docs/embedding.md documents.
type Runtime struct {
	rt    *runtime.Runtime
	state *lua.LState // the state given to NewRuntime
}

// ErrRuntimeInUse is returned by NewRuntime for a Lua state (or a thread of
// one) that already has a runtime which has not been closed: two loops would
// drive one state.
var ErrRuntimeInUse = errors.New("shield: this Lua state already has a runtime (close it first)")

// inUse holds the Lua states that have a runtime, process-wide (a state
// given to two Modules is just as broken), keyed by the state's globals so
// that a thread of the state counts too.
var inUse = struct {
	sync.Mutex
	states map[*lua.Global]bool
}{states: map[*lua.Global]bool{}}

// claim reserves L for one runtime; release gives it back.
func claim(L *lua.LState) (release func(), err error) {
	inUse.Lock()
	defer inUse.Unlock()
	if inUse.states[L.G] {
		return nil, ErrRuntimeInUse
	}
	inUse.states[L.G] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			inUse.Lock()
			delete(inUse.states, L.G)
			inUse.Unlock()
		})
	}, nil
}

// RunFile runs a Lua file as a task, with args as its `...`, and waits
// until that task ends (not until the runtime is idle: see Wait). A Lua
// error comes back as a *TaskError; ErrRuntimeClosed once the runtime is
// closing.
func (r *Runtime) RunFile(path string, args ...lua.LValue) error {
	return taskError(r.rt.RunFile(path, args...))
}

// RunString runs Lua source as a task named name, with args as its `...`,
// and waits until it ends; errors as RunFile.
func (r *Runtime) RunString(src, name string, args ...lua.LValue) error {
	return taskError(r.rt.RunString(src, name, args...))
}

// Call runs the Lua function fn — the name of a global, a dotted path such
// as "handlers.on_login", or a *lua.LFunction — as a task with args
// converted like Set converts values, and returns its results when the task
// ends. The function may block. When ctx ends first, Call returns ctx's
// error and the task is interrupted (tasks it spawned go on). A Lua error
// comes back as a *TaskError with its traceback; other errors:
// ErrRuntimeClosed, fn not found or not a function.
//
// Strings, numbers and booleans among the results are safe to keep; read
// tables inside Do, since the loop may change them at any time.
func (r *Runtime) Call(ctx context.Context, fn any, args ...any) ([]lua.LValue, error) {
	vals, err := r.rt.Call(ctx, fn, args...)
	return vals, taskError(err)
}

// Go is Call without waiting, for hosts that dispatch many requests: done
// is called on the loop when the task ends (it must not block). It costs no
// goroutine. When the runtime is closing, done gets ErrRuntimeClosed at
// once, on the calling goroutine.
func (r *Runtime) Go(fn any, args []any, done func(results []lua.LValue, err error)) {
	r.rt.Go(fn, args, func(results []lua.LValue, err error) { done(results, taskError(err)) })
}

// Set makes v the global name of the Lua state, converted as
// docs/embedding.md describes (Go functions, structs, maps, slices...). It
// runs on the loop and waits for it.
func (r *Runtime) Set(name string, v any) error { return r.rt.Set(name, v) }

// SetAsync makes fn the global name of the Lua state as an async host
// function: Module.ExposeAsync for one runtime (its rules and errors).
func (r *Runtime) SetAsync(name string, fn any) error { return r.rt.SetAsync(name, fn) }

// Do runs fn on the loop with the runtime's Lua state and waits for it: for
// reading result tables or the host's own gopher-lua glue. Lua run directly
// by fn (L.DoString, L.PCall) runs outside any task: see docs/embedding.md
// for what blocking calls do there. Do must not be called from the loop
// itself (a Go function called from Lua), which would deadlock. Close ends
// the wait with ErrRuntimeClosed.
func (r *Runtime) Do(fn func(L *lua.LState) error) error { return r.rt.Do(fn) }

// Wait blocks until the runtime is idle — no task alive and nothing holding
// it (subscriptions, consumers, scheduled work) — or ctx ends, or the
// runtime closes (ErrRuntimeClosed). It returns the number of tasks whose
// uncaught errors were logged. When ctx ends while a task hogs the loop,
// Wait returns at once.
func (r *Runtime) Wait(ctx context.Context) (failures int, err error) { return r.rt.Wait(ctx) }

// Tasks is the number of tasks alive now: running, suspended in a blocking
// call, or spawned and about to start. It does not wait on the loop.
func (r *Runtime) Tasks() int { return r.rt.Tasks() }

// Close stops the runtime: consumers and subscriptions stop, tasks get
// grace to end, then Lua still running is interrupted and locks still held
// are released. It returns within grace + 2 s, even when a task never
// yields. The Lua state is left to its owner (close it after). Idempotent.
func (r *Runtime) Close(grace time.Duration) { r.rt.Close(grace) }

// Interrupted returns, after Close, the names of the tasks Close had to
// interrupt.
func (r *Runtime) Interrupted() []string { return r.rt.Interrupted() }

// InterruptedTasks returns, after Close, the tasks Close had to interrupt
// with what each was doing.
func (r *Runtime) InterruptedTasks() []InterruptedTask {
	var out []InterruptedTask
	for _, it := range r.rt.InterruptedTasks() {
		out = append(out, InterruptedTask(it))
	}
	return out
}

// InterruptedTask is a task Close had to interrupt after its grace period,
// and what it was doing then.
type InterruptedTask struct {
	Name string
	// Waiting is the blocking call the task was parked in ("shield.sleep"),
	// empty when it was not parked.
	Waiting string
	// Running is true for the task that was running when the grace period
	// ended: Lua that had not yielded, or a Go function called from Lua that
	// had not returned.
	Running bool
	// At is file:line where the task was: the line of its blocking call, or
	// the instruction it was interrupted at. Empty when unknown.
	At string
}

// String renders the task for a log line: "spawn (waiting in shield.sleep
// at main.lua:3)", "main.lua (did not yield; at main.lua:7)".
func (it InterruptedTask) String() string { return runtime.InterruptedTask(it).String() }

// TaskError is an uncaught Lua error of a task: what Call, Go, RunFile and
// RunString return when the script raised. errors.Is(err,
// ErrRuntimeClosed) is true when the closing runtime ended the task in a
// blocking call.
type TaskError struct {
	// Task is the task's name (the file, "call", the function's name).
	Task string
	// Message is the error message, with the position it was raised at.
	Message string
	// Traceback is the Lua stack traceback.
	Traceback string
	// Value is the Lua value the task raised (a string, or the table given
	// to error()); nil when the task ended for another reason.
	Value lua.LValue

	err error
}

// Error is the message and the traceback.
func (e *TaskError) Error() string {
	if e.Traceback == "" {
		return e.Message
	}
	return e.Message + "\n" + e.Traceback
}

// Unwrap is ErrRuntimeClosed for a task whose blocking call the closing
// runtime ended, an interruption error for one Close interrupted after its
// grace period, nil for an error the task raised by itself.
func (e *TaskError) Unwrap() error { return e.err }

// taskError turns the internal runtime's task errors into TaskErrors.
func taskError(err error) error {
	var te *runtime.TaskError
	if err == nil || !errors.As(err, &te) || te != err {
		return err
	}
	return &TaskError{Task: te.Task, Message: te.Message, Traceback: te.Traceback, Value: te.Value, err: te.Unwrap()}
}
