package lock

import (
	"errors"
	"runtime"
	"time"

	"github.com/shieldrt/shieldglobal/core/lock/local"
	"github.com/shieldrt/shieldglobal/core/store"
)

// The timeouts of Acquire besides a positive duration.
const (
	// TryOnce makes a single attempt.
	TryOnce time.Duration = 0
	// WaitForever waits as long as it takes (MaxRetries still bounds it).
	WaitForever time.Duration = -1
)

// spinTries is how often a spinlock retries before it queues.
const spinTries = 64

// Acquire takes the lock for owner and calls done on the loop with the hold
// (a new one, or owner's hold with its count up for a re-entry), possibly
// before Acquire returns. timeout is how long it may wait: TryOnce,
// WaitForever, or a duration, which is a hard bound — also while the
// backend does not answer.
//
// Attempts: the first is made at once. While the lock is held by others,
// the next attempt comes with each wake-up (a release in this process, or
// one the backend announces) or after Settings.Retry without one
// (sooner when the backend hints the holder's lease ends sooner); after
// Settings.MaxRetries attempts it gives up. The same rules hold whether the
// holder is a task of this process or another process.
//
// A distributed lock is taken in two steps: the process-local FIFO gate of
// its name and mode (so only one waiter per process contends in the
// backend, and a release there hands over to the next local waiter
// directly), then the backend.
//
// Errors (done's): ErrTimeout (the timeout passed, or MaxRetries attempts
// failed), ErrStalled (the timeout passed with an attempt unanswered),
// ErrLost (a re-entry of owner's hold, which is lost — known before, or
// found gone by the backend: the hold is marked lost), ErrReentry,
// ErrUpgrade, ErrClosed (see Session.CancelWaits), ErrInvalid, and backend
// errors naming the operation and lock.
//
// cancel gives up the wait as if the timeout passed (done gets ErrTimeout
// unless it was already called); it is idempotent.
func (l *Lock) Acquire(owner Owner, timeout time.Duration, done func(*Hold, error)) (cancel func()) {
	s := l.s
	ownerS := owner.String()
	key := l.key(ownerS)
	var token int64
	if h := s.holds[key]; h != nil && !h.released {
		if !l.set.Reentrant {
			done(nil, opErr("acquire", l.name, ErrReentry))
			return func() {}
		}
		if h.Lost() {
			// A re-entry of a lost hold is lost too: the caller's critical
			// section is not protected, and a new hold would hide that.
			done(nil, opErr("acquire", l.name, ErrLost))
			return func() {}
		}
		token = h.token
	}
	w := &waiter{l: l, s: s, key: key, owner: owner, done: done, timeout: timeout, token: token,
		once: timeout == TryOnce || l.set.MaxRetries == 1}
	if timeout > 0 {
		w.deadline = s.svc.clock.Now().Add(timeout)
	}
	s.waits[w] = struct{}{}
	if l.scope == InProcess {
		w.startLocal()
	} else {
		w.startGate()
	}
	if !w.finished && timeout > 0 {
		w.deadlineT = s.svc.clock.AfterFunc(timeout, func() { s.loop.Post(w.onDeadline) })
	}
	return func() { w.giveUp(ErrTimeout) }
}

// TryNow is the fast path of an in-process Acquire: one attempt made right
// here, with no waiter, no timer and no callback. It returns the hold (a
// new one, or a re-entry of owner's) and true when the lock was free; false
// with a nil error when it is taken (nothing changed: call Acquire to wait);
// or the errors Acquire reports at once (ErrReentry, ErrLost, ErrUpgrade).
// A distributed lock always returns false (it needs the backend).
func (l *Lock) TryNow(owner Owner) (*Hold, bool, error) {
	if l.scope != InProcess {
		return nil, false, nil
	}
	s := l.s
	key := l.key(owner.String())
	prev, entry := l.lookup(key.owner)
	if prev != nil {
		if !l.set.Reentrant {
			return nil, false, opErr("acquire", l.name, ErrReentry)
		}
		if prev.Lost() {
			return nil, false, opErr("acquire", l.name, ErrLost)
		}
	}
	lh, ok, err := s.svc.local.TryAcquire(local.Request{Name: l.name, Owner: key.owner, Mode: l.mode, Reentrant: l.set.Reentrant, TTL: l.set.TTL, Kind: l.kind})
	switch {
	case err != nil:
		return nil, false, opErr("acquire", l.name, err)
	case !ok:
		return nil, false, nil
	}
	var from time.Time // see grantedLocal
	if !lh.ExpiresAt.IsZero() && l.set.TTL > 0 {
		from = lh.ExpiresAt.Add(-l.set.TTL)
	}
	if prev == nil {
		prev = entry // no live hold: the map's entry, if any, is a released one
	}
	return s.holdAt(l, key, owner, grantOf(lh, l.set.TTL), from, false, prev), true, nil
}

// waiter is one Acquire in progress.
type waiter struct {
	l        *Lock
	s        *Session
	key      holdKey
	owner    Owner
	done     func(*Hold, error)
	timeout  time.Duration
	deadline time.Time
	once     bool
	token    int64 // the token of the hold a re-entry re-enters; 0: a new hold

	attempts   int
	finished   bool      // done was called
	counted    bool      // counted in Stats.Waiting
	waitedFrom time.Time // when it started waiting
	stopping   bool      // gave up; a grant that already happened is awaited
	stopErr    error     // why it gave up

	// At the in-process lock or gate.
	lw          *local.Waiter
	queuedLocal bool // the first attempt there failed: it queued
	gated       bool // this acquire holds a gate level
	unwake      func()

	// At the backend.
	inflight  bool
	sentAt    time.Time
	woken     bool // a wake-up came while an attempt was in flight
	queued    bool // an attempt recorded this owner as a waiter (queue or writer intent)
	watching  bool
	unwatch   func()
	zombie    bool // gave up while an attempt was in flight: settle it when it answers
	retryT    Timer
	deadlineT Timer
}

// request is the in-process request: the lock itself, or the gate (whose
// lease is the distributed lock's, so a hold forgotten by a wedged runtime
// frees the gate when the lease runs out).
func (w *waiter) request() local.Request {
	return local.Request{Name: w.l.localName(), Owner: w.key.owner, Mode: w.l.mode, Reentrant: w.l.set.Reentrant, TTL: w.l.set.TTL, Kind: w.l.kind}
}

// startLocal: an in-process lock.
func (w *waiter) startLocal() {
	m := w.s.svc.local
	req := w.request()
	for i := 0; w.l.spin && i < spinTries; i++ {
		h, ok, err := m.TryAcquire(req)
		if err != nil || ok {
			w.localOutcome(h, ok, err)
			return
		}
		runtime.Gosched()
	}
	w.enterLocal(req)
}

// startGate: the gate of a distributed lock, then the backend.
func (w *waiter) startGate() { w.enterLocal(w.request()) }

// enterLocal makes the first attempt at the in-process lock or gate, and
// queues when it is taken.
func (w *waiter) enterLocal(req local.Request) {
	m := w.s.svc.local
	w.attempts = 1
	h, ok, err := m.TryAcquire(req)
	if err != nil || ok || w.once {
		w.localOutcome(h, ok, err)
		return
	}
	h, ok, lw, err := m.Acquire(req, func(h local.Hold) { w.s.loop.Post(func() { w.lw = nil; w.localGranted(h) }) })
	switch {
	case err != nil || ok:
		w.localOutcome(h, ok, err)
	default:
		w.lw, w.queuedLocal = lw, true
		w.waiting()
		if w.l.set.MaxRetries > 0 {
			name := req.Name
			w.unwake = w.s.svc.wakes.watch(name, func() { w.s.loop.Post(w.localTick) })
			w.armRetry(w.l.set.Retry, w.localTick)
		}
	}
}

// localOutcome ends an in-process attempt that was not queued.
func (w *waiter) localOutcome(h local.Hold, ok bool, err error) {
	switch {
	case err != nil:
		w.finish(nil, opErr("acquire", w.l.name, err))
	case !ok:
		w.finish(nil, opErr("acquire", w.l.name, ErrTimeout))
	default:
		w.localGranted(h)
	}
}

// localGranted: the in-process lock, or the gate, is ours.
func (w *waiter) localGranted(h local.Hold) {
	if w.l.scope == Distributed {
		w.passGate()
		return
	}
	w.grantedLocal(h)
}

// localTick is a wake-up or a retry interval while queued at the
// in-process lock or gate: with MaxRetries, one more failed attempt.
func (w *waiter) localTick() {
	if w.finished || w.stopping || w.lw == nil {
		return
	}
	w.attempts++
	if w.attempts >= w.l.set.MaxRetries {
		w.giveUp(ErrTimeout)
		return
	}
	w.armRetry(w.l.set.Retry, w.localTick)
}

// grantedLocal: an in-process lock was granted.
func (w *waiter) grantedLocal(h local.Hold) {
	if w.finished {
		return // cannot happen: a grant is awaited, never refused
	}
	// The lease ends when the lock's own does (ExpiresAt, by the same
	// clock), not a ttl from now: the grant may reach this loop well after
	// it was made, and a lease counted from here would outlast the lock's,
	// with Lost() false while another task could already take it.
	var from time.Time
	if !h.ExpiresAt.IsZero() && w.l.set.TTL > 0 {
		from = h.ExpiresAt.Add(-w.l.set.TTL)
	}
	w.finish(w.s.hold(w.l, w.key, w.owner, grantOf(h, w.l.set.TTL), from, false), nil)
}

func grantOf(h local.Hold, ttl time.Duration) Grant {
	return Grant{Count: h.Count, AcquiredAt: h.AcquiredAt, TTL: ttl}
}

// passGate: the gate is ours; contend in the backend.
func (w *waiter) passGate() {
	w.gated = true
	if w.unwake != nil {
		w.unwake()
		w.unwake = nil
	}
	if w.stopping {
		// Gave up while the grant was on its way (Cancel lost the race).
		w.releaseGate()
		w.finish(nil, w.stopErr)
		return
	}
	if w.retryT != nil {
		w.retryT.Stop()
	}
	if !w.queuedLocal {
		// The gate was free: this attempt goes on to the backend. (After
		// queueing, the failed attempts at the gate count, and the backend
		// attempt is the next.)
		w.attempts = 0
	}
	w.attempt()
}

func (w *waiter) releaseGate() {
	if w.gated {
		w.gated = false
		_, _ = w.s.releaseLocal(gateName(w.l.name), w.key.owner, w.l.mode, false)
	}
}

func (w *waiter) willRetry() bool {
	return !w.once && (w.l.set.MaxRetries == 0 || w.attempts < w.l.set.MaxRetries)
}

func (w *waiter) waiterTTL() time.Duration { return DefaultWaiterTTL(w.l.set.Retry) }

// attempt sends one attempt to the backend.
func (w *waiter) attempt() { w.send(true) }

// send sends an attempt; one that only re-checks after the watch became
// active (a release may have slipped in while it was set up) does not count.
func (w *waiter) send(counts bool) {
	if w.finished || w.inflight {
		return
	}
	if counts {
		w.attempts++
	}
	w.woken = false
	l := w.l
	o := Options{TTL: l.set.TTL, Reentrant: l.set.Reentrant, Fair: l.set.Fair, Waiting: w.willRetry(), WaiterTTL: w.waiterTTL(), Token: w.token}
	if o.Waiting && (o.Fair || l.mode == Exclusive) {
		w.queued = true
	}
	w.inflight = true
	w.sentAt = w.s.svc.clock.Now()
	store.RunOn(w.s.loop, l.be.TryAcquire(l.name, w.key.owner, l.mode, o), w.answered)
}

// answered handles an attempt's outcome.
func (w *waiter) answered(a Attempt, err error) {
	w.inflight = false
	if w.zombie {
		w.settleZombie(a, err)
		return
	}
	if w.finished {
		return
	}
	switch {
	case err != nil && w.token != 0 && isNotHeld(err):
		// The hold this re-entry belongs to is gone from the backend.
		if h := w.s.holds[w.key]; h != nil && h.token == w.token {
			h.markLost(errTakenOver)
		}
		w.fail(opErr("acquire", w.l.name, ErrLost))
		return
	case err != nil:
		w.fail(opErr("acquire", w.l.name, err))
		return
	case a.Granted:
		w.queued = false
		h := w.s.hold(w.l, w.key, w.owner, a.Grant, w.sentAt, true)
		w.gated = false // the hold owns the gate level now
		w.finish(h, nil)
		return
	case !w.willRetry():
		w.giveUp(ErrTimeout)
		return
	}
	w.waiting()
	if !w.watching {
		w.watching = true
		lp := w.s.loop
		w.unwatch = w.l.be.Watch(w.l.name, func() { lp.Post(w.onWake) }, func(err error) {
			lp.Post(func() { w.watchReady(err) })
		})
	}
	if w.woken {
		w.attempt()
		return
	}
	wait := w.l.set.Retry
	if a.RetryIn > 0 && a.RetryIn < wait {
		wait = a.RetryIn
	}
	if w.queued {
		wait = min(wait, w.waiterTTL()/2) // keep the place alive
	}
	w.armRetry(max(wait, time.Millisecond), w.attempt)
}

// onWake: the backend announced a release (or a queue change).
func (w *waiter) onWake() {
	if w.finished || !w.gated {
		return
	}
	if w.inflight {
		w.woken = true
		return
	}
	if w.retryT != nil {
		w.retryT.Stop()
	}
	w.attempt()
}

// watchReady: from now on releases wake this waiter. A release that
// happened while the watch was set up is caught by one attempt at once.
func (w *waiter) watchReady(err error) {
	if err != nil || w.finished || !w.gated {
		return // without a watch, the retry interval does it
	}
	if w.inflight {
		w.woken = true // that attempt may have been too early: try again after it
		return
	}
	if w.retryT != nil {
		w.retryT.Stop()
	}
	w.send(false)
}

func (w *waiter) armRetry(d time.Duration, fn func()) {
	if w.retryT != nil {
		w.retryT.Stop()
	}
	lp := w.s.loop
	w.retryT = w.s.svc.clock.AfterFunc(d, func() { lp.Post(fn) })
}

func (w *waiter) onDeadline() { w.giveUp(ErrTimeout) }

// giveUp ends the wait with err (ErrTimeout, or what CancelWaits passes).
func (w *waiter) giveUp(err error) {
	if w.finished || w.stopping {
		return
	}
	if w.lw != nil {
		if !w.lw.Cancel() {
			// Granted already: the grant's post is on its way. An
			// in-process lock then wins; a gate is given back.
			w.stopping, w.stopErr = true, opErr("acquire", w.l.name, err)
			w.stopTimers()
			return
		}
		w.lw = nil
	}
	err = opErr("acquire", w.l.name, err)
	if errors.Is(err, ErrTimeout) && w.inflight && w.timeout > 0 {
		if d := w.s.svc.clock.Now().Sub(w.sentAt); d >= stallAfter(w.timeout) {
			err = &StalledError{Name: w.l.name, Waited: d.Round(time.Millisecond), Timeout: w.timeout}
		}
	}
	if w.inflight {
		w.zombie = true // it settles when the backend answers
	} else {
		w.leave()
		w.releaseGate()
	}
	w.finish(nil, err)
}

// stallAfter is how long an attempt must have been unanswered when the
// timeout passes for the backend, not contention, to be blamed.
func stallAfter(timeout time.Duration) time.Duration {
	return max(min(timeout/2, time.Second), 100*time.Millisecond)
}

// fail ends the wait with a backend error.
func (w *waiter) fail(err error) {
	w.leave()
	w.releaseGate()
	w.finish(nil, err)
}

// leave takes this owner's waiter entries (fair place, writer intent) out
// of the backend; best effort (they lapse by themselves otherwise).
func (w *waiter) leave() {
	if w.queued && w.l.be != nil {
		w.queued = false
		store.RunOn(w.s.loop, w.l.be.LeaveQueue(w.l.name, w.key.owner), func(None, error) {})
	}
}

// settleZombie undoes a late answer of an attempt the waiter gave up on:
// a new hold is released, a re-entry's extra level given back (the hold
// keeps its count).
func (w *waiter) settleZombie(a Attempt, err error) {
	w.zombie = false
	if err == nil && a.Granted {
		keep := 0
		if h := w.s.holds[w.key]; h != nil && !h.released && h.lost == nil && h.token == a.Token {
			keep = h.count
		}
		store.RunOn(w.s.loop, w.l.be.Release(w.l.name, w.key.owner, w.l.mode, a.Token, keep), func(_ None, err error) {
			if err != nil && !isNotHeld(err) {
				w.s.svc.log.Warn("shield: releasing a lock granted after its acquire gave up failed", "lock", w.l.name, "error", err.Error())
			}
		})
	} else {
		w.leave()
	}
	w.releaseGate()
}

// waiting counts the waiter as waiting (once).
func (w *waiter) waiting() {
	if !w.counted {
		w.counted = true
		w.waitedFrom = w.s.svc.clock.Now()
		w.s.svc.waiting.Add(1)
	}
}

func (w *waiter) stopTimers() {
	if w.retryT != nil {
		w.retryT.Stop()
	}
	if w.deadlineT != nil {
		w.deadlineT.Stop()
	}
}

// finish calls done once and drops the waiter's watches and timers.
func (w *waiter) finish(h *Hold, err error) {
	if w.finished {
		return
	}
	w.finished = true
	w.stopTimers()
	if w.unwatch != nil {
		w.unwatch()
	}
	if w.unwake != nil {
		w.unwake()
	}
	if w.counted {
		w.s.svc.waiting.Add(-1)
		if err == nil && w.s.svc.onWaited != nil {
			w.s.svc.onWaited(w.s.svc.clock.Now().Sub(w.waitedFrom))
		}
	}
	delete(w.s.waits, w)
	w.done(h, err)
}
