package bindings

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// Result produces a blocking call's Lua results on the loop, or its error.
type Result func() ([]lua.LValue, error)

// op is one blocking call in flight: a value the loop keeps until its
// completion arrives, then resumes the task that issued it.
type op struct {
	rt       *Runtime
	name     string
	L        *lua.LState // the thread that made the call (the task or a coroutine of it)
	task     *Task       // set by the loop when the task's yield reaches it
	sync     chan Result // non-nil when the caller blocks the loop instead of yielding
	complete atomic.Bool
}

// Complete delivers the call's result. Safe from any goroutine; only the
// first call counts.
func (o *op) Complete(r Result) {
	if !o.complete.CompareAndSwap(false, true) {
		return
	}
	if o.sync != nil {
		o.sync <- r
		return
	}
	o.rt.Post(func() { o.rt.finishOp(o, r) })
}

func (rt *Runtime) finishOp(o *op, r Result) {
	if o.task == nil || rt.tasks[o.task.co] != o.task {
		return // the task is gone (runtime closing)
	}
	vals, err := r()
	if err != nil {
		rt.resume(o.task, rt.fail, lua.LString(userWhere(o.L)+o.name+": "+err.Error()))
		return
	}
	rt.resume(o.task, vals...)
}

// mode says how a blocking call may wait where it was made.
type mode int

const (
	modeYield     mode = iota // inside a task: suspend the task
	modeSync                  // outside any task (host code on the main thread): block the loop
	modeForbidden             // inside a metamethod, iterator, sort comparator, require...: cannot yield
)

// Suspend makes the calling Lua function wait for an operation started by
// start, which must eventually call complete exactly once (from any
// goroutine). name is the call as users write it ("shield.sleep"); it
// prefixes errors. An LGFunction returns Suspend's result directly.
//
// Inside a task the task yields and the loop resumes it with the results;
// outside any task the loop itself waits; where gopher-lua cannot yield
// (metamethods, iterators, table.sort comparators, string.gsub callbacks, the
// top level of a module being required, Lua called from Go) a Lua error names
// the call instead of corrupting the state.
func (rt *Runtime) Suspend(L *lua.LState, name string, start func(complete func(Result))) int {
	o := &op{rt: rt, name: name, L: L}
	switch callMode(L) {
	case modeForbidden:
		raise(L, "%s: cannot block here: a blocking call must not run inside a metamethod, a for-in iterator, "+
			"a table.sort comparator, a string.gsub callback, the top level of a required module, or Lua called from Go", name)
	case modeSync:
		o.sync = make(chan Result, 1)
		start(o.Complete)
		vals, err := (<-o.sync)()
		if err != nil {
			raise(L, "%s: %s", name, err.Error())
		}
		return pushAll(L, vals)
	}
	start(o.Complete)
	return L.Yield(rt.mark, &lua.LUserData{Value: o})
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

// Call is Await for a backend that may do no I/O: when inline is true (the
// memory backend) work runs right here without yielding, otherwise off the
// loop. Errors read the same either way: "<name>: <error>" at the caller's line.
func (rt *Runtime) Call(L *lua.LState, name string, inline bool, work func(ctx context.Context) (any, error), convert func(L *lua.LState, v any) []lua.LValue) int {
	if !inline {
		return rt.Await(L, name, work, convert)
	}
	v, err := work(rt.ctx)
	if err != nil {
		raise(L, "%s: %s", name, err.Error())
	}
	return pushAll(L, convert(L, v))
}

// pushAll pushes vals and returns how many, as an LGFunction returns.
func pushAll(L *lua.LState, vals []lua.LValue) int {
	for _, v := range vals {
		L.Push(v)
	}
	return len(vals)
}

const (
	fnMainLoop   = "github.com/yuin/gopher-lua.mainLoop"
	fnMainLoopCx = "github.com/yuin/gopher-lua.mainLoopWithContext"
	fnThreadRun  = "github.com/yuin/gopher-lua.threadRun" // entered once per coroutine resume (Resume and coroutine.resume)
	fnRtResume   = "github.com/shieldrt/shieldglobal/bindings.(*Runtime).guardedResume"
)

// callMode walks the Go stack: a yield reaches the task only if every
// coroutine between the caller and the runtime's own Resume runs exactly one
// gopher-lua main loop (a second one means Go re-entered the VM: L.Call from a
// metamethod, iterator, sort, gsub or require). Pinned to gopher-lua v1.1.2
// by TestCallModeContexts.
func callMode(L *lua.LState) mode {
	if L.Parent == nil {
		return modeSync
	}
	var pcs [256]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	loops := 0
	for {
		f, more := frames.Next()
		switch f.Function {
		case fnMainLoop, fnMainLoopCx:
			loops++
		case fnThreadRun:
			if loops != 1 {
				return modeForbidden
			}
			loops = 0
		case fnRtResume:
			return modeYield
		}
		if !more {
			break
		}
	}
	if loops > 1 {
		return modeForbidden
	}
	return modeSync
}

// traceback renders L's Lua stack like debug.traceback, leaving out the
// runtime's own frames.
func traceback(L *lua.LState) string {
	var frames []*lua.Debug
	for level := 0; ; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			break
		}
		if _, err := L.GetInfo("Sln", dbg, lua.LNil); err != nil {
			break
		}
		frames = append(frames, dbg)
	}
	var b strings.Builder
	b.WriteString("stack traceback:")
	for i, dbg := range frames {
		calledByRuntime := i+1 < len(frames) && isRuntimeSource(frames[i+1].Source)
		if isRuntimeSource(dbg.Source) || (dbg.What == "G" && calledByRuntime) {
			continue
		}
		b.WriteString("\n\t")
		if dbg.What == "G" {
			b.WriteString("[G]: in ")
		} else {
			b.WriteString(dbg.Source)
			if dbg.CurrentLine > 0 {
				b.WriteString(":" + itoa(dbg.CurrentLine))
			}
			b.WriteString(": in ")
		}
		// A function the runtime called (a task body, a callback) has only the
		// runtime's name for it: show where it was defined instead.
		switch {
		case dbg.What != "G" && dbg.LineDefined == 0:
			b.WriteString("main chunk")
		case dbg.Name != "" && !calledByRuntime:
			b.WriteString("function '" + dbg.Name + "'")
		default:
			b.WriteString("function <" + dbg.Source + ":" + itoa(dbg.LineDefined) + ">")
		}
	}
	return b.String()
}
