// Package lock is the distributed locking behind shield.distributed_mutex,
// shield.distributed_rwlock and shield.lock(): a Backend interface of atomic
// single-attempt primitives with three implementations — Redis (standalone
// or Cluster, see NewRedis), an in-process Memory backend with the same
// semantics (see NewMemory), and Redlock over several independent backends
// (see NewRedlock) — plus Acquire, the blocking helper that retries with
// wake-ups instead of polling.
//
// # Model
//
// A lock is identified by its name. It has at most one exclusive hold (the
// mutex, or the write side of a read-write lock) or any number of shared
// holds (the read side); a mutex and the write lock of an rwlock with the
// same name are the same lock. Each hold belongs to an owner string (the
// Lua binding uses "node_id:service_id:coroutine_id") and is a lease: it
// ends when its TTL passes unless the owner extends it (the watchdog calls
// Extend). Every shared hold has its own lease, so a dead reader never
// blocks writers beyond its TTL while other readers keep renewing theirs.
//
// With Options.Reentrant an owner may take the hold it already has again; a
// count tracks re-entries and Release counts down. A writer may also take a
// shared hold on its own lock (downgrade: release the write hold afterwards
// and keep reading); the reverse, a reader asking for the write hold, is
// refused with ErrUpgrade because two upgrading readers would wait for each
// other forever.
//
// Every new hold (not a re-entry) gets a fencing token from a per-name
// counter that only grows, in the same atomic step that grants the hold.
// A lease-based lock alone cannot stop a paused holder from writing after
// its lease ended; a resource that remembers the highest token it has seen
// and rejects lower ones can. Tokens survive releases and expiry (the
// counter is never expired) and are shared by the exclusive and shared
// sides of a name.
//
// # Fairness
//
// With Options.Fair, callers that find the lock unavailable join a FIFO
// queue; only the head of the queue may take a free lock (shared waiters
// behind a queued writer wait too, so writers are not starved). A waiter
// stays queued only while it keeps retrying: each attempt pushes its
// liveness deadline to now + WaiterTTL, and a waiter whose deadline passed
// (a dead process) is purged by the next attempt of anyone, so it cannot
// block the queue. Fairness holds among Fair callers: an attempt without
// Fair ignores the queue.
//
// # Wake-ups
//
// Releasing the last hold (and a fair queue advancing past a departed head)
// notifies Watch callbacks, so waiters retry at once instead of sleeping
// out their retry interval. A lease that simply expires is not announced:
// waiters also retry after the retryIn hint that TryAcquire returns.
//
// # Times
//
// All lease arithmetic uses the backend's clock — on Redis the server's
// TIME, never a client clock — in whole milliseconds (a TTL below 1ms
// counts as 1ms).
package lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors returned (possibly wrapped) by the backends and Acquire.
var (
	// ErrNotObtained is returned by Acquire when it gives up: after
	// maxRetries attempts, or when its context ends (then the error wraps
	// the context's error too).
	ErrNotObtained = errors.New("lock: not obtained")
	// ErrNotHeld is returned by Release and Extend when owner does not hold
	// the lock in that mode: it never did, it released it, or its lease
	// expired.
	ErrNotHeld = errors.New("lock: not held by this owner")
	// ErrUpgrade is returned by TryAcquire and Acquire when an owner that
	// holds a shared (read) hold asks for the exclusive (write) hold.
	ErrUpgrade = errors.New("lock: cannot upgrade a read lock to a write lock")
	// ErrInvalid is wrapped by every operation given an invalid argument:
	// an empty name or one starting with '}' (it could not be hash-tagged
	// on Redis Cluster), an empty owner, an unknown Mode, a TTL <= 0, or a
	// mode a backend does not support (Shared on Redlock).
	ErrInvalid = errors.New("lock: invalid argument")
)

// Mode is the kind of hold: Exclusive (a mutex, or the write side of a
// read-write lock) or Shared (the read side).
type Mode int

// The modes.
const (
	// Exclusive excludes every other hold.
	Exclusive Mode = iota
	// Shared coexists with other shared holds and excludes exclusive ones
	// (except the caller's own: see the package doc on downgrades).
	Shared
)

// String returns "exclusive", "shared" or "Mode(n)".
func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Options configure one acquire attempt.
type Options struct {
	// TTL is the lease: the hold ends this long after the attempt unless
	// extended. It must be > 0; it is rounded down to whole milliseconds
	// (at least 1ms). A re-entry resets the lease to TTL.
	TTL time.Duration
	// Reentrant lets an owner that already holds the lock in this mode take
	// it again (the count goes up). Without it such an attempt is refused
	// (ok == false), like any other conflict.
	Reentrant bool
	// Fair queues callers FIFO across processes (see the package doc).
	Fair bool
	// WaiterTTL (fair only) is how long a queued waiter keeps its place
	// without retrying; a waiter silent for longer is purged as dead. It
	// must exceed the caller's retry interval: Acquire sets it to
	// DefaultWaiterTTL(retry) when zero; a direct TryAcquire caller gets
	// DefaultWaiterTTL(0) = 1s.
	WaiterTTL time.Duration
}

// DefaultWaiterTTL is the WaiterTTL used when Options.WaiterTTL is zero for
// a caller retrying every retry: 3 × retry, at least 1s.
func DefaultWaiterTTL(retry time.Duration) time.Duration {
	return max(3*retry, time.Second)
}

// Grant describes a hold obtained by TryAcquire or Acquire.
type Grant struct {
	// Token is the fencing token of the hold: strictly greater than the
	// token of every earlier grant of this lock name (re-entries keep the
	// token of the hold they re-enter).
	Token int64
	// Count is the re-entry count after this acquire (1 for a new hold).
	Count int
	// AcquiredAt is the backend's time (Redis: server TIME) when the hold
	// was first acquired, in whole milliseconds.
	AcquiredAt time.Time
	// TTL is the lease granted from the moment of the attempt (Redlock:
	// the remaining validity time, shorter than Options.TTL).
	TTL time.Duration
}

// Holder is one owner of a lock and its re-entry count.
type Holder struct {
	// Owner is the owner string given to TryAcquire.
	Owner string
	// Count is the owner's re-entry count (1 without re-entry).
	Count int
}

// Info describes the current state of a lock.
type Info struct {
	// Mode is Exclusive while there is an exclusive hold (even when its
	// owner also took a shared hold to downgrade), else Shared.
	Mode Mode
	// Owners are the holders: the one exclusive holder, or every shared
	// holder sorted by owner.
	Owners []Holder
	// TTL is the remaining lease: of the exclusive hold, or the longest one
	// of the shared holds (when the lock frees itself if nobody renews).
	TTL time.Duration
	// AcquiredAt is when the exclusive hold, or the oldest shared hold, was
	// acquired.
	AcquiredAt time.Time
	// Token is the fencing token of the exclusive hold, or the highest one
	// of the shared holds.
	Token int64
	// Waiting is the number of live fair waiters.
	Waiting int
}

// Backend is a lock service. Implementations are safe for concurrent use.
// Errors other than the sentinels come from the backend (I/O, a done
// context) and name the operation and lock, e.g.
// `lock: acquire "boss": dial tcp ...`.
type Backend interface {
	// TryAcquire makes one atomic attempt to take name in mode for owner.
	// Granted: ok == true and g describes the hold. Not obtained (a
	// conflicting hold, a non-reentrant repeat, or a fair caller that is
	// not at the head of the queue — then it is queued or its place
	// refreshed, even if the lock is free): ok == false and retryIn is a
	// hint of when to retry (the conflicting lease's remaining time, or the
	// queue head's liveness deadline), always > 0. Errors: ErrUpgrade,
	// ErrInvalid, backend errors.
	TryAcquire(ctx context.Context, name, owner string, mode Mode, o Options) (g Grant, ok bool, retryIn time.Duration, err error)
	// Release gives up one level of owner's hold in mode and returns the
	// remaining re-entry count. At 0 the hold is deleted and, when that
	// frees the lock for others (the exclusive hold, or the last shared
	// hold), waiters are notified in the same atomic step. Errors:
	// ErrNotHeld (the lock and other holds are left untouched),
	// ErrInvalid, backend errors.
	Release(ctx context.Context, name, owner string, mode Mode) (remaining int, err error)
	// Extend resets the lease of owner's hold in mode to ttl from now, only
	// if owner still holds it. Errors: ErrNotHeld, ErrInvalid (also for
	// ttl <= 0), backend errors.
	Extend(ctx context.Context, name, owner string, mode Mode, ttl time.Duration) error
	// Info returns the state of name; found is false when nobody holds it
	// (Info.Waiting may still count fair waiters). Errors: ErrInvalid,
	// backend errors.
	Info(ctx context.Context, name string) (info Info, found bool, err error)
	// LeaveQueue removes owner from name's fair queue (a waiter giving
	// up). It is idempotent. Errors: ErrInvalid, backend errors.
	LeaveQueue(ctx context.Context, name, owner string) error
	// Watch calls fn whenever name is released or its fair queue advances,
	// until cancel is called (cancel is idempotent; when it returns fn is
	// not running and will not be called again). fn must be quick and must
	// not block. Expiry is not announced. When Watch returns without error
	// the watch is active: a release after that is seen. ctx bounds the
	// setup only. Errors: ErrInvalid, ctx's error, backend errors.
	Watch(ctx context.Context, name string, fn func()) (cancel func(), err error)
}

// Acquire is the blocking acquire: it calls TryAcquire, and while the lock
// is not obtained waits for a wake-up from b.Watch or min(retry, retryIn),
// whichever comes first, and tries again. retry <= 0 means no fixed
// interval: it waits for a wake-up or retryIn.
//
// It gives up after maxRetries attempts in total (0: unlimited) with
// ErrNotObtained, or when ctx ends with an error wrapping both
// ErrNotObtained and ctx's error. A fair waiter leaves the queue when it
// gives up. With Fair and a zero WaiterTTL it uses DefaultWaiterTTL(retry),
// and it never waits longer than half the WaiterTTL between attempts, so a
// live waiter keeps its place.
//
// The watch is set up only after a first attempt fails (an uncontended
// acquire costs one round trip), and the attempt right after it is made at
// once, so a release that happens while the watch is being set up is not
// missed. If Watch fails for another reason than ctx, Acquire polls.
// TryAcquire errors (ErrUpgrade, ErrInvalid, backend errors) end Acquire at
// once and are returned as they are.
func Acquire(ctx context.Context, b Backend, name, owner string, mode Mode, o Options, retry time.Duration, maxRetries int) (Grant, error) {
	if o.Fair && o.WaiterTTL <= 0 {
		o.WaiterTTL = DefaultWaiterTTL(retry)
	}
	leave := func() {
		if o.Fair {
			// Best effort, also when ctx is done; a failure only leaves
			// the entry to be purged after WaiterTTL.
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = b.LeaveQueue(lctx, name, owner)
			cancel()
		}
	}
	ctxDone := func() (Grant, error) {
		leave()
		return Grant{}, fmt.Errorf("%w: %q: %w", ErrNotObtained, name, ctx.Err())
	}

	var (
		wake     chan struct{}
		unwatch  func()
		watched  bool
		attempts int
		timer    *time.Timer
	)
	defer func() {
		if unwatch != nil {
			unwatch()
		}
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return ctxDone()
		}
		g, ok, retryIn, err := b.TryAcquire(ctx, name, owner, mode, o)
		attempts++
		if err != nil {
			if ctx.Err() != nil {
				return ctxDone()
			}
			leave()
			return Grant{}, err
		}
		if ok {
			return g, nil
		}
		if maxRetries > 0 && attempts >= maxRetries {
			leave()
			return Grant{}, fmt.Errorf("%w: %q after %d attempts", ErrNotObtained, name, attempts)
		}
		if !watched {
			watched = true
			wake = make(chan struct{}, 1)
			cancel, werr := b.Watch(ctx, name, func() {
				select {
				case wake <- struct{}{}:
				default:
				}
			})
			if werr == nil {
				unwatch = cancel
				continue // try again at once: a release during setup is not lost
			}
			if ctx.Err() != nil {
				return ctxDone()
			}
			// Watch unavailable: poll.
		}
		wait := retryIn
		if retry > 0 && (wait <= 0 || retry < wait) {
			wait = retry
		}
		if o.Fair && wait > o.WaiterTTL/2 {
			wait = o.WaiterTTL / 2
		}
		if wait <= 0 {
			wait = time.Millisecond
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return ctxDone()
		case <-wake:
		case <-timer.C:
		}
	}
}

// ttlMillis is a lease in whole milliseconds, at least 1.
func ttlMillis(d time.Duration) int64 {
	return max(d.Milliseconds(), 1)
}

// opErr wraps err with the operation and lock name.
func opErr(op, name string, err error) error {
	return fmt.Errorf("lock: %s %q: %w", op, name, err)
}

// invalid returns an ErrInvalid error.
func invalid(op, name, msg string) error {
	return fmt.Errorf("lock: %s %q: %w: %s", op, name, ErrInvalid, msg)
}

// checkName reports a name that cannot be used (ErrInvalid).
func checkName(op, name string) error {
	if name == "" || name[0] == '}' {
		return invalid(op, name, "a lock name must be non-empty and must not start with '}'")
	}
	return nil
}

// checkArgs validates the arguments shared by the owner operations.
func checkArgs(op, name, owner string, mode Mode) error {
	if err := checkName(op, name); err != nil {
		return err
	}
	if owner == "" {
		return invalid(op, name, "empty owner")
	}
	if mode != Exclusive && mode != Shared {
		return invalid(op, name, "unknown "+mode.String())
	}
	return nil
}

// checkTTL validates a lease.
func checkTTL(op, name string, ttl time.Duration) error {
	if ttl <= 0 {
		return invalid(op, name, fmt.Sprintf("ttl %v must be > 0", ttl))
	}
	return nil
}

// hashTag returns the part of key Redis Cluster hashes: the first
// non-empty {tag}, or the whole key.
func hashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}
