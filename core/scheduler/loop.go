package scheduler

import (
	"context"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// The loop: one goroutine owns every task, run and timer. Everything else
// — the Clock timer, done callbacks, Store replies, control messages, API
// calls — posts a function to the inbox and the loop runs it.

// post queues fn for the loop; it never blocks. It returns false once the
// engine has stopped (fn is dropped).
func (e *Engine) post(fn func()) bool {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return false
	}
	e.inbox = append(e.inbox, fn)
	e.mu.Unlock()
	e.signal()
	return true
}

// signal wakes the loop.
func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// call runs fn on the loop and waits for it. It returns ErrClosed when the
// engine stopped before running fn.
func (e *Engine) call(fn func()) error {
	ran := make(chan struct{})
	if !e.post(func() { fn(); close(ran) }) {
		return ErrClosed
	}
	select {
	case <-ran:
		return nil
	case <-e.loopDone:
		select {
		case <-ran:
			return nil
		default:
			return ErrClosed
		}
	}
}

func (e *Engine) loop() {
	defer close(e.loopDone)
	var msgs []func()
	for {
		select {
		case <-e.wake:
		case <-e.quit:
			return
		}
		e.mu.Lock()
		msgs, e.inbox = e.inbox, msgs[:0]
		e.mu.Unlock()
		for i, fn := range msgs {
			fn()
			msgs[i] = nil
		}
		e.runDue()
		e.flushIO()
		e.arm()
		if e.closing && e.idle() && e.idleCh != nil {
			close(e.idleCh)
			e.idleCh = nil
		}
	}
}

// nowNs is the local clock in Unix ns.
func (e *Engine) nowNs() int64 { return e.clock.Now().UnixNano() }

// runDue handles every item that is due.
func (e *Engine) runDue() {
	now := e.nowNs()
	for {
		it := e.heap.top()
		if it == nil || it.at > now {
			return
		}
		e.heap.pop()
		e.handle(it, now)
	}
}

// maxSleep bounds one timer so that a wall-clock step (NTP) is noticed
// within a second.
const maxSleep = time.Second

// arm sets the Clock timer for the earliest item.
func (e *Engine) arm() {
	it := e.heap.top()
	if it == nil {
		if e.timer != nil {
			e.timer.Stop()
			e.timer, e.timerAt = nil, 0
		}
		return
	}
	at := it.at
	if d := time.Duration(at - e.nowNs()); d > maxSleep {
		at = e.nowNs() + int64(maxSleep)
	}
	if e.timer != nil && e.timerAt <= at && e.timerAt > e.nowNs() {
		return // an earlier (or equal) wake is already armed
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	e.timerAt = at
	e.timer = e.clock.AfterFunc(time.Duration(at-e.nowNs()), e.signal)
}

// schedule puts it on the heap at local time at (ns).
func (e *Engine) schedule(it *item, at int64) {
	e.heap.remove(it)
	it.at = at
	e.heap.push(it)
}

// ioOp is a queued Redis operation and what to do with its result.
type ioOp struct {
	p    store.Pending
	done func(t0, t1 time.Time)
}

// ioBatch is what an I/O worker sends in one round trip.
type ioBatch struct {
	ops []ioOp
}

// maxBatch bounds the operations of one round trip.
const maxBatch = 512

// ioTimeout bounds one round trip of the engine's own operations.
const ioTimeout = 5 * time.Second

// submit runs s and calls done on the loop with its result and the local
// times it was sent and answered. In-process steps run at once; Redis ones
// are batched, several tasks' operations per round trip.
func submit[T any](e *Engine, s step[T], done func(v T, err error, t0, t1 time.Time)) {
	if s.local != nil {
		t := e.clock.Now()
		v, err := s.local()
		done(v, err, t, t)
		return
	}
	op := store.Commands(s.c, s.decode, s.cmds...)
	e.io = append(e.io, ioOp{p: op, done: func(t0, t1 time.Time) {
		v, err := op.Result()
		done(v, err, t0, t1)
	}})
}

// flushIO hands queued operations to idle workers.
func (e *Engine) flushIO() {
	for len(e.io) > 0 && e.inflight < cap(e.batches) {
		n := min(len(e.io), maxBatch)
		b := &ioBatch{ops: make([]ioOp, n)}
		copy(b.ops, e.io)
		e.io = append(e.io[:0], e.io[n:]...)
		e.inflight++
		e.batches <- b
	}
}

// ioWorker sends batches until the channel closes.
func (e *Engine) ioWorker() {
	defer e.workers.Done()
	var batch store.Batch
	for b := range e.batches {
		for _, op := range b.ops {
			batch.Add(op.p)
		}
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		t0 := e.clock.Now()
		batch.Exec(ctx)
		t1 := e.clock.Now()
		cancel()
		e.post(func() {
			e.inflight--
			for _, op := range b.ops {
				op.done(t0, t1)
			}
		})
	}
}

// observe updates the estimate of the Store's clock from a reply made at
// storeNow (Unix ms) to an operation sent at t0 and answered at t1: the
// sample is storeNow minus the middle of the round trip, good to ±rtt/2.
// Samples from slow round trips (queueing) are ignored once the estimate
// has a better one.
func (e *Engine) observe(storeNow int64, t0, t1 time.Time) {
	if storeNow <= 0 {
		return
	}
	rtt := t1.Sub(t0).Nanoseconds()
	sample := storeNow*int64(time.Millisecond) - (t0.UnixNano() + rtt/2)
	switch {
	case !e.offsetSet:
		e.offset, e.offsetSet, e.minRTT = sample, true, rtt
	case rtt <= 2*e.minRTT+int64(time.Millisecond):
		e.offset += (sample - e.offset) / 4
	}
	// minRTT creeps up so a changed network path is learnt again.
	e.minRTT = min(e.minRTT+e.minRTT/64+1, rtt)
}

// storeNowMs is the Store's clock as estimated, in Unix ms.
func (e *Engine) storeNowMs() int64 { return (e.nowNs() + e.offset) / int64(time.Millisecond) }

// localAt converts a Store time (Unix ms) to the local clock (Unix ns).
func (e *Engine) localAt(storeMs int64) int64 { return storeMs*int64(time.Millisecond) - e.offset }
