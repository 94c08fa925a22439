package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// SlidingWindow is a sliding-window limiter: for every key, at most
// MaxRequests requests in any window of length Window, exactly. On Redis
// each AllowOp is one script call on the server's clock; on memory it runs
// in-process on the Set's clock. Safe for concurrent use.
type SlidingWindow struct {
	set  *Set
	name string
	opts Options
	be   windowBackend

	allowed, rejected, unavailable atomic.Uint64
	dmu                            sync.Mutex
	day                            int64
	today                          uint64

	// Reachability: sent numbers the AllowOps; failing says whether the
	// op numbered changedBy, the last to change it, found Redis
	// unreachable (smu guards the change; failing is read without it).
	sent      atomic.Uint64
	settleFn  settleFunc // w.settle, made once
	smu       sync.Mutex
	failing   atomic.Bool
	changedBy uint64
}

// settleFunc is what a backend's allow op calls when it settles: with the
// decision, or with the error that says Redis did not answer; seq is the
// op's number.
type settleFunc func(seq uint64, d Decision, err error) (Decision, error)

// windowBackend counts one limiter's requests.
type windowBackend interface {
	// allow admits n >= 1 requests of key if they fit; its op calls settle
	// (with seq) when it has a decision or found Redis unreachable.
	allow(key string, n int64, settle settleFunc, seq uint64) *store.Op[Decision]
	remaining(key string) *store.Op[int64]
	active() int
	cleanup(now int64)
}

func newSlidingWindow(s *Set, name string, o Options) *SlidingWindow {
	w := &SlidingWindow{set: s, name: name, opts: o}
	w.settleFn = w.settle
	if s.c != nil {
		w.be = newRedisWindow(s, name, o)
	} else {
		w.be = newMemoryWindow(s, o)
	}
	return w
}

// Name returns the limiter's name.
func (w *SlidingWindow) Name() string { return w.name }

// Options returns the limiter's resolved options.
func (w *SlidingWindow) Options() Options { return w.opts }

// AllowOp returns the operation that admits n requests of key together if
// the window has room for all of them: Decision.Allowed, or Reason
// Rejected with RetryAfter. On Redis it is one script call (one round
// trip); on memory it runs in-process when run. Errors: ErrInvalid for
// n < 1; on Redis the connection's or server's error, which the caller
// hands to Outcome to get the Unavailable decision the spec asks for.
func (w *SlidingWindow) AllowOp(key string, n int) *store.Op[Decision] {
	if n < 1 {
		return store.Failed[Decision](fmt.Errorf("%w: rate_limiter %q: allow %q: n = %d: must be >= 1", ErrInvalid, w.name, key, n))
	}
	return w.be.allow(key, int64(n), w.settleFn, w.sent.Add(1))
}

// RemainingOp returns the operation that counts how many more requests of
// key the window accepts now. Errors as AllowOp's (without ErrInvalid);
// there is no Unavailable value for it, so a Redis failure is an error.
func (w *SlidingWindow) RemainingOp(key string) *store.Op[int64] { return w.be.remaining(key) }

// Allow runs AllowOp and Outcome, within Timeout: the decision the Lua API
// reports. Errors: ErrInvalid, and store.ErrReply (a script and this code
// disagree); an unreachable Redis, or one that does not answer within
// Timeout, is the Unavailable decision, not an error.
func (w *SlidingWindow) Allow(ctx context.Context, key string, n int) (Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, w.set.cfg.Timeout)
	defer cancel()
	return w.Outcome(w.AllowOp(key, n).Do(ctx))
}

// Timeout is how long an Allow waits for Redis before it decides
// Unavailable (Config.Timeout, rate_limiter.timeout). A caller that runs
// AllowOp in a batch of its own (the Lua runtime's pipeline, whose deadline
// is the client's) stops waiting at Timeout and calls Unanswered.
func (w *SlidingWindow) Timeout() time.Duration { return w.set.cfg.Timeout }

// Unanswered is the decision for an AllowOp its caller stopped waiting for
// after Timeout: Unavailable, counted, and the start of an outage (logged
// once, as settle does). The op, should Redis still run it, counts its own
// decision when its reply comes, but cannot end the outage this call began:
// only an op sent after it can (see settle).
func (w *SlidingWindow) Unanswered(key string, waited time.Duration) Decision {
	err := fmt.Errorf("ratelimit: %q: allow %q: %w within rate_limiter.timeout (%v)", w.name, key, store.ErrNoAnswer, waited)
	d, _ := w.Outcome(w.settle(w.sent.Add(1), Decision{}, err))
	return d
}

// Outcome maps the result of an AllowOp to what the caller reports. A
// decision comes back as it is. An error other than ErrInvalid and
// store.ErrReply means Redis did not decide (unreachable, timed out,
// failing over, or refusing the script): the request is refused with
// Reason Unavailable — the spec's degradation table: a sliding window
// cannot count without Redis — and counted (the op logged the outage, once:
// settle); the error is returned as nil. ErrInvalid and store.ErrReply are
// returned as they are (raise them).
func (w *SlidingWindow) Outcome(d Decision, err error) (Decision, error) {
	if err == nil {
		return d, nil
	}
	if errors.Is(err, ErrInvalid) || errors.Is(err, store.ErrReply) {
		return Decision{}, err
	}
	w.unavailable.Add(1)
	w.countRejectedToday()
	return Decision{Reason: Unavailable}, nil
}

// settle counts the decision of the op numbered seq, or, with err, notes
// that it found Redis unreachable, and logs a change of reachability once:
// the warning when an outage begins, the notice when it ends. Only an op
// sent after the one that last changed it may change it back: around a
// recovery, an op that was still retrying its dial can fail after a later
// one succeeded (and around an outage's start a late success can follow a
// failure), and neither is a new outage or a new recovery.
func (w *SlidingWindow) settle(seq uint64, d Decision, err error) (Decision, error) {
	if err == nil {
		if d.Allowed {
			w.allowed.Add(1)
		} else {
			w.rejected.Add(1)
			w.countRejectedToday()
		}
		if !w.failing.Load() {
			return d, nil
		}
	}
	down := err != nil
	w.smu.Lock()
	defer w.smu.Unlock()
	if seq < w.changedBy || w.failing.Load() == down {
		return d, err
	}
	w.failing.Store(down)
	w.changedBy = seq
	if down {
		w.set.log.Warn("sliding-window rate limiter cannot reach Redis: rejecting requests as unavailable",
			"limiter", w.name, "error", err)
	} else {
		w.set.log.Info("sliding-window rate limiter reaches Redis again", "limiter", w.name)
	}
	return d, err
}

func (w *SlidingWindow) countRejectedToday() {
	day := w.set.day(w.set.clock())
	w.dmu.Lock()
	if day != w.day {
		w.day, w.today = day, 0
	}
	w.today++
	w.dmu.Unlock()
}

// Stats returns the limiter's counters.
func (w *SlidingWindow) Stats() LimiterStats {
	st := LimiterStats{Name: w.name, Algorithm: AlgorithmSlidingWindow, ActiveKeys: w.be.active(),
		Allowed: w.allowed.Load(), Rejected: w.rejected.Load(), Unavailable: w.unavailable.Load()}
	today := w.set.day(w.set.clock())
	w.dmu.Lock()
	if w.day == today {
		st.RejectedToday = w.today
	}
	w.dmu.Unlock()
	return st
}

func (w *SlidingWindow) cleanup(now int64) { w.be.cleanup(now) }
