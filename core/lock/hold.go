package lock

import (
	"errors"
	"fmt"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Hold is an owner's hold of a lock, in the manner of bsm/redislock's Lock:
// it knows its name, mode, owner, fencing token and lease, and is refreshed
// and released through itself. Like everything of a Session it lives on the
// session's loop; its timers post there, so a lease is renewed only while
// the loop makes progress: a wedged loop lets its leases lapse, and its
// holds then report lost.
type Hold struct {
	s    *Session
	lock *Lock // the object that took it: settings and on_lost
	key  holdKey

	owner      Owner
	token      int64
	count      int
	acquiredAt time.Time
	ttl        time.Duration // the lease; 0: none
	leaseEnd   time.Time     // by this process's clock, from when the grant or renewal was sent
	gate       bool          // holds the local gate of a distributed lock

	released bool
	lost     error // why it was lost; nil while it is not
	auto     bool
	interval time.Duration
	timer    Timer
	renewing bool
	renewErr error // the last renewal's failure, while no renewal succeeded since
}

// Reasons a hold is lost.
var (
	errLeaseRanOut = errors.New("its lease ran out before it was renewed")
	errTakenOver   = errors.New("the lock was taken over or its lease expired")
)

// hold records a grant for key: a new Hold, or a re-entry of owner's live
// hold (its count goes up by one: the owner counts its levels, whatever
// count the backend reports). sent is when the attempt was sent (its lease
// began no earlier; zero: now); gate says the grant holds a level of the
// local gate.
func (s *Session) hold(l *Lock, key holdKey, owner Owner, g Grant, sent time.Time, gate bool) *Hold {
	return s.holdAt(l, key, owner, g, sent, gate, s.holds[key])
}

// holdAt is hold with h, the map's entry for key, already looked up.
func (s *Session) holdAt(l *Lock, key holdKey, owner Owner, g Grant, sent time.Time, gate bool, h *Hold) *Hold {
	if sent.IsZero() && g.TTL > 0 {
		sent = s.svc.clock.Now() // only a lease needs it
	}
	if h != nil && !h.released && h.lost == nil && g.Count > 1 && (key.scope == InProcess || g.Token == h.token) {
		if key.scope == InProcess {
			h.count = g.Count
		} else {
			h.count++
		}
		if h.ttl > 0 && g.TTL > 0 {
			h.leaseEnd = sent.Add(g.TTL) // a re-entry resets the lease
			h.arm()
		}
		return h
	} else if h != nil && !h.released {
		// A grant of a fresh hold while the old one is still recorded: the
		// old one's lease must have ended unnoticed. The owner's gate levels
		// go on with the new hold.
		gate = gate || h.gate
		h.gate = false
		h.markLost(errTakenOver)
		h.end()
	}
	h = l.spare
	if h != nil {
		l.spare = nil
	} else {
		h = new(Hold)
	}
	*h = Hold{s: s, lock: l, key: key, owner: owner, token: g.Token, count: max(g.Count, 1), acquiredAt: g.AcquiredAt,
		ttl: g.TTL, gate: gate, auto: l.set.AutoExtend && g.TTL > 0, interval: l.set.ExtendInterval}
	if h.ttl > 0 {
		h.leaseEnd = sent.Add(h.ttl)
	}
	s.holds[key] = h
	l.last = h
	s.svc.holds.Add(1)
	h.arm()
	return h
}

// Recycle gives a released hold back to its lock object, whose next hold
// may reuse it (the lock pair then allocates nothing). The caller promises
// not to use h again. A hold that is live, lost (its record stays), had a
// lease (a timer's tick may still be posted for it) or a renewal in flight
// is left alone.
func (h *Hold) Recycle() {
	if h.released && h.lost == nil && h.ttl == 0 && !h.renewing && h.timer == nil && h.lock.spare == nil { // (end dropped its record)
		if h.lock.last == h {
			h.lock.last = nil
		}
		h.lock.spare = h
	}
}

// Name returns the lock name.
func (h *Hold) Name() string { return h.key.name }

// Mode returns the mode of the hold.
func (h *Hold) Mode() Mode { return h.key.mode }

// Scope returns the scope of the lock.
func (h *Hold) Scope() Scope { return h.key.scope }

// Owner returns the owner.
func (h *Hold) Owner() Owner { return h.owner }

// Token returns the fencing token (0 for in-process locks).
func (h *Hold) Token() int64 { return h.token }

// Count returns the re-entry count.
func (h *Hold) Count() int { return h.count }

// AcquiredAt returns when the hold was first acquired (the backend's time).
func (h *Hold) AcquiredAt() time.Time { return h.acquiredAt }

// TTL returns the lease length (0: none).
func (h *Hold) TTL() time.Duration { return h.ttl }

// Released reports whether the hold has ended (released, or lost and then
// released).
func (h *Hold) Released() bool { return h.released }

// Lost reports whether the hold is lost: a renewal or release found it gone,
// or its lease ran out by this process's clock before it was renewed (the
// one source of truth for lost(), release() and on_lost).
func (h *Hold) Lost() bool {
	if h.lost == nil && !h.released && h.ttl > 0 && !h.s.svc.clock.Now().Before(h.leaseEnd) {
		if h.renewErr != nil {
			h.markLost(fmt.Errorf("renewals failed until the lease ran out: %w", h.renewErr))
		} else {
			h.markLost(errLeaseRanOut)
		}
	}
	return h.lost != nil
}

// LostReason says why the hold was lost ("" while it is not).
func (h *Hold) LostReason() string {
	if !h.Lost() {
		return ""
	}
	return h.lost.Error()
}

// arm sets the hold's one timer: the watchdog's next renewal, or the end of
// its lease (when an on_lost function waits for it). It posts to the loop.
func (h *Hold) arm() {
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if h.ttl <= 0 || h.released || h.lost != nil || !h.auto && h.lock.onLost == nil {
		// Without the watchdog and without an on_lost function nothing
		// needs waking at the lease's end: Lost tells from the clock.
		return
	}
	s := h.s
	d := h.leaseEnd.Sub(s.svc.clock.Now())
	if h.auto {
		d = min(d, h.interval)
	}
	h.timer = s.svc.clock.AfterFunc(max(d, 0), func() { s.loop.Post(h.tick) })
}

// tick runs on the loop when the hold's timer fired.
func (h *Hold) tick() {
	if h.released || h.Lost() || h.renewing {
		return
	}
	if h.auto {
		h.renew(h.ttl, func(error) {})
		return
	}
	h.arm()
}

// renew extends the lease to ttl; done gets nil, ErrLost, or a backend
// error (the watchdog retries those while the lease may still be valid).
func (h *Hold) renew(ttl time.Duration, done func(error)) {
	h.renewing = true
	s := h.s
	sent := s.svc.clock.Now()
	store.RunOn(s.loop, h.extendOp(ttl), func(_ None, err error) {
		h.renewing = false
		switch {
		case h.released:
			done(opErr("extend", h.key.name, ErrNotHeld))
		case h.lost != nil:
			done(opErr("extend", h.key.name, ErrLost))
		case err == nil:
			h.renewErr = nil
			h.ttl, h.leaseEnd = ttl, sent.Add(ttl)
			if h.gate {
				_ = s.svc.local.Extend(gateName(h.key.name), h.key.owner, h.key.mode, ttl)
			}
			h.arm()
			done(nil)
		case isNotHeld(err):
			h.markLost(errTakenOver)
			done(opErr("extend", h.key.name, ErrLost))
		default:
			h.renewErr = err
			if h.Lost() {
				done(opErr("extend", h.key.name, ErrLost))
				return
			}
			if h.auto {
				// Try again soon: the lease may still be ours. (Without
				// the watchdog, the timer at the lease's end stays.)
				if h.timer != nil {
					h.timer.Stop()
				}
				d := min(h.interval, time.Second, max(h.leaseEnd.Sub(s.svc.clock.Now()), 0))
				h.timer = s.svc.clock.AfterFunc(d, func() { s.loop.Post(h.tick) })
			}
			done(opErr("extend", h.key.name, err))
		}
	})
}

func (h *Hold) extendOp(ttl time.Duration) *store.Op[None] {
	if h.key.scope == Distributed {
		return h.lock.be.Extend(h.key.name, h.key.owner, h.key.mode, h.token, ttl)
	}
	m, k := h.s.svc.local, h.key
	return store.Local(func() (None, error) { return None{}, m.Extend(k.name, k.owner, k.mode, ttl) })
}

// markLost records that the hold is lost: its watchdog stops, its gate is
// given back (local waiters may contend again), a warning is logged, the
// counter goes up and the on_lost function of its lock object runs.
func (h *Hold) markLost(why error) {
	if h.lost != nil || h.released {
		return
	}
	h.lost = why
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	h.releaseGate()
	s := h.s
	s.svc.lost.Add(1)
	s.svc.log.Warn("shield: lock lost", "lock", h.key.name, "scope", h.key.scope.String(), "mode", h.key.mode.String(),
		"owner", h.key.owner, "reason", why.Error())
	if fn := h.lock.onLost; fn != nil {
		fn(h)
	}
}

func (h *Hold) releaseGate() {
	if h.gate {
		h.gate = false
		_, _ = h.s.releaseLocal(gateName(h.key.name), h.key.owner, h.key.mode, true)
	}
}

// end forgets a hold that is over. A lost hold's record stays (so Lost
// keeps answering true) until its owner acquires the lock again or Forget.
func (h *Hold) end() {
	if h.released {
		return
	}
	h.released = true
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	h.releaseGate()
	h.s.svc.holds.Add(-1)
	if h.lost == nil {
		// Unreleased until now, h is the map's entry for its key.
		delete(h.s.holds, h.key)
	}
}

// Forget drops the record of an ended hold (see Lock.Lost).
func (h *Hold) Forget() {
	if h.released && h.s.holds[h.key] == h {
		delete(h.s.holds, h.key)
	}
}

// Refresh sets the lease to ttl from now (bsm/redislock's Refresh), also
// for an in-process hold without one. done gets nil, an error wrapping
// ErrLost (the hold was lost: now or before), ErrNotHeld (released), or a
// backend error.
func (h *Hold) Refresh(ttl time.Duration, done func(error)) {
	switch {
	case h.released:
		done(opErr("extend", h.key.name, ErrNotHeld))
	case h.Lost():
		done(opErr("extend", h.key.name, ErrLost))
	case ttl <= 0:
		done(invalid("extend", h.key.name, "ttl must be > 0"))
	default:
		h.renew(ttl, done)
	}
}

// AutoExtend starts (on) or stops the watchdog of this hold; interval 0
// keeps the current one. Errors (*OptionError): on without a ttl, an
// interval not shorter than the ttl.
func (h *Hold) AutoExtend(on bool, interval time.Duration) error {
	if interval <= 0 {
		interval = h.interval
	}
	if on {
		if err := checkAutoExtend(h.ttl, interval); err != nil {
			return err
		}
	}
	h.auto, h.interval = on, interval
	if !h.released && h.lost == nil {
		h.arm()
	}
	return nil
}

// Release gives up one level of the hold (bsm/redislock's Release) and
// calls done with the remaining count (0: the hold is over). The hold
// counts its levels: its last release ends it in the backend, whatever
// count the backend has. Errors: ErrLost (the hold was lost — also when
// the backend has no hold with its token; it is over now, and the backend
// was asked to release it anyway in case the lease was only presumed lost),
// ErrNotHeld (already released), backend errors (the hold is kept: its
// state is unknown).
func (h *Hold) Release(done func(remaining int, err error)) {
	if h.released {
		done(0, opErr("release", h.key.name, ErrNotHeld))
		return
	}
	if h.Lost() {
		h.dropAll()
		done(0, opErr("release", h.key.name, ErrLost))
		return
	}
	s, k := h.s, h.key
	if k.scope == InProcess {
		n, err := s.releaseLocal(k.name, k.owner, k.mode, false)
		h.released1(n, err, done)
		return
	}
	keep := h.count - 1
	store.RunOn(s.loop, h.lock.be.Release(k.name, k.owner, k.mode, h.token, keep), func(_ None, err error) { h.released1(keep, err, done) })
}

func (h *Hold) released1(n int, err error, done func(int, error)) { done(h.settle(n, err)) }

// ReleaseNow is Release for an in-process hold, which completes right here:
// it returns Release's outcome and true, or false for a distributed hold
// (call Release).
func (h *Hold) ReleaseNow() (remaining int, err error, ok bool) {
	k := h.key
	switch {
	case k.scope != InProcess:
		return 0, nil, false
	case h.released:
		return 0, opErr("release", k.name, ErrNotHeld), true
	case h.Lost():
		h.dropAll()
		return 0, opErr("release", k.name, ErrLost), true
	}
	n, err := h.s.releaseLocal(k.name, k.owner, k.mode, false)
	n, err = h.settle(n, err)
	return n, err, true
}

// settle ends a release the backend answered with the remaining count n or
// err: Release's outcome.
func (h *Hold) settle(n int, err error) (int, error) {
	switch {
	case h.released:
		return 0, opErr("release", h.key.name, ErrNotHeld)
	case err == nil && n > 0:
		h.count = n
		if h.gate {
			_, _ = h.s.releaseLocal(gateName(h.key.name), h.key.owner, h.key.mode, false)
		}
		return n, nil
	case err == nil:
		h.end()
		return 0, nil
	case isNotHeld(err):
		h.markLost(errTakenOver)
		h.end()
		return 0, opErr("release", h.key.name, ErrLost)
	default:
		// Redis did not confirm the release (no answer, an error). The task
		// asked to let go, so here it does: a level less (the next release
		// names the levels kept, so the backend's count comes right), and
		// at its last level the hold ends and is no longer renewed, so a
		// release that did not land frees the lock when its lease runs out.
		// Before, the hold stayed whole: a script that went on after the
		// error took the lock again as a re-entry of the hold it believed
		// released (the same token), and the watchdog kept it for good
		// (the fault suite's Cluster kill).
		if n > 0 {
			h.count = n
			if h.gate {
				_, _ = h.s.releaseLocal(gateName(h.key.name), h.key.owner, h.key.mode, false)
			}
		} else {
			h.end()
		}
		return n, opErr("release", h.key.name, fmt.Errorf("%w (the hold ended here; the lock frees itself when its lease runs out)", err))
	}
}

// dropAll ends the hold, releasing every level in the backend (best effort:
// a failure only leaves the lease to run out, and is logged).
func (h *Hold) dropAll() {
	if h.released {
		return
	}
	s, k := h.s, h.key
	if k.scope == InProcess {
		if h.lost == nil {
			_, _ = s.releaseLocal(k.name, k.owner, k.mode, true)
		}
	} else {
		store.RunOn(s.loop, h.lock.be.Release(k.name, k.owner, k.mode, h.token, 0), func(_ None, err error) {
			if err != nil && !isNotHeld(err) {
				s.svc.log.Warn("shield: releasing a lock failed; it frees itself when its lease runs out",
					"lock", k.name, "owner", k.owner, "error", opErr("release", k.name, err).Error())
			}
		})
	}
	h.end()
}

// Abandon releases every level of a hold whose task ended without
// releasing it: a warning names the lock and the task, and the Abandoned
// counter goes up. For a hold that is already over it only drops the
// record. task names the task in the warning.
func (h *Hold) Abandon(task string) {
	if h.released {
		h.Forget()
		return
	}
	h.Lost() // a lease that lapsed meanwhile is reported as lost first
	s := h.s
	s.svc.abandoned.Add(1)
	s.svc.log.Warn("shield: a task ended holding a lock; released it", "lock", h.key.name, "scope", h.key.scope.String(),
		"mode", h.key.mode.String(), "task", task, "owner", h.key.owner, "count", h.count)
	h.dropAll()
	h.Forget()
}

// ReleaseAll releases every level of the hold without a warning (a closing
// runtime's holds outside tasks) and drops its record.
func (h *Hold) ReleaseAll() {
	h.dropAll()
	h.Forget()
}
