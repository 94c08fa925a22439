package bindings

import (
	"context"

	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/store"
)

// lockLoop is the runtime's loop as core/lock sees it (lock.Loop): posts go
// to the loop, Redis operations join the loop turn's pipeline, work runs on
// the runtime's workers. While the loop waits in a blocking call outside any
// task (see Block), the session's posts go to that call, which runs them,
// and its Redis operations are sent at once.
type lockLoop struct{ rt *Runtime }

var _ lock.Loop = lockLoop{}

func (l lockLoop) Post(fn func()) { l.rt.postSide(fn) }

func (l lockLoop) Send(p store.Pending, done func()) {
	if l.rt.syncing.Load() == nil {
		l.rt.enqueueFunc(p, done)
		return
	}
	var b store.Batch
	b.Add(p)
	b.Exec(l.rt.ctx)
	l.rt.postSide(done)
}

func (l lockLoop) Go(fn func()) { l.rt.goWork(fn) }

func (l lockLoop) Context() context.Context { return l.rt.ctx }
