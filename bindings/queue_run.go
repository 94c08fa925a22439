package bindings

import (
	"errors"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// values is conv's usual outcome: vals, no error.
func values(vals ...lua.LValue) ([]lua.LValue, error) { return vals, nil }

// reason is conv's "nil, reason" outcome.
func reason(why string) ([]lua.LValue, error) { return []lua.LValue{lua.LNil, lua.LString(why)}, nil }

// popKind is what a pop of one kind needs besides the waiter: the first
// non-blocking attempt, how to give back a message whose task is gone (the
// core's one give back: Unpop, or a reliable delivery's Release), and how
// to turn a message into Lua values (on the loop).
type popKind[T any] struct {
	first    func() *store.Op[T]
	w        queue.Waiter[T]
	giveBack func(v T)
	convert  func(L *lua.LState, task *runtime.Task, v T) ([]lua.LValue, error)
}

// popState is one pop between its start and the moment its task has the
// message. Whoever learns last that the task is gone gives the message back:
// the delivery (any goroutine) or the task-end cleanup (loop).
type popState[T any] struct {
	task   *runtime.Task // nil outside tasks
	cancel func() bool   // the pending PopWait, if any; loop only
	mu     sync.Mutex    // guards the fields below
	v      T             // a message delivered and not yet taken by the task
	have   bool
	taken  bool
	ended  bool // the task ended (or the runtime closed it) before taking it
}

// pop runs a pop of up to timeout (0: one non-blocking attempt). On Redis
// it first pops in this turn's pipeline and only waits (the backend's
// PopWait) when that found nothing; on memory PopWait answers inline when a
// message is there. Results: the converted message; nil (nothing, no
// timeout); nil, "timeout". A task that ends while waiting withdraws its
// wait, and a message that reached it too late goes back (see giveBack).
func pop[T any](o *queueObj, L *lua.LState, name string, timeout time.Duration, k popKind[T]) int {
	rt := o.b.rt
	if timeout <= 0 && o.b.svc.Inline {
		// One attempt that completes here (a local op): nothing to give back.
		st := &popState[T]{task: rt.CurrentTask(L)}
		v, err := k.first().Do(rt.Context())
		vals, err := st.result(rt, k, v, err)
		if err != nil {
			runtime.Raise(L, "%s: %s", name, err.Error())
		}
		return runtime.PushAll(L, vals)
	}
	return rt.Block(L, name, func(w *runtime.Wait) func() {
		st := &popState[T]{task: w.Task()}
		deadline := rt.Clock().Now().Add(timeout)
		deliver := func(v T, err error) { // any goroutine, once
			st.mu.Lock()
			if st.ended {
				st.mu.Unlock()
				if err == nil {
					k.giveBack(v)
				}
				return
			}
			st.v, st.have = v, err == nil
			st.mu.Unlock()
			w.Complete(func() ([]lua.LValue, error) { return st.result(rt, k, v, err) })
		}
		if timeout > 0 {
			w.EndOnClose() // the runtime closes: end the wait now, not at its timeout
		}
		wait := func(d time.Duration) { st.cancel = k.w.PopWait(d, deliver) }
		if o.b.svc.Inline {
			wait(timeout)
			return st.giveUp(k)
		}
		// The first pop shares the loop turn's pipeline, whose deadline
		// is the client's (global.redis.read_timeout), not this pop's:
		// a Redis that does not answer must not hold the task past its
		// timeout, so a timer ends the wait at the deadline with the
		// error, and a reply that comes after it goes back.
		gaveUp, answered := false, false                 // loop only
		runtime.Go(rt, k.first(), func(v T, err error) { // on the loop
			answered = true
			switch {
			case gaveUp:
				if err == nil {
					k.giveBack(v)
				}
			case err == nil || timeout <= 0 || errors.Is(err, queue.ErrClosed):
				deliver(v, err)
			case deadline.Sub(rt.Clock().Now()) <= 0:
				if errors.Is(err, queue.ErrEmpty) {
					err = queue.ErrTimeout
				}
				deliver(v, err) // the queue was empty, or Redis failed
			default: // empty, or Redis trouble: the backend's wait retries
				st.mu.Lock()
				ended := st.ended
				st.mu.Unlock()
				if ended {
					return
				}
				if !errors.Is(err, store.ErrNoAnswer) {
					wait(deadline.Sub(rt.Clock().Now()))
					return
				}
				// Redis already let this pop go unanswered for the
				// client's whole deadline: a wait that ends without a
				// message says so, even if the notifier's own pop has
				// been in flight for less than queue.NoAnswerAfter.
				st.cancel = k.w.PopWait(deadline.Sub(rt.Clock().Now()), func(v T, werr error) {
					if errors.Is(werr, queue.ErrTimeout) {
						werr = err
					}
					deliver(v, werr)
				})
			}
		})
		if timeout > 0 {
			w.After(timeout, func() {
				if answered {
					return
				}
				gaveUp = true
				var zero T
				deliver(zero, queue.Unanswered(o.name, timeout))
			})
		}
		return st.giveUp(k)
	})
}

// result runs on the loop when the task takes the outcome.
func (st *popState[T]) result(rt *runtime.Runtime, k popKind[T], v T, err error) ([]lua.LValue, error) {
	st.mu.Lock()
	st.taken = true
	st.mu.Unlock()
	switch {
	case err == nil:
		return k.convert(rt.L, st.task, v)
	case errors.Is(err, queue.ErrEmpty):
		return values(lua.LNil)
	case errors.Is(err, queue.ErrTimeout):
		return reason("timeout")
	case errors.Is(err, queue.ErrClosed):
		return nil, runtime.ErrClosing
	}
	return nil, err
}

// giveUp is the pop's cancel (see Block): the task will not take the
// outcome, so the wait is withdrawn, and a message that reached it goes
// back.
func (st *popState[T]) giveUp(k popKind[T]) func() {
	return func() {
		if st.cancel != nil && st.cancel() {
			return // withdrawn: the backend keeps the message
		}
		st.mu.Lock()
		st.ended = true
		v, give := st.v, st.have && !st.taken
		st.mu.Unlock()
		if give {
			k.giveBack(v)
		}
	}
}
