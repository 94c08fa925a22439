package bindings

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// The loop. One goroutine runs every posted function, resumes tasks, and at
// the end of each turn sends the Redis operations the turn's tasks issued as
// one pipeline (see Run). The replies of a batch come back as one post.

// batchItem is one Redis operation of a turn: the task call p it resumes, or
// done for Go code on the loop (Go).
type batchItem struct {
	o    store.Pending
	p    *op
	done func()
}

func (rt *Runtime) enqueue(p *op, o store.Pending) {
	rt.batch = append(rt.batch, batchItem{o: o, p: p})
}

func (rt *Runtime) enqueueFunc(o store.Pending, done func()) {
	rt.batch = append(rt.batch, batchItem{o: o, done: done})
}

// flush hands the turn's Redis operations to a worker, which sends them as
// one pipeline per client and posts all their completions at once.
func (rt *Runtime) flush() {
	if len(rt.batch) == 0 {
		return
	}
	items := rt.batch
	rt.batch = nil
	rt.inflight++
	rt.goWork(func() {
		var b store.Batch
		for _, it := range items {
			b.Add(it.o)
		}
		b.Exec(rt.ctx)
		rt.Post(func() {
			rt.inflight--
			for _, it := range items {
				if it.p != nil {
					rt.finishOp(it.p)
				} else {
					it.done()
				}
			}
		})
	})
}

// Post queues fn to run on the loop. It is safe from any goroutine; once
// the loop has stopped it is dropped.
func (rt *Runtime) Post(fn func()) {
	rt.mu.Lock()
	if rt.stopped {
		rt.mu.Unlock()
		return
	}
	rt.queue = append(rt.queue, fn)
	rt.mu.Unlock()
	select {
	case rt.wake <- struct{}{}:
	default:
	}
}

// postLocal queues fn for the next loop turn, from the loop itself: no
// lock, no wake-up.
func (rt *Runtime) postLocal(fn func()) { rt.local = append(rt.local, fn) }

func (rt *Runtime) loop() {
	defer close(rt.done)
	var spare []func()
	for {
		select {
		case <-rt.stop:
			return
		default:
		}
		rt.mu.Lock()
		posted := rt.queue
		rt.queue = spare[:0]
		rt.mu.Unlock()
		local := rt.local
		rt.local = nil
		if len(posted) == 0 && len(local) == 0 {
			rt.checkIdle()
			select {
			case <-rt.wake:
				spare = posted
				continue
			case <-rt.stop:
				return
			}
		}
		for i, fn := range posted {
			rt.runPosted(fn)
			posted[i] = nil
		}
		spare = posted
		for _, fn := range local {
			rt.runPosted(fn)
		}
		rt.flush()
		rt.checkIdle()
	}
}

func (rt *Runtime) runPosted(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			rt.log.Error("shield: panic on the runtime loop", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	fn()
}

// drain waits up to d for the Redis operations queued or in flight to be
// done — the releases of the locks the closers and the ended tasks let go —
// before Close cancels what is left.
func (rt *Runtime) drain(d time.Duration) {
	ch := make(chan struct{})
	rt.Post(func() { rt.drains = append(rt.drains, ch) })
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-rt.done:
	}
}

func (rt *Runtime) checkIdle() {
	if len(rt.drains) > 0 && rt.inflight == 0 && len(rt.batch) == 0 {
		for _, c := range rt.drains {
			close(c)
		}
		rt.drains = nil
	}
	if len(rt.idle) == 0 || len(rt.threads) > len(rt.spareThreads) || rt.keepalive > 0 || rt.inflight > 0 {
		return
	}
	for _, c := range rt.idle {
		close(c)
	}
	rt.idle = nil
}
