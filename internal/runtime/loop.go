package runtime

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// The loop.
//
// The loop is a role, not a goroutine: at most one goroutine at a time
// holds it (rt.owned) and only that goroutine touches the Lua state. The
// holder runs every posted function, resumes tasks, and at the end of each
// turn collects the Redis operations the turn's tasks issued into one
// pipeline (see Run). It never waits on the network while it holds the
// role: when a turn leaves work queued, the turn's pipeline goes to a
// worker; when the turn was the last, the holder releases the role and
// sends the pipeline itself, then takes the role back to run the
// completions — unless another goroutine took it meanwhile, which then runs
// them. So one task doing Redis calls runs on one goroutine with no
// hand-off at all, and the replies of a batch come back as one post.

// batchItem is one Redis operation of a turn: the task call p it resumes, or
// done for Go code on the loop (Go).
type batchItem struct {
	o    store.Pending
	p    *Wait
	done func()
}

func (rt *Runtime) enqueue(p *Wait, o store.Pending) {
	rt.batch = append(rt.batch, batchItem{o: o, p: p})
	if len(rt.batch) >= flushAt {
		rt.flush()
	}
}

func (rt *Runtime) enqueueFunc(o store.Pending, done func()) {
	rt.batch = append(rt.batch, batchItem{o: o, done: done})
	if len(rt.batch) >= flushAt {
		rt.flush()
	}
}

// flushAt is how many operations a turn collects before it sends them
// while it goes on. A turn that resumes many tasks then has several
// pipelines in flight: Redis works through the first while the loop runs
// the tasks that fill the next, instead of the two taking turns (with 32
// tasks doing lock pairs, 1.4x the throughput of one pipeline per turn).
// Smaller pipelines cost more syscalls and wake-ups per operation.
const flushAt = 16

// flush sends the operations queued so far from a worker, while the turn
// goes on. Loop only.
func (rt *Runtime) flush() {
	items := rt.batch
	rt.batch = nil
	rt.inflight++
	rt.goWork(func() {
		if done := rt.send(items); rt.acquire(done) {
			rt.drive()
		}
	})
}

// Post queues fn to run on the loop. It is safe from any goroutine; once
// the runtime has stopped it is dropped (see TryPost).
func (rt *Runtime) Post(fn func()) { rt.TryPost(fn) }

// TryPost is Post that reports whether fn was queued: false once the
// runtime has stopped, when fn will never run.
func (rt *Runtime) TryPost(fn func()) bool {
	rt.mu.Lock()
	stopped := rt.stopped
	rt.mu.Unlock()
	if stopped {
		return false
	}
	if rt.acquire(fn) {
		rt.goWork(rt.drive)
	}
	return true
}

// postLocal queues fn for the next loop turn, from the loop itself: no
// lock, no wake-up.
func (rt *Runtime) postLocal(fn func()) { rt.local = append(rt.local, fn) }

// acquire queues fn and reports whether the caller now holds the loop role
// (nobody did) and must run it (drive).
func (rt *Runtime) acquire(fn func()) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.stopped {
		return false
	}
	rt.queue = append(rt.queue, fn)
	rt.posts++
	if rt.owned {
		return false
	}
	rt.owned = true
	return true
}

// drive runs the loop on the calling goroutine, which holds the role, until
// nothing is queued; each time the last turn leaves a pipeline it sends it
// here, without the role, and takes the role back for its completions.
func (rt *Runtime) drive() {
	for {
		items := rt.turns()
		if items == nil {
			return
		}
		done := rt.send(items)
		if !rt.acquire(done) {
			return // another goroutine holds the loop: it runs done
		}
	}
}

// turns runs loop turns while work is queued, then releases the role and
// returns the last turn's Redis operations (nil if it issued none).
func (rt *Runtime) turns() []batchItem {
	var last []batchItem
	for {
		rt.mu.Lock()
		posted := rt.queue
		rt.queue = rt.spare[:0]
		rt.spare = nil
		local := rt.local
		rt.local = nil
		if len(posted) == 0 && len(local) == 0 {
			rt.owned = false
			rt.spare = posted
			stopped := rt.stopped
			rt.mu.Unlock()
			if stopped {
				rt.stopOnce.Do(func() { close(rt.done) })
			}
			return last
		}
		rt.mu.Unlock()
		if last != nil { // more work: that turn's pipeline goes out from a worker
			items := last
			rt.goWork(func() {
				if done := rt.send(items); rt.acquire(done) {
					rt.drive()
				}
			})
			last = nil
		}
		// The loop's own posts first: the tasks spawned (and the yields
		// and zero sleeps) of the turns before start before any callback
		// another goroutine posted meanwhile, so a task spawned before its
		// spawner sleeps runs before the spawner's timer resumes it, and
		// before Redis replies resume anyone, however late this turn is.
		for _, fn := range local {
			rt.runPosted(fn)
		}
		for i, fn := range posted {
			rt.runPosted(fn)
			posted[i] = nil
		}
		rt.mu.Lock()
		if rt.spare == nil {
			rt.spare = posted[:0]
		}
		rt.mu.Unlock()
		if len(rt.batch) > 0 {
			last, rt.batch = rt.batch, nil
			rt.inflight++
			rt.sending.Add(1)
		}
		rt.checkIdle()
	}
}

// send runs a turn's Redis operations as one pipeline per client (off the
// loop) and returns the loop function that completes them all.
func (rt *Runtime) send(items []batchItem) func() {
	var b store.Batch
	for _, it := range items {
		b.Add(it.o)
	}
	b.Exec(rt.ctx)
	return func() {
		rt.sending.Add(-1)
		rt.inflight--
		for _, it := range items {
			if it.p != nil {
				rt.finishOp(it.p)
			} else {
				it.done()
			}
		}
	}
}

// Quiet reports whether the loop has nothing to do — no task runnable,
// nothing posted, no operation of it being sent — and how many functions
// were posted so far: the same count later, still quiet, means nothing
// happened in between. Every task is then parked (or there is none). The
// spec runner's virtual time jumps the clock only then.
func (rt *Runtime) Quiet() (posts uint64, quiet bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.posts, !rt.owned && rt.sending.Load() == 0 && len(rt.queue) == 0
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
	if !rt.TryPost(func() { rt.drains = append(rt.drains, ch); rt.checkIdle() }) {
		return
	}
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
	if len(rt.idle) == 0 || len(rt.threads) > len(rt.spareThreads) || rt.starting > 0 || rt.keepalive > 0 || rt.inflight > 0 {
		return
	}
	for _, c := range rt.idle {
		close(c)
	}
	rt.idle = nil
}
