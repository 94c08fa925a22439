package scheduler

import (
	"context"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// The loop: one goroutine owns every task, run and timer. Everything else
// — the Clock timer, done callbacks, Store replies, control messages, API
// calls — posts a function to the inbox and the loop runs it.

// message is one entry of the inbox: a function, or the end of an
// attempt (fn nil), which every firing posts and which needs no closure
// this way.
type message struct {
	fn  func()
	r   *run
	gen uint64
	err error
}

// handle runs m on the loop.
func (m *message) handle(e *Engine) {
	if m.fn != nil {
		m.fn()
		return
	}
	e.attemptDone(m.r, m.gen, m.err)
}

// post queues fn for the loop; it never blocks. It returns false once the
// engine has stopped (fn is dropped).
func (e *Engine) post(fn func()) bool { return e.send(message{fn: fn}) }

// postDone queues the end of attempt gen of r.
func (e *Engine) postDone(r *run, gen uint64, err error) { e.send(message{r: r, gen: gen, err: err}) }

func (e *Engine) send(m message) bool {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return false
	}
	e.inbox = append(e.inbox, m)
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

// handleInbox takes the messages posted so far, swapping in spare (the
// slice the last call returned, so the two alternate and nothing is
// allocated), and handles them. Loop only.
func (e *Engine) handleInbox(spare []message) []message {
	e.mu.Lock()
	msgs := e.inbox
	e.inbox = spare[:0]
	e.mu.Unlock()
	for i := range msgs {
		msgs[i].handle(e)
		msgs[i] = message{}
	}
	return msgs
}

func (e *Engine) loop() {
	defer close(e.loopDone)
	var msgs []message
	for {
		select {
		case <-e.wake:
		case <-e.quit:
			return
		}
		msgs = e.handleInbox(msgs)
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

// Two heaps hold the items: heap in local clock time, sheap in Store clock
// time (distributed fire times and lease deadlines), so that a better
// estimate of the Store's clock moves every such item at once.

// next returns the heap whose top is due first, and that top's local time.
func (e *Engine) next() (*timerHeap, int64) {
	lt, st := e.heap.top(), e.sheap.top()
	switch {
	case lt == nil && st == nil:
		return nil, 0
	case st == nil:
		return &e.heap, lt.at
	}
	sat := st.at - e.storeOffset()
	if lt == nil || sat < lt.at {
		return &e.sheap, sat
	}
	return &e.heap, lt.at
}

// runDue handles every item that is due.
func (e *Engine) runDue() {
	now := e.nowNs()
	for {
		h, at := e.next()
		if h == nil || at > now {
			return
		}
		e.handle(h.pop(), now)
	}
}

// maxSleep bounds one timer so that a wall-clock step (NTP) is noticed
// within a second.
const maxSleep = time.Second

// resetter is a Timer that can be re-armed (the system clock's
// *time.Timer): the loop re-arms one timer instead of allocating one per
// wake-up, which at thousands of firings a second is garbage.
type resetter interface {
	Reset(d time.Duration) bool
}

// arm sets the Clock timer for the earliest item.
func (e *Engine) arm() {
	h, at := e.next()
	now := e.nowNs()
	if h == nil {
		if e.timerAt != 0 {
			e.timer.Stop()
			e.timerAt = 0
		}
		return
	}
	if !e.virtual {
		at = min(at, now+int64(maxSleep))
	}
	if e.timerAt > now && e.timerAt <= at {
		return // an earlier (or equal) wake is already armed
	}
	e.timerAt = at
	if r, ok := e.timer.(resetter); ok {
		r.Reset(time.Duration(at - now))
		return
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	e.timer = e.clock.AfterFunc(time.Duration(at-now), e.wakeFn)
}

// schedule puts it on the local heap at local time at (Unix ns).
func (e *Engine) schedule(it *item, at int64) {
	e.unschedule(it)
	it.at = at
	e.heap.push(it)
}

// scheduleAt puts it on the Store-time heap at Store time at (Unix ns).
func (e *Engine) scheduleAt(it *item, at int64) {
	e.unschedule(it)
	it.at = at
	e.sheap.push(it)
}

// unschedule takes it off whichever heap holds it.
func (e *Engine) unschedule(it *item) {
	if it.h != nil {
		it.h.remove(it)
	}
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
// storeNow (Unix ms, truncated) to an operation sent at t0 and answered at
// t1. The sample is storeNow minus t1: the Store read its clock before the
// reply arrived, so the sample never exceeds the true offset, and runs
// started by the estimate are never early by the Store's clock (they may
// be late by up to a round trip plus 1 ms; the middle of the round trip
// would be closer on average but early half the time). Samples from slow
// round trips (queueing) are ignored once the estimate has a better one.
func (e *Engine) observe(storeNow int64, t0, t1 time.Time) {
	if storeNow <= 0 || e.storeClock != nil {
		return
	}
	rtt := t1.Sub(t0).Nanoseconds()
	sample := storeNow*int64(time.Millisecond) - t1.UnixNano()
	switch {
	case !e.rttSet:
		e.offset, e.rttSet, e.minRTT = sample, true, rtt
	case rtt <= 2*e.minRTT+int64(time.Millisecond):
		e.offset += (sample - e.offset) / 4
	}
	// minRTT creeps up so a slower network path is learnt again.
	e.minRTT = min(e.minRTT+e.minRTT/64+int64(time.Microsecond), rtt)
}

// calibrate measures the Store's clock with one timed round trip (a get
// of task name) if no reply has been timed yet. Until then the estimate is
// that the clocks agree; a claim that reaches the Store too early is sent
// back with the wait (outcomeEarly), so a wrong guess costs a round trip,
// never an early run.
func (e *Engine) calibrate(name string) {
	if e.rttSet || e.calibrating || e.storeClock != nil {
		return
	}
	e.calibrating = true
	submit(e, e.st.get(name), func(f found, err error, t0, t1 time.Time) {
		e.calibrating = false
		if err == nil {
			e.observe(f.Now, t0, t1)
		}
	})
}

// storeNowMs is the Store's clock as estimated, in Unix ms.
func (e *Engine) storeNowMs() int64 { return (e.nowNs() + e.storeOffset()) / int64(time.Millisecond) }

// storeOffset is the Store's clock minus the local clock (ns): read from
// the Store's clock when it is in reach (Memory, or a Redis store driven by
// a test clock), else the estimate from timed replies.
func (e *Engine) storeOffset() int64 {
	if e.storeClock != nil {
		return e.storeClock().UnixNano() - e.nowNs()
	}
	return e.offset
}
