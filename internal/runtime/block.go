package runtime

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/store"
	iclock "github.com/shieldrt/shieldglobal/internal/clock"
)

// Result produces a blocking call's Lua results on the loop, or its error.
type Result func() ([]lua.LValue, error)

// Wait is one blocking call in flight (see Block): a value the loop keeps
// until its completion arrives, then resumes the task that made the call.
// While it is pending, the threads between the caller and the task are
// parked: no script may resume them (see busy). It is the waiting
// coroutine's one cleanup slot: the runtime calls the call's cancel when the
// task will not take its result (the task ended, was interrupted, or the
// runtime closed), and stops its timer.
type Wait struct {
	rt    *Runtime
	name  string
	L     *lua.LState   // the thread that made the call (the task's or a coroutine of it)
	task  *Task         // the task the call suspends (nil outside tasks)
	chain []*lua.LState // coroutines of the task parked by the call (nil when L is the task's thread)
	res   Result

	cancel  func()       // what start returned; called at most once, on the loop
	timer   iclock.Timer // After's; stopped when the call is over
	onClose bool         // EndOnClose
	gone    bool         // the task will not take the result (abandon); loop only
	sync    *syncWait    // the synchronous wait outside tasks, if that is how it waits

	once  atomic.Bool
	state atomic.Uint32
}

const (
	opStarting uint32 = iota // the call has not yielded yet
	opParked                 // the task yielded; the completion resumes it
	opSyncing                // the loop waits for the completion itself (outside tasks)
	opRefused                // it could not complete at once where it may not wait
	opDone                   // completed
)

// Complete delivers the call's result. Safe from any goroutine; only the
// first call counts. A completion that arrives before the call yielded is
// returned inline, without yielding at all.
func (w *Wait) Complete(r Result) {
	if !w.once.CompareAndSwap(false, true) {
		return
	}
	w.res = r
	switch w.state.Swap(opDone) {
	case opParked:
		w.rt.Post(func() { w.rt.finishOp(w) })
	case opSyncing:
		w.sync.wake()
	}
}

// Post runs fn on the loop later, for the call's own work (a timer that
// fired, a callback of the capability); fn must not run Lua. Safe from any
// goroutine. While the call waits outside any task, the waiting call runs
// it.
func (w *Wait) Post(fn func()) { w.rt.postSide(fn) }

// After runs fn on the loop after d (d <= 0: on the next loop turn, after
// the tasks spawned before it started) unless the call is over by then: the
// runtime stops the timer when the call completes, its task ends or the
// runtime closes. One timer per call: After replaces the previous one.
// Loop only.
func (w *Wait) After(d time.Duration, fn func()) {
	w.stopTimer()
	if !w.live() {
		return
	}
	run := func() {
		if w.live() {
			fn()
		}
	}
	if d <= 0 {
		w.rt.postSoon(run)
		return
	}
	w.timer = w.rt.Clock().AfterFunc(d, func() { w.Post(run) })
}

// EndOnClose makes the call end with "the runtime is closing" when the
// runtime closes (its cancel is called): for waits with no end of their own
// (shield.sleep(math.huge)) or that must not hold up a shutdown (a queue
// pop, a limiter wait). Loop only.
func (w *Wait) EndOnClose() { w.onClose = true }

// Task is the task the call suspends, nil outside tasks.
func (w *Wait) Task() *Task { return w.task }

// live reports whether the call still waits for its work. Loop only.
func (w *Wait) live() bool {
	st := w.state.Load()
	return !w.gone && st != opDone && st != opRefused
}

func (w *Wait) stopTimer() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// abandon runs when the call's task ended while it waited: the task will
// not take the result. Loop only.
func (w *Wait) abandon() {
	w.gone = true
	w.stopTimer()
	if c := w.cancel; c != nil {
		w.cancel = nil
		c()
	}
}

// endWith ends the call with err unless its own result is already on the
// way (the task then takes that). Loop only.
func (w *Wait) endWith(err error) {
	if !w.once.CompareAndSwap(false, true) {
		return
	}
	w.res = func() ([]lua.LValue, error) { return nil, err }
	w.abandon()
	switch w.state.Swap(opDone) {
	case opParked:
		w.rt.Post(func() { w.rt.finishOp(w) })
	case opSyncing:
		w.sync.wake()
	}
}

// finishOp resumes the task w suspended with w's result. Loop only.
func (rt *Runtime) finishOp(w *Wait) {
	t := w.task
	if t.ended || t.waiting != w {
		return // the task is gone (interrupted, or the runtime closing)
	}
	rt.unpark(w)
	w.stopTimer()
	w.cancel = nil
	vals, err := w.res()
	if err != nil {
		// A call the closing runtime ended ends its task without counting
		// as a failure of the script.
		t.closed = errors.Is(err, ErrClosing)
		rt.resume(t, rt.fail, lua.LString(opWhere(w)+w.name+": "+err.Error()))
		return
	}
	rt.resume(t, vals...)
}

// endWaits ends the pending calls that end when the runtime closes
// (EndOnClose). Loop only.
func (rt *Runtime) endWaits() {
	for _, t := range rt.threads {
		if t != nil && t.waiting != nil && t.waiting.onClose {
			t.waiting.endWith(ErrClosing)
		}
	}
}

func (rt *Runtime) park(w *Wait) {
	w.task.waiting = w
	for th := w.L; th != nil && th != w.task.co; th = th.Parent {
		w.chain = append(w.chain, th)
		rt.parked[th] = w
	}
}

func (rt *Runtime) unpark(w *Wait) {
	w.task.waiting = nil
	for _, th := range w.chain {
		delete(rt.parked, th)
	}
}

// syncWait is a call that waits outside any task: the loop itself waits in
// it, running the posts of the calls' own work (Wait.Post, a lock
// session's posts) until the completion comes. Nothing that runs Lua runs
// meanwhile.
type syncWait struct {
	mu     sync.Mutex
	queue  []func()
	over   bool
	signal chan struct{}
}

func (s *syncWait) wake() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

func (s *syncWait) push(fn func()) bool {
	s.mu.Lock()
	if s.over {
		s.mu.Unlock()
		return false
	}
	s.queue = append(s.queue, fn)
	s.mu.Unlock()
	s.wake()
	return true
}

func (s *syncWait) take() []func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	fns := s.queue
	s.queue = nil
	return fns
}

func (s *syncWait) end() []func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.over = true
	fns := s.queue
	s.queue = nil
	return fns
}

// postSide posts work of a blocking call that runs no Lua: while a call
// waits outside any task it goes to that call, else to the loop. Safe from
// any goroutine.
func (rt *Runtime) postSide(fn func()) {
	if s := rt.syncing.Load(); s != nil && s.push(fn) {
		return
	}
	rt.Post(fn)
}

// postSoon runs fn on the next loop turn (see postLocal), or in the call
// that waits outside any task. Loop only.
func (rt *Runtime) postSoon(fn func()) {
	if s := rt.syncing.Load(); s != nil && s.push(fn) {
		return
	}
	rt.postLocal(fn)
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
// coroutine.resume or pcall, which pass the yield up. Outside any task,
// only Lua the host runs on the main thread (Runtime.Do), or in coroutines
// resumed from it, may wait synchronously. A thread Go runs by itself — the
// thread gopher-luar calls a Lua function on when Go calls it — or the main
// thread while a task runs is Lua called from Go: it may not block at all
// (it would wait with the loop held, and a wait for another task of the
// state, such as a lock it holds, would never end).
func (rt *Runtime) callMode(L *lua.LState) mode {
	if rt.running == nil {
		for th := L; th != nil; th = th.Parent {
			if th == rt.L {
				return modeSync
			}
		}
		return modeForbidden
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
			return modeForbidden // a coroutine Go resumed from the main thread
		case nil:
			return modeForbidden // Lua called from Go on a thread of its own
		}
	}
}

const cannotBlock = "cannot block here: a blocking call must not run inside a metamethod, a for-in iterator, " +
	"a table.sort comparator, a string.gsub callback, the top level of a required module, or Lua called from Go"

// Block is the one blocking primitive: it makes the calling Lua function
// wait for work that start starts (an LGFunction returns Block's result
// directly). start calls w.Complete once the work is done (from any
// goroutine; only the first call counts) and returns a cancel (nil: nothing
// to give up), which the runtime calls, on the loop, when the task will not
// take the result: it ended or was interrupted while it waited, the runtime
// closed (EndOnClose), or the call was refused. cancel stops the work and
// gives back what it already produced. name is the call as users write it
// ("shield.sleep"); it prefixes errors.
//
// The runtime alone decides how the caller waits. A call that completes
// inside start returns at once, everywhere. Otherwise: inside a task the
// task yields and the loop resumes it with the result; outside any task
// (host code on the main thread, see callMode) the loop itself waits,
// running only the calls' own posts (Wait.Post); where gopher-lua cannot
// yield (a metamethod, Lua called from Go, ...) the call is cancelled and
// raises "cannot block here" — a Redis operation is then not even sent
// (see Go).
func (rt *Runtime) Block(L *lua.LState, name string, start func(w *Wait) (cancel func())) int {
	w := &Wait{rt: rt, name: name, L: L, task: rt.running}
	switch rt.callMode(L) {
	case modeYield:
		w.cancel = start(w)
		if !w.state.CompareAndSwap(opStarting, opParked) {
			w.stopTimer()
			return rt.returnResult(L, name, w.res) // done already: no yield
		}
		rt.park(w)
		return L.Yield(rt.mark)
	case modeSync:
		return rt.blockSync(L, w, start)
	}
	prev := rt.atOnce
	rt.atOnce = w
	defer func() { rt.atOnce = prev }()
	cancel := start(w)
	rt.atOnce = prev
	if w.state.CompareAndSwap(opStarting, opRefused) {
		w.cancel = cancel
		w.abandon()
		rt.refuseBlock(L, name)
	}
	w.stopTimer()
	return rt.returnResult(L, name, w.res)
}

// blockSync is Block outside any task: the loop waits for the completion,
// running the call's own posts meanwhile. Loop only.
func (rt *Runtime) blockSync(L *lua.LState, w *Wait, start func(w *Wait) func()) int {
	s := &syncWait{signal: make(chan struct{}, 1)}
	w.sync = s
	prev := rt.syncing.Swap(s)
	defer func() {
		rt.syncing.Store(prev)
		for _, fn := range s.end() {
			rt.postSide(fn)
		}
	}()
	w.cancel = start(w)
	if w.state.CompareAndSwap(opStarting, opSyncing) {
		for w.state.Load() != opDone {
			fns := s.take()
			for _, fn := range fns {
				rt.runPosted(fn)
			}
			if len(fns) > 0 {
				continue
			}
			select {
			case <-s.signal:
			case <-rt.ctx.Done():
				w.endWith(ErrClosing)
			}
		}
	}
	w.stopTimer()
	w.cancel = nil
	return rt.returnResult(L, w.name, w.res)
}

func (rt *Runtime) refuseBlock(L *lua.LState, name string) {
	if frameLayoutErr != nil {
		Raise(L, "%s: cannot block: %v (shield_global supports gopher-lua v1.1.2)", name, frameLayoutErr)
	}
	Raise(L, "%s: %s", name, cannotBlock)
}

func (rt *Runtime) returnResult(L *lua.LState, name string, r Result) int {
	vals, err := r()
	if err != nil {
		Raise(L, "%s: %s", name, err.Error())
	}
	return PushAll(L, vals)
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
		return rt.Block(L, name, func(w *Wait) func() {
			Go(rt, o, func(T, error) { w.Complete(res(rt.L)) })
			return nil
		})
	}
	switch rt.callMode(L) {
	case modeForbidden:
		rt.refuseBlock(L, name)
	case modeSync:
		_, _ = o.Do(rt.ctx)
		return rt.returnResult(L, name, res(L))
	}
	p := &Wait{rt: rt, name: name, L: L, task: rt.running, res: res(rt.L)}
	p.state.Store(opParked)
	rt.enqueue(p, o)
	rt.park(p)
	return L.Yield(rt.mark)
}

// refuseAtOnce raises "cannot block here" when the call being started may
// not wait (see Block): it cannot wait for Redis or for work off the loop,
// so it is refused before anything starts. Loop only.
func (rt *Runtime) refuseAtOnce() {
	if w := rt.atOnce; w != nil {
		rt.atOnce = nil
		rt.refuseBlock(w.L, w.name)
	}
}

// Go runs o (a capability's operation) for Go code on the loop that does not
// wait for it, such as a watchdog renewal: done is called on the loop with
// the outcome. A Redis op joins this loop turn's pipeline. Loop only.
func Go[T any](rt *Runtime, o *store.Op[T], done func(T, error)) {
	if o.Kind() == store.KindLocal {
		done(o.Do(rt.ctx))
		return
	}
	rt.refuseAtOnce()
	if o.Kind() == store.KindWork || rt.syncing.Load() != nil {
		// The loop waits in a call outside any task: no loop turn sends
		// a batch meanwhile.
		rt.goWork(func() {
			v, err := o.Do(rt.ctx)
			rt.postSide(func() { done(v, err) })
		})
		return
	}
	rt.enqueueFunc(o, func() { done(o.Result()) })
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

// PushAll pushes vals and returns how many, as an LGFunction returns.
func PushAll(L *lua.LState, vals []lua.LValue) int {
	for _, v := range vals {
		L.Push(v)
	}
	return len(vals)
}
