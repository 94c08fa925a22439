package runtime

import (
	"context"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Loop is the runtime's loop as a core session sees it (store.Loop, which
// lock.Session and queue.Leases take): posts go to the loop, Redis
// operations join the loop turn's pipeline, work runs on the runtime's
// workers. While the loop waits in a blocking call outside any task (see
// Block), the session's posts go to that call, which runs them, and its
// Redis operations are sent at once.
type Loop struct{ rt *Runtime }

// Loop is rt's loop for a core session.
func (rt *Runtime) Loop() Loop { return Loop{rt} }

// Post runs fn on the loop, later (in the call the loop waits in outside
// any task, if any). Safe from any goroutine.
func (l Loop) Post(fn func()) { l.rt.postSide(fn) }

// Send queues p into this loop turn's pipeline; done runs on the loop once
// p has settled. Loop only.
func (l Loop) Send(p store.Pending, done func()) {
	if l.rt.syncing.Load() == nil {
		l.rt.enqueueFunc(p, done)
		return
	}
	var b store.Batch
	b.Add(p)
	b.Exec(l.rt.ctx)
	l.rt.postSide(done)
}

// Go runs fn on one of the runtime's workers (fn may wait on the network).
func (l Loop) Go(fn func()) { l.rt.goWork(fn) }

// Context ends when the runtime stops or its module closes.
func (l Loop) Context() context.Context { return l.rt.ctx }
