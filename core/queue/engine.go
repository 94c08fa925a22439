package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/backoff"
)

// consume starts an engine on src.
func consume(src source, o ConsumeOptions, h Handler) (StopFunc, error) {
	if o.Concurrency < 0 {
		return nil, invalid("consume", src.name(), "concurrency %d must be >= 0", o.Concurrency)
	}
	if o.Block < 0 {
		return nil, invalid("consume", src.name(), "block %v must be >= 0", o.Block)
	}
	if h == nil {
		return nil, invalid("consume", src.name(), "nil handler")
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.Block == 0 {
		o.Block = defaultBlock
	}
	e := &engine{
		src: src, r: src.recv(), o: o, h: h, clk: src.clock(),
		wake:     make(chan struct{}, 1),
		finished: make(chan struct{}),
		waits:    map[int]func() bool{},
		inflight: map[*Delivery]bool{},
		retry:    backoff.New(minBackoff, maxBackoff),
	}
	if e.r != nil {
		opts := e.r.options()
		e.retryDelay = opts.RetryDelay
		e.extendEvery = opts.ExtendInterval()
	}
	e.unregister = src.register(e.stop)
	go e.run()
	return e.stop, nil
}

// engine is one consumer: a goroutine that owns all of the consumer's state
// (outstanding waits, deliveries in flight, settles to send). Callbacks —
// a wait's result, a handler's done — only append an event and wake it.
type engine struct {
	src         source
	r           receiver
	o           ConsumeOptions
	h           Handler
	clk         Clock
	retryDelay  time.Duration
	extendEvery time.Duration
	unregister  func()

	mu         sync.Mutex
	events     []event
	stopping   bool
	stopCtx    context.Context
	stopCancel context.CancelFunc // of a stopCtx the engine made itself
	wake       chan struct{}
	finished   chan struct{}
	stopErr    error

	// Owned by the run goroutine.
	nextWait   int
	waits      map[int]func() bool // outstanding PopWaits by id
	inflight   map[*Delivery]bool  // handed to the handler; value: still extended
	settles    []*settleJob
	retry      backoff.Backoff // consecutive pop failures; pauses the pops
	pauseUntil time.Time       // no new waits before (after a failed wait)
	nextExtend time.Time
	released   bool // shutdown deadline passed: in-flight released
}

type eventKind uint8

const (
	evPopped eventKind = iota + 1
	evDone
	evWake
)

type event struct {
	kind eventKind
	wait int
	d    *Delivery
	err  error
}

// settleJob is an ack, nack or release to send, retried after
// infrastructure errors.
type settleJob struct {
	d        *Delivery
	err      error // the handler's (nil: ack)
	release  bool
	attempts int
	notAfter time.Time // retry no earlier than this
}

func (e *engine) post(ev event) {
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.mu.Unlock()
	e.signal()
}

func (e *engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *engine) report(err error) {
	if e.o.OnError != nil && err != nil {
		e.o.OnError(err)
	}
}

// stop is the StopFunc.
func (e *engine) stop(ctx context.Context) error {
	e.mu.Lock()
	if !e.stopping {
		e.stopping = true
		e.stopCtx = ctx
	}
	e.mu.Unlock()
	e.signal()
	select {
	case <-e.finished:
	case <-ctx.Done():
		// The engine's deadline is the first stop's ctx; wake it so that it
		// notices, then wait for it to finish releasing.
		e.signal()
		<-e.finished
	}
	return e.stopErr
}

func (e *engine) run() {
	defer close(e.finished)
	defer e.unregister()
	defer func() {
		e.mu.Lock()
		if e.stopCancel != nil {
			e.stopCancel()
		}
		e.mu.Unlock()
	}()
	var stopTimer func() bool
	for {
		e.mu.Lock()
		evs := e.events
		e.events = nil
		stopping, stopCtx := e.stopping, e.stopCtx
		e.mu.Unlock()

		now := e.clk.Now()
		for _, ev := range evs {
			e.handle(ev, stopping, now)
		}
		if stopping {
			e.shutdown(stopCtx)
		}
		e.flush(now)
		if stopping && len(e.waits) == 0 && len(e.inflight) == 0 && len(e.settles) == 0 {
			return
		}
		if stopping && e.released && len(e.waits) == 0 && len(e.inflight) == 0 {
			e.giveUp()
			return
		}
		if !stopping {
			e.refill(now)
			e.extend(now)
		}

		if stopTimer != nil {
			stopTimer()
			stopTimer = nil
		}
		if at, ok := e.nextTimer(); ok {
			stopTimer = e.clk.AfterFunc(at.Sub(e.clk.Now()), e.signal).Stop
		}
		if stopping && !e.released {
			select {
			case <-e.wake:
			case <-stopCtx.Done():
			}
		} else {
			<-e.wake
		}
	}
}

// handle applies one event.
func (e *engine) handle(ev event, stopping bool, now time.Time) {
	switch ev.kind {
	case evPopped:
		delete(e.waits, ev.wait)
		switch {
		case ev.err == nil:
			if stopping && e.r != nil {
				e.settles = append(e.settles, &settleJob{d: ev.d, release: true})
				return
			}
			e.retry.Reset()
			e.start(ev.d)
		case errors.Is(ev.err, ErrTimeout):
		case errors.Is(ev.err, ErrClosed):
			// The backend closed under us (Close stops consumers first, so
			// this is a race): stop with Close's grace.
			e.mu.Lock()
			if !e.stopping {
				e.stopping = true
				e.stopCtx, e.stopCancel = context.WithTimeout(context.Background(), closeGrace)
			}
			e.mu.Unlock()
		default:
			e.report(ev.err)
			e.pauseUntil = now.Add(e.retry.Next())
		}
	case evDone:
		if _, ok := e.inflight[ev.d]; !ok {
			return // released at shutdown
		}
		delete(e.inflight, ev.d)
		if ev.err != nil {
			e.report(&HandlerError{Queue: e.src.name(), ID: ev.d.ID, Err: ev.err})
		}
		if e.r != nil {
			e.settles = append(e.settles, &settleJob{d: ev.d, err: ev.err})
		}
	}
}

// start calls the handler for d.
func (e *engine) start(d *Delivery) {
	e.inflight[d] = true
	if len(e.inflight) == 1 && e.r != nil {
		e.nextExtend = e.clk.Now().Add(e.extendEvery)
	}
	var once sync.Once
	done := func(err error) {
		once.Do(func() { e.post(event{kind: evDone, d: d, err: err}) })
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				done(fmt.Errorf("handler panicked: %v", p))
			}
		}()
		e.h(d, done)
	}()
}

// refill starts waits for the free slots.
func (e *engine) refill(now time.Time) {
	if now.Before(e.pauseUntil) {
		return
	}
	e.pauseUntil = time.Time{}
	for len(e.waits)+len(e.inflight) < e.o.Concurrency {
		e.nextWait++
		id := e.nextWait
		// The callback only posts an event, handled after this loop, so the
		// slot is taken even when it runs before popWait returns.
		e.waits[id] = e.src.popWait(e.o.Block, func(d *Delivery, err error) {
			e.post(event{kind: evPopped, wait: id, d: d, err: err})
		})
	}
}

// extend renews the visibility timeout of every delivery in flight.
func (e *engine) extend(now time.Time) {
	if e.r == nil || len(e.inflight) == 0 || now.Before(e.nextExtend) {
		return
	}
	e.nextExtend = now.Add(e.extendEvery)
	if e.o.Alive != nil && !e.o.Alive() {
		return
	}
	ds := make([]*Delivery, 0, len(e.inflight))
	for d, live := range e.inflight {
		if live {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	errs, err := e.r.extendMany(ds).Do(ctx)
	cancel()
	if err != nil {
		e.report(err)
		return
	}
	for i, d := range ds {
		if errs[i] != nil {
			e.inflight[d] = false // lost; the handler still runs
			e.report(errs[i])
		}
	}
}

// flush sends every due settle in one batch: the acks as one script call,
// each nack and release as its own.
func (e *engine) flush(now time.Time) {
	if len(e.settles) == 0 {
		return
	}
	type sent struct {
		job     *settleJob
		release *store.Op[struct{}]
		nack    *store.Op[NackResult]
	}
	var b store.Batch
	var local []func()
	var acks []*settleJob
	var others []sent
	keep := e.settles[:0]
	for _, j := range e.settles {
		switch {
		case now.Before(j.notAfter):
			keep = append(keep, j)
		case j.release:
			s := sent{job: j, release: e.r.Release(j.d)}
			addOp(&b, &local, s.release)
			others = append(others, s)
		case j.err == nil:
			acks = append(acks, j)
		default:
			delay := e.retryDelay
			var re *retryError
			if errors.As(j.err, &re) {
				delay = re.delay
			}
			s := sent{job: j, nack: e.r.Nack(j.d, delay)}
			addOp(&b, &local, s.nack)
			others = append(others, s)
		}
	}
	e.settles = keep
	var ackOp *store.Op[[]error]
	if len(acks) > 0 {
		ds := make([]*Delivery, len(acks))
		for i, j := range acks {
			ds[i] = j.d
		}
		ackOp = e.r.ackMany(ds)
		addOp(&b, &local, ackOp)
	}
	if len(acks) == 0 && len(others) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	b.Exec(ctx)
	for _, f := range local {
		f()
	}
	cancel()
	if ackOp != nil {
		errs, err := ackOp.Result()
		for i, j := range acks {
			jerr := err
			if jerr == nil {
				jerr = errs[i]
			}
			e.settled(j, jerr, now)
		}
	}
	for _, s := range others {
		var err error
		if s.release != nil {
			_, err = s.release.Result()
		} else {
			_, err = s.nack.Result()
		}
		e.settled(s.job, err, now)
	}
}

// settled handles the outcome of a settle: done, lost to another delivery
// (reported), or failed (retried with backoff, up to settleAttempts).
func (e *engine) settled(j *settleJob, err error, now time.Time) {
	switch {
	case err == nil, errors.Is(err, ErrSettled):
	case isNotHeld(err):
		e.report(err)
	default:
		j.attempts++
		if j.attempts >= settleAttempts {
			e.report(fmt.Errorf("%w (given up after %d attempts; the message will be redelivered)", err, j.attempts))
			e.stopErr = errors.Join(e.stopErr, err)
			return
		}
		e.report(err)
		j.notAfter = now.Add(settleRetry.Delay(j.attempts))
		e.settles = append(e.settles, j)
	}
}

// addOp queues op in b, or (a local op) runs it after b.
func addOp[T any](b *store.Batch, local *[]func(), op *store.Op[T]) {
	if op.Kind() == store.KindRedis {
		b.Add(op)
		return
	}
	*local = append(*local, func() { _, _ = op.Do(context.Background()) })
}

// shutdown withdraws outstanding waits and, once the stop deadline passed,
// releases what is still in flight.
func (e *engine) shutdown(ctx context.Context) {
	for id, cancel := range e.waits {
		if cancel != nil && cancel() {
			delete(e.waits, id)
		}
	}
	if e.released || ctx.Err() == nil {
		return
	}
	e.released = true
	for d := range e.inflight {
		if e.r != nil {
			e.settles = append(e.settles, &settleJob{d: d, release: true})
		}
		delete(e.inflight, d)
	}
}

// giveUp reports settles that could not be sent before the deadline.
func (e *engine) giveUp() {
	if len(e.settles) > 0 {
		e.stopErr = errors.Join(e.stopErr, fmt.Errorf("queue: consumer of %q: %d settles not sent (the messages are redelivered after their visibility timeout)",
			e.src.name(), len(e.settles)))
	}
}

// nextTimer is when the loop must wake without an event.
func (e *engine) nextTimer() (time.Time, bool) {
	var at time.Time
	set := func(t time.Time) {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	if len(e.waits)+len(e.inflight) < e.o.Concurrency && !e.pauseUntil.IsZero() {
		set(e.pauseUntil)
	}
	if e.r != nil && len(e.inflight) > 0 {
		set(e.nextExtend)
	}
	for _, j := range e.settles {
		set(j.notAfter)
	}
	return at, !at.IsZero()
}
