// Package lock is the locking behind shield.mutex, shield.rwlock,
// shield.spinlock, shield.distributed_mutex, shield.distributed_rwlock and
// shield.lock(), in two layers:
//
//   - Backends: atomic single-attempt primitives for distributed locks, as
//     operations (store.Op): Redis (standalone, Sentinel or Cluster, see
//     NewRedis), an in-process Memory backend with the same semantics (see
//     NewMemory), and Redlock over several independent backends (see
//     NewRedlock). The in-process locks are core/lock/local's Manager.
//   - Sessions: what a Lua runtime uses (see Service, Session, Lock and
//     Hold). A Session belongs to one event loop (see Loop): lock objects
//     with their options resolved once, blocking acquires as callback waits
//     with retries and wake-ups, the process-local FIFO gate in front of
//     distributed locks, hold handles with their lease, the watchdog, and
//     the release of what a task or a closing runtime still holds. Nothing
//     of a Session is touched by another goroutine: timers, grants and
//     replies post to its loop.
//
// # Model
//
// A lock is identified by its name. It has at most one exclusive hold (the
// mutex, or the write side of a read-write lock) or any number of shared
// holds (the read side); a mutex and the write lock of an rwlock with the
// same name are the same lock. Each hold belongs to an owner string (the
// Lua binding uses "node_id:service_id:thread_id", see Owner) and is a
// lease: it ends when its TTL passes unless the owner extends it (the
// watchdog calls Extend). Every shared hold has its own lease, so a dead
// reader never blocks writers beyond its TTL while other readers keep
// renewing theirs.
//
// With Options.Reentrant an owner may take the hold it already has again
// (naming it by its token, see Hold identity); a count tracks re-entries
// and Release counts down. A writer may also take a
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
// sides of a name. A token is max(counter + 1, now_ms × TokensPerMs) with
// the backend's clock, stored back to the counter: a backend that lost its
// counter (an empty restart, a failover to a replica that had not received
// the last grants) still issues tokens above every earlier one while its
// clock is ahead of the lost grants (see TokensPerMs).
//
// # Hold identity
//
// The token is also the identity of a hold: re-entry (Options.Token),
// Extend and Release name the hold they belong to by its token, so a hold
// the backend has for the same owner but another token — a hash rolled
// back by a failover to an earlier hold of that owner, a grant executed
// after its acquire gave up — is never mistaken for the caller's: it is
// refused like another owner's hold to a caller that holds nothing, and a
// re-entry, Extend or Release of a hold the backend no longer has fails
// with ErrNotHeld (the caller's hold is lost). Release says how many levels
// the caller keeps (0 ends the hold), so a re-entry count the backend got
// wrong cannot keep a released lock alive.
//
// # Waiting writers and fairness
//
// A caller that will retry after a refusal says so (Options.Waiting). A
// waiting exclusive caller records a writer intent with a liveness deadline
// of now + WaiterTTL, which each of its attempts pushes back: while a live
// intent of another owner exists, new shared holds are refused (re-entries
// and a writer's own downgrade excepted), so a stream of overlapping
// readers from other processes cannot starve a writer. An intent whose
// writer stopped retrying (gave up without LeaveQueue, or died) is purged
// once its deadline passed.
//
// With Options.Fair, waiting callers join a FIFO queue instead; only the
// head of the queue may take a free lock (shared waiters behind a queued
// writer wait too). A queued waiter is purged like an intent when it stops
// retrying. Fairness holds among Fair callers: an attempt without Fair
// ignores the queue.
//
// # Wake-ups
//
// Releasing the last hold, a fair queue advancing past a departed head, and
// the last waiting writer leaving notify Watch callbacks, so waiters retry
// at once instead of sleeping out their retry interval. A lease that simply
// expires is not announced: waiters also retry after the retryIn hint an
// attempt returns.
//
// # Times
//
// All lease arithmetic of a backend uses its clock — on Redis the server's
// TIME, never a client clock — in whole milliseconds (a TTL below 1ms counts
// as 1ms).
package lock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shieldrt/shieldglobal/core/lock/local"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/argerr"
)

// The errors of the package (returned wrapped; match them with errors.Is).
// The in-process locks of core/lock/local return the same ErrNotHeld and
// ErrUpgrade values.
var (
	// ErrNotHeld: the owner does not hold the lock in that mode — it never
	// did, it released it, or its lease ended. Returned by backends'
	// Release and Extend and by Hold.Release and Hold.Refresh.
	ErrNotHeld = local.ErrNotHeld
	// ErrUpgrade: an owner that holds a shared (read) hold asked for the
	// exclusive (write) hold. Returned by TryAcquire and Lock.Acquire.
	ErrUpgrade = local.ErrUpgrade
	// ErrInvalid is wrapped by every operation given an invalid argument:
	// an empty name or one starting with '}' (it could not be hash-tagged
	// on Redis Cluster), an empty owner, an unknown Mode, a TTL <= 0, a mode
	// or option a backend does not support (Shared or Fair on Redlock), or
	// lock options that contradict each other (see OptionError).
	ErrInvalid = errors.New("lock: invalid argument")
	// ErrTimeout: Lock.Acquire gave up — its timeout passed, or it made
	// Settings.MaxRetries attempts — while others held the lock.
	ErrTimeout = errors.New("lock: not obtained in time")
	// ErrStalled: Lock.Acquire's timeout passed while an attempt was still
	// unanswered by the backend (Redis hangs or is far too slow): whether
	// the lock is contended is unknown. A late grant of that attempt is
	// released. The error is a *StalledError.
	ErrStalled = errors.New("lock: no answer from the lock backend")
	// ErrLost: the hold's lease ran out or was taken over (see Hold.Lost).
	ErrLost = errors.New("lock: lost")
	// ErrReentry: Lock.Acquire by an owner that already holds the lock,
	// which is not reentrant. Waiting would wait for itself forever.
	ErrReentry = errors.New("lock: already held by this owner and not reentrant")
	// ErrClosed: the Session closed while Lock.Acquire waited (or before).
	ErrClosed = errors.New("lock: session closed")
)

// StalledError is the ErrStalled of one acquire: its attempt had been
// unanswered for Waited when the Timeout passed.
type StalledError struct {
	Name            string
	Waited, Timeout time.Duration
}

func (e *StalledError) Error() string {
	return fmt.Sprintf("lock: acquire %q: no answer from the lock backend for %v, within the acquire timeout of %v (if the attempt still succeeds, the lock is released)",
		e.Name, e.Waited, e.Timeout)
}

// Is makes errors.Is(err, ErrStalled) true.
func (e *StalledError) Is(target error) bool { return target == ErrStalled }

// Mode is the kind of hold: Exclusive (a mutex, or the write side of a
// read-write lock) or Shared (the read side). It is the same type as
// local.Mode.
type Mode = local.Mode

// The modes.
const (
	// Exclusive excludes every other hold.
	Exclusive = local.Exclusive
	// Shared coexists with other shared holds and excludes exclusive ones
	// (except the caller's own: see the package doc on downgrades).
	Shared = local.Shared
)

// Options configure one attempt of a backend.
type Options struct {
	// TTL is the lease: the hold ends this long after the attempt unless
	// extended. It must be > 0; it is rounded down to whole milliseconds
	// (at least 1ms). A re-entry resets the lease to TTL.
	TTL time.Duration
	// Reentrant lets an owner that already holds the lock in this mode take
	// it again (the count goes up). Without it such an attempt is refused,
	// like any other conflict.
	Reentrant bool
	// Fair queues waiting callers FIFO across processes (see the package
	// doc). A fair attempt that is not Waiting is refused unless the caller
	// is at the head of the queue or the queue is empty.
	Fair bool
	// Waiting says the caller retries when refused: a refused attempt then
	// records the caller as a waiter — in the fair queue with Fair, else,
	// for Exclusive, as a waiting writer that holds back new shared holds.
	// Every attempt of a waiter pushes its liveness deadline to now +
	// WaiterTTL; a caller that gives up calls LeaveQueue.
	Waiting bool
	// WaiterTTL is how long a waiter keeps its place (or its writer intent)
	// without retrying; it must exceed the caller's longest wait between
	// attempts. Zero means DefaultWaiterTTL(0) = 1s.
	WaiterTTL time.Duration
	// Token is the token of the hold the caller already has in this mode
	// (a re-entry), 0 when it holds none. A re-entry is granted only while
	// the backend has that very hold (else ErrNotHeld: it is lost); a
	// caller that holds none is refused while the backend has a hold of the
	// same owner (a stale one: it lapses with its lease).
	Token int64
}

// TokensPerMs is the number of fencing tokens a lock name may take per
// millisecond of the backend's clock before its counter runs ahead of the
// clock: the part of a token below the clock is now_ms × TokensPerMs. At
// most 2^53 (Lua numbers) is reached in the year 2248.
const TokensPerMs = 1024

// DefaultWaiterTTL is the WaiterTTL of a caller retrying at least every
// retry: 3 × retry, at least 1s.
func DefaultWaiterTTL(retry time.Duration) time.Duration {
	return max(3*retry, time.Second)
}

// Grant describes a hold obtained by an attempt.
type Grant struct {
	// Token is the fencing token of the hold: strictly greater than the
	// token of every earlier grant of this lock name by this backend
	// (re-entries keep the token of the hold they re-enter; see the
	// package doc for a backend that lost its counter).
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

// Attempt is the outcome of one TryAcquire.
type Attempt struct {
	// Granted is true when the hold was taken; Grant describes it.
	Granted bool
	Grant
	// RetryIn (not granted) is a hint of when the lock may be free: the
	// conflicting lease's remaining time, or a waiter's liveness deadline;
	// always > 0.
	RetryIn time.Duration
}

// Holder is one owner of a lock and its re-entry count.
type Holder struct {
	// Owner is the owner string given to TryAcquire (see ParseOwner).
	Owner string
	// Count is the owner's re-entry count (1 without re-entry).
	Count int
	// ServiceName is the holder's service name as its process stored it
	// with the hold (Redis: WithServiceName); "" when the backend does not
	// store one (the memory backend: the holder is this process).
	ServiceName string
}

// Info describes the current state of a lock.
type Info struct {
	// Held is false when nobody holds the lock (Waiting may still count
	// waiters).
	Held bool
	// Mode is Exclusive while there is an exclusive hold (even when its
	// owner also took a shared hold to downgrade), else Shared.
	Mode Mode
	// Owners are the holders: the one exclusive holder, or every shared
	// holder sorted by owner.
	Owners []Holder
	// TTL is the remaining lease: of the exclusive hold, or the longest one
	// of the shared holds (when the lock frees itself if nobody renews).
	// In-process locks without a ttl report -1.
	TTL time.Duration
	// AcquiredAt is when the exclusive hold, or the oldest shared hold, was
	// acquired.
	AcquiredAt time.Time
	// Token is the fencing token of the exclusive hold, or the highest one
	// of the shared holds (0 for in-process locks).
	Token int64
	// Waiting is the number of live waiters the backend knows of: fair
	// waiters and waiting writers (in-process: the queued tasks).
	Waiting int
}

// None is the value of operations that return nothing but an error.
type None = struct{}

// Backend is a distributed lock service. Its methods return operations
// (store.Op): nothing happens until the operation runs, alone with Do or in
// a batch (the Lua runtime sends the operations of one loop turn as one
// pipeline). Redis operations are one script each; Memory operations are
// local; Redlock operations are work that waits on several nodes.
// Implementations are safe for concurrent use.
//
// Errors other than the sentinels come from the backend (I/O, a done
// context). Invalid arguments fail the operation before any I/O.
type Backend interface {
	// TryAcquire makes one atomic attempt to take name in mode for owner
	// (a re-entry of the hold o.Token names, when it is not 0). Errors:
	// ErrNotHeld (o.Token names a hold the backend no longer has: it is
	// lost), ErrUpgrade, ErrInvalid, backend errors.
	TryAcquire(name, owner string, mode Mode, o Options) *store.Op[Attempt]
	// Release gives up levels of owner's hold in mode whose token is token:
	// keep is the re-entry count the owner still holds afterwards (0 ends
	// the hold). At 0 the hold is deleted and, when that frees the lock for
	// others (the exclusive hold, or the last shared hold), waiters are
	// notified in the same atomic step. Errors: ErrNotHeld (owner has no
	// hold with that token; the lock and other holds are left untouched),
	// ErrInvalid (also for keep < 0), backend errors.
	Release(name, owner string, mode Mode, token int64, keep int) *store.Op[None]
	// Extend resets the lease of owner's hold in mode whose token is token
	// to ttl from now, only if owner still holds it. Errors: ErrNotHeld,
	// ErrInvalid (also for ttl <= 0), backend errors.
	Extend(name, owner string, mode Mode, token int64, ttl time.Duration) *store.Op[None]
	// Info returns the state of name. Errors: ErrInvalid, backend errors.
	Info(name string) *store.Op[Info]
	// LeaveQueue removes owner's waiter entries of name: its place in the
	// fair queue and its writer intent (a waiter giving up). It is
	// idempotent. Errors: ErrInvalid, backend errors.
	LeaveQueue(name, owner string) *store.Op[None]
	// Watch calls fn whenever name is released, its fair queue advances or
	// its last waiting writer leaves, until cancel is called. fn must be
	// quick and must not block. Expiry is not announced.
	//
	// ready is called exactly once, from any goroutine and possibly before
	// Watch returns: with nil once the watch is active (a release after
	// that is seen), or with the error that prevented it (ErrInvalid, no
	// bus, a subscription failure); fn is never called after a failure.
	// cancel is idempotent; after it, ready may never come, and fn is not
	// called again except by a wake-up already being delivered.
	Watch(name string, fn func(), ready func(error)) (cancel func())
}

// ttlMillis is a lease in whole milliseconds, at least 1.
func ttlMillis(d time.Duration) int64 {
	return max(d.Milliseconds(), 1)
}

// opErr wraps err with the operation and lock name, once.
func opErr(op, name string, err error) error {
	prefix := fmt.Sprintf("lock: %s %q: ", op, name)
	if err == nil || strings.HasPrefix(err.Error(), prefix) {
		return err
	}
	return fmt.Errorf("%s%w", prefix, err)
}

// invalid returns an ErrInvalid error.
func invalid(op, name, msg string) error {
	return argerr.New(ErrInvalid, "lock", op, name, msg)
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

// checkRelease validates Release's arguments.
func checkRelease(op, name, owner string, mode Mode, keep int) error {
	if err := checkArgs(op, name, owner, mode); err != nil {
		return err
	}
	if keep < 0 {
		return invalid(op, name, fmt.Sprintf("keep %d must be >= 0", keep))
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

// waiterTTL is o's WaiterTTL in milliseconds.
func waiterTTL(o Options) int64 {
	if o.WaiterTTL > 0 {
		return ttlMillis(o.WaiterTTL)
	}
	return ttlMillis(DefaultWaiterTTL(0))
}
