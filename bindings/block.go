package bindings

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Result produces a blocking call's Lua results on the loop, or its error.
type Result func() ([]lua.LValue, error)

// op is one blocking call in flight: a value the loop keeps until its
// completion arrives, then resumes the task that issued it. While it is
// pending, the threads between the caller and the task are parked: no
// script may resume them (see busy).
type op struct {
	rt    *Runtime
	name  string
	L     *lua.LState   // the thread that made the call (the task's or a coroutine of it)
	task  *Task         // the task the call suspends
	chain []*lua.LState // coroutines of the task parked by the call (nil when L is the task's thread)
	res   Result

	once  atomic.Bool
	state atomic.Uint32
}

const (
	opStarting uint32 = iota // the call has not yielded yet
	opParked                 // the task yielded; the completion resumes it
	opDone                   // completed
)

// Complete delivers the call's result. Safe from any goroutine; only the
// first call counts. A completion that arrives before the call yielded is
// returned inline, without yielding at all.
func (o *op) Complete(r Result) {
	if !o.once.CompareAndSwap(false, true) {
		return
	}
	o.res = r
	if o.state.Swap(opDone) == opParked {
		o.rt.Post(func() { o.rt.finishOp(o) })
	}
}

// finishOp resumes the task o suspended with o's result. Loop only.
func (rt *Runtime) finishOp(o *op) {
	t := o.task
	if t.ended || t.waiting != o {
		return // the task is gone (interrupted, or the runtime closing)
	}
	rt.unpark(o)
	vals, err := o.res()
	if err != nil {
		// A call the closing runtime ended ends its task without counting
		// as a failure of the script.
		t.closed = errors.Is(err, errClosing)
		rt.resume(t, rt.fail, lua.LString(opWhere(o)+o.name+": "+err.Error()))
		return
	}
	rt.resume(t, vals...)
}

func (rt *Runtime) park(o *op) {
	o.task.waiting = o
	for th := o.L; th != nil && th != o.task.co; th = th.Parent {
		o.chain = append(o.chain, th)
		rt.parked[th] = o
	}
}

func (rt *Runtime) unpark(o *op) {
	o.task.waiting = nil
	for _, th := range o.chain {
		delete(rt.parked, th)
	}
}

// mode says how a blocking call may wait where it was made.
type mode int

const (
	modeYield     mode = iota // inside a task: suspend the task
	modeSync                  // outside any task (host code on the main thread): block the loop
	modeForbidden             // a metamethod, iterator, sort comparator, require...: cannot yield
)

// callMode decides in a few nanoseconds whether the Go function running on
// thread L may yield its task: every thread from L up to the running task's
// own must have reached its current call through plain Lua calls (see
// plainCalls), and each coroutine's resumer must be the prelude's
// coroutine.resume or pcall, which pass the yield up.
func (rt *Runtime) callMode(L *lua.LState) mode {
	if L.Parent == nil || rt.running == nil {
		return modeSync
	}
	if frameLayoutErr != nil {
		return modeForbidden
	}
	for th := L; ; th = th.Parent {
		if !plainCalls(th) {
			return modeForbidden
		}
		switch th.Parent {
		case rt.L:
			if th == rt.running.co {
				return modeYield
			}
			return modeSync // a coroutine the host resumed from the main thread
		case nil:
			return modeSync
		}
	}
}

const cannotBlock = "cannot block here: a blocking call must not run inside a metamethod, a for-in iterator, " +
	"a table.sort comparator, a string.gsub callback, the top level of a required module, or Lua called from Go"

// Suspend makes the calling Lua function wait for an operation started by
// start, which must eventually call complete (from any goroutine; only the
// first call counts). name is the call as users write it ("shield.sleep");
// it prefixes errors. An LGFunction returns Suspend's result directly.
//
// Inside a task the task yields and the loop resumes it with the results
// (or returns them at once when start completed synchronously); outside any
// task the loop itself waits; where gopher-lua cannot yield a Lua error
// names the call instead of corrupting the state.
func (rt *Runtime) Suspend(L *lua.LState, name string, start func(complete func(Result))) int {
	switch rt.callMode(L) {
	case modeForbidden:
		rt.refuseBlock(L, name)
	case modeSync:
		ch := make(chan Result, 1)
		var once atomic.Bool
		start(func(r Result) {
			if once.CompareAndSwap(false, true) {
				ch <- r
			}
		})
		return rt.returnResult(L, name, <-ch)
	}
	o := &op{rt: rt, name: name, L: L, task: rt.running}
	start(o.Complete)
	if !o.state.CompareAndSwap(opStarting, opParked) {
		return rt.returnResult(L, name, o.res) // done already: no yield
	}
	rt.park(o)
	return L.Yield(rt.mark)
}

func (rt *Runtime) refuseBlock(L *lua.LState, name string) {
	if frameLayoutErr != nil {
		raise(L, "%s: cannot block: %v (shield_global supports gopher-lua v1.1.2)", name, frameLayoutErr)
	}
	raise(L, "%s: %s", name, cannotBlock)
}

func (rt *Runtime) returnResult(L *lua.LState, name string, r Result) int {
	vals, err := r()
	if err != nil {
		raise(L, "%s: %s", name, err.Error())
	}
	return pushAll(L, vals)
}

// Await runs work off the loop (it may wait on the network) and suspends the
// caller until it is done; convert turns its result into Lua values on the
// loop. The work's context is cancelled when the runtime closes.
func (rt *Runtime) Await(L *lua.LState, name string, work func(ctx context.Context) (any, error), convert func(L *lua.LState, v any) []lua.LValue) int {
	return rt.Suspend(L, name, func(complete func(Result)) {
		rt.goWork(func() {
			v, err := work(rt.ctx)
			complete(func() ([]lua.LValue, error) {
				if err != nil {
					return nil, err
				}
				return convert(rt.L, v), nil
			})
		})
	})
}

// AwaitInline is Await for work that may do no I/O: when inline is true (the
// memory backend) work runs right here without yielding, otherwise off the
// loop. Errors read the same either way: "<name>: <error>" at the caller's
// line.
func (rt *Runtime) AwaitInline(L *lua.LState, name string, inline bool, work func(ctx context.Context) (any, error), convert func(L *lua.LState, v any) []lua.LValue) int {
	if !inline {
		return rt.Await(L, name, work, convert)
	}
	v, err := work(rt.ctx)
	if err != nil {
		raise(L, "%s: %s", name, err.Error())
	}
	return pushAll(L, convert(L, v))
}

// Run runs a capability's operation for the Lua call name and returns its
// Lua results (an LGFunction returns Run's result directly): a local op
// inline; a Redis op in the pipeline of this loop turn (the task yields
// until the batch's replies are back; concurrent tasks share the round
// trip); a work op on a worker. convert runs on the loop. An error of the op
// raises "<name>: <error>" at the caller's line.
func Run[T any](rt *Runtime, L *lua.LState, name string, o *store.Op[T], convert func(*lua.LState, T) []lua.LValue) int {
	return RunOutcome(rt, L, name, o, func(L *lua.LState, v T, err error) ([]lua.LValue, error) {
		if err != nil {
			return nil, err
		}
		return convert(L, v), nil
	})
}

// RunOutcome is Run for operations with expected outcomes that are errors in
// Go (not found, timeout, full, version conflict): convert sees the op's
// error too and turns it into Lua values (nil, "not_found"), or returns an
// error to raise.
func RunOutcome[T any](rt *Runtime, L *lua.LState, name string, o *store.Op[T], convert func(*lua.LState, T, error) ([]lua.LValue, error)) int {
	res := func(L *lua.LState) Result {
		return func() ([]lua.LValue, error) {
			v, err := o.Result()
			vals, err := convert(L, v, err)
			if err != nil && o.Kind() == store.KindRedis && rt.svc.Observe.OpFailed != nil {
				rt.svc.Observe.OpFailed(name)
			}
			return vals, err
		}
	}
	switch o.Kind() {
	case store.KindLocal:
		_, _ = o.Do(rt.ctx)
		return rt.returnResult(L, name, res(L))
	case store.KindWork:
		return rt.Suspend(L, name, func(complete func(Result)) {
			rt.goWork(func() {
				_, _ = o.Do(rt.ctx)
				complete(res(rt.L))
			})
		})
	}
	switch rt.callMode(L) {
	case modeForbidden:
		rt.refuseBlock(L, name)
	case modeSync:
		_, _ = o.Do(rt.ctx)
		return rt.returnResult(L, name, res(L))
	}
	p := &op{rt: rt, name: name, L: L, task: rt.running, res: res(rt.L)}
	p.state.Store(opParked)
	rt.enqueue(p, o)
	rt.park(p)
	return L.Yield(rt.mark)
}

// Go runs o (a capability's operation) for Go code on the loop that does not
// wait for it, such as a watchdog renewal: done is called on the loop with
// the outcome. A Redis op joins this loop turn's pipeline. Loop only.
func Go[T any](rt *Runtime, o *store.Op[T], done func(T, error)) {
	switch o.Kind() {
	case store.KindLocal:
		done(o.Do(rt.ctx))
	case store.KindWork:
		rt.goWork(func() {
			v, err := o.Do(rt.ctx)
			rt.Post(func() { done(v, err) })
		})
	default:
		rt.enqueueFunc(o, func() { done(o.Result()) })
	}
}

// workerIdle is how long an idle worker waits for the next job before it exits.
const workerIdle = 5 * time.Second

// goWork runs job on one of the runtime's workers: long-lived goroutines
// that keep the stack a Redis call grew, instead of a new goroutine per call.
// An idle worker takes the job at once; otherwise a new worker starts.
func (rt *Runtime) goWork(job func()) {
	select {
	case rt.jobs <- job:
	default:
		go rt.worker(job)
	}
}

func (rt *Runtime) worker(job func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		job()
		idle.Reset(workerIdle)
		select {
		case job = <-rt.jobs:
		case <-idle.C:
			return
		case <-rt.done:
			return
		}
	}
}

// pushAll pushes vals and returns how many, as an LGFunction returns.
func pushAll(L *lua.LState, vals []lua.LValue) int {
	for _, v := range vals {
		L.Push(v)
	}
	return len(vals)
}
