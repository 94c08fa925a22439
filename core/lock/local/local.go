// Package local implements the in-process named locks behind
// shield.mutex, shield.rwlock and shield.spinlock: every Lua state of one
// process shares one lock per name, owned by a task (a Lua coroutine)
// identified by an owner string.
//
// The package never blocks a goroutine on a lock and never starts a
// goroutine of its own (StartExpiry's timer excepted). Waiting is expressed
// with callbacks: Acquire either grants at once or queues the request and
// later calls its grant callback, from whichever goroutine released or
// expired the lock, once the lock has been handed to the waiter. Callers
// (the Lua bindings) post that callback to their event loop and resume the
// suspended task there.
//
// Properties:
//   - Direct handoff in exact FIFO order, no thundering herd and no
//     barging: while waiters are queued, a newcomer neither gets the lock
//     from TryAcquire nor from Acquire.
//   - Shared waiters at the head of the queue are granted together; an
//     Exclusive waiter blocks the Shared ones that arrived after it.
//   - An owner holding Exclusive may also take Shared (downgrade); an owner
//     holding only Shared asking for Exclusive gets ErrUpgrade.
//   - TTLs are enforced lazily whenever a lock is touched, by Expire, or by
//     the single timer of StartExpiry.
//   - Grant callbacks never run with a manager lock held; any Manager
//     method that frees a lock may run other waiters' grant callbacks on
//     the calling goroutine before it returns. Callbacks may call back into
//     the Manager.
//   - A name's state is dropped as soon as the lock is free, so millions of
//     distinct names do not leak.
package local

import (
	"cmp"
	"errors"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNotHeld is returned by Release and Extend when the owner holds nothing
// of that name in that mode (including when its hold has expired). It is
// also lock.ErrNotHeld: errors.Is matches both packages' errors.
var ErrNotHeld = errors.New("lock: not held by this owner")

// ErrUpgrade is returned by TryAcquire and Acquire when an owner that holds
// a lock Shared (and not Exclusive) asks for it Exclusive. Waiting would
// deadlock on the owner's own read hold, so it is refused; release the
// read hold first. It is also lock.ErrUpgrade.
var ErrUpgrade = errors.New("lock: cannot upgrade a read lock to a write lock")

// ErrInvalidMode is returned by TryAcquire and Acquire for a Mode that is
// neither Exclusive nor Shared.
var ErrInvalidMode = errors.New("lock: invalid mode")

// Mode is the way a lock is held. core/lock uses the same type (lock.Mode
// is an alias of it) for distributed locks.
type Mode int

// The modes: Exclusive (shield.mutex, shield.spinlock, rwlock:write_lock(),
// a distributed mutex) and Shared (rwlock:read_lock()).
const (
	// Exclusive excludes every other hold.
	Exclusive Mode = iota
	// Shared coexists with other shared holds and excludes exclusive ones
	// (except the owner's own: a writer may also read, see downgrades).
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
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

func validMode(m Mode) bool { return m == Exclusive || m == Shared }

// Request describes one acquisition.
type Request struct {
	// Name is the lock's name; every name is a distinct lock.
	Name string
	// Owner identifies the task that will hold the lock.
	Owner string
	// Mode is Exclusive (mutex, spinlock, write lock) or Shared (read lock).
	Mode Mode
	// Reentrant lets an owner that already holds Name in Mode take it again:
	// the hold's count goes up by one instead of the request
	// failing (TryAcquire) or queueing (Acquire).
	Reentrant bool
	// TTL > 0 makes the hold expire TTL after it is granted unless Extend
	// pushes it back, so a lock whose holder forgot it is freed. 0 (or
	// less) means no expiry. A reentrant acquisition never shortens an
	// existing expiry, never adds one to a hold that has none, and with
	// TTL > 0 pushes it to at least now+TTL.
	TTL time.Duration
	// Kind labels the hold for Snapshot (a re-entry keeps the label of
	// the hold it re-enters). The Manager gives it no other meaning.
	Kind Kind
}

// Kind is a caller's label of a hold (core/lock: mutex, spinlock, rwlock,
// the gate of a distributed lock). The Manager stores it with the hold and
// the waiter, as it stores the owner, and reports it in Snapshot.
type Kind uint8

// Hold describes the hold an owner has after an acquisition.
type Hold struct {
	// Count is the reentrancy count (1 for a first acquisition).
	Count int
	// AcquiredAt is when the hold went from count 0 to 1.
	AcquiredAt time.Time
	// ExpiresAt is when the whole hold (all counts) expires; zero = never.
	ExpiresAt time.Time
}

// OwnerHold is one owner's hold in Info.
type OwnerHold struct {
	// Owner is the holding task.
	Owner string
	// Mode of this hold; an owner that downgraded appears once per mode.
	Mode Mode
	// Count is the reentrancy count.
	Count int
	// AcquiredAt is when the hold went from count 0 to 1.
	AcquiredAt time.Time
	// ExpiresAt is when the hold expires; zero = no ttl.
	ExpiresAt time.Time
	// Kind is the Request.Kind that took the hold.
	Kind Kind
}

// Info is a snapshot of one held lock.
type Info struct {
	// Mode is Exclusive if some owner holds it Exclusive, else Shared.
	Mode Mode
	// Owners lists the holds, in order of AcquiredAt.
	Owners []OwnerHold
	// Waiting is the number of queued waiters.
	Waiting int
}

// Stats counts the Manager's locks.
type Stats struct {
	// Active is the number of names currently held.
	Active int
	// Waiting is the number of queued waiters over all names.
	Waiting int
}

const (
	shardBits      = 6
	numShards      = 1 << shardBits
	maxFreeEntries = 64   // recycled entries kept per shard
	shrinkMin      = 1024 // a shard map that once had this many names is rebuilt when it empties
)

// Manager holds every named in-process lock of a process. All its methods
// are safe for concurrent use. The zero Manager is not usable; call
// NewManager.
type Manager struct {
	now    func() time.Time
	seed   maphash.Seed
	shards [numShards]shard

	expiryOn atomic.Bool
	armedAt  atomic.Int64 // timerAt in Unix ns, 0 = timer not armed (fast check)
	tmu      sync.Mutex   // guards timer and timerAt
	timer    *time.Timer
	clk      func(time.Duration, func()) func() bool // UseClock: arms ctimer instead of timer
	ctimer   func() bool                             // stops the timer clk armed
	timerAt  time.Time
}

// shard is a slice of the name space with its own mutex, so that locks of
// different names rarely contend on the same mutex.
type shard struct {
	mu        sync.Mutex
	m         *Manager
	locks     map[string]*entry // only names that are held
	peak      int               // high-water mark of len(locks) since the map was made
	waiting   int
	heap      []*entry // entries with a ttl hold, by earliest expiry
	free      []*entry
	iterating bool // ReleaseAll ranges over locks: do not replace the map
	_         [64]byte
}

// NewManager returns an empty Manager. now is its clock for AcquiredAt,
// ExpiresAt and ttl expiry; nil means time.Now.
func NewManager(now func() time.Time) *Manager {
	if now == nil {
		now = time.Now
	}
	m := &Manager{now: now, seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].m = m
		m.shards[i].locks = make(map[string]*entry)
	}
	return m
}

func (m *Manager) shardFor(name string) *shard {
	return &m.shards[maphash.String(m.seed, name)&(numShards-1)]
}

// Waiter is a queued Acquire. Its grant callback is called exactly once,
// unless Cancel (or ReleaseAll) removes it from the queue first.
type Waiter struct {
	s          *shard
	e          *entry // while queued
	prev, next *Waiter
	gnext      *Waiter // in a batch of granted waiters
	owner      string
	mode       Mode
	reentrant  bool
	ttl        time.Duration
	grant      func(Hold)
	hold       Hold
	state      uint8
	kind       Kind
}

const (
	waitQueued uint8 = iota
	waitGranted
	waitCancelled
)

// Cancel removes the waiter from its queue (the task timed out or is gone)
// and reports true; its grant callback will then never be called. It
// reports false if the lock was already handed to the waiter: the owner
// then holds the lock and must Release it, and the grant callback has been
// or will be called (Granted returns the Hold at once). The decision is
// made under the manager lock, so Cancel racing with Release has exactly
// one of the two outcomes. Cancelling a waiter that was already cancelled,
// or that ReleaseAll cancelled, reports true.
func (w *Waiter) Cancel() bool {
	s := w.s
	s.mu.Lock()
	switch w.state {
	case waitGranted:
		s.mu.Unlock()
		return false
	case waitCancelled:
		s.mu.Unlock()
		return true
	}
	e := w.e
	wasHead := e.head == w
	s.dropWaiter(e, w)
	b := batch{clock: s.m.now}
	if wasHead {
		// The head may have been what blocked the next ones (an Exclusive
		// waiter in front of Shared ones while the lock is held Shared).
		s.dispatch(e, &b)
	}
	s.finish(e)
	s.mu.Unlock()
	b.run()
	return true
}

// Granted reports whether the lock has been handed to the waiter, and the
// Hold it was given. It never fails.
func (w *Waiter) Granted() (Hold, bool) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.state != waitGranted {
		return Hold{}, false
	}
	return w.hold, true
}

// batch collects the waiters granted under a shard lock, to call their
// callbacks after the lock is released; it also caches the clock reading.
type batch struct {
	clock      func() time.Time
	now        time.Time
	have       bool
	head, tail *Waiter
}

func (b *batch) time() time.Time {
	if !b.have {
		b.now, b.have = b.clock(), true
	}
	return b.now
}

func (b *batch) push(w *Waiter) {
	if b.tail == nil {
		b.head = w
	} else {
		b.tail.gnext = w
	}
	b.tail = w
}

func (b *batch) run() {
	if b.head != nil {
		runGrants(b.head)
	}
}

// runGrants calls the callbacks of a chain of granted waiters in order. If
// one panics, the rest are still called before the panic goes on, so no
// waiter is left holding a lock it was never told about.
func runGrants(w *Waiter) {
	for w != nil {
		next := w.gnext
		w.gnext = nil
		callGrant(w, next)
		w = next
	}
}

func callGrant(w, rest *Waiter) {
	g := w.grant
	w.grant = nil
	if g == nil {
		return
	}
	if rest != nil {
		defer func() {
			if p := recover(); p != nil {
				runGrants(rest)
				panic(p)
			}
		}()
	}
	g(w.hold)
}

// TryAcquire takes the lock at once and returns the Hold and true, or
// returns false without queueing: when another owner holds it
// incompatibly, when waiters are queued (no barging), or when the owner
// already holds it in that mode and r.Reentrant is false. An owner holding
// Exclusive always gets Shared at once (downgrade). Errors: ErrUpgrade
// (the owner holds it Shared and asks Exclusive), ErrInvalidMode. It is
// O(1) and does not allocate when the lock is free.
func (m *Manager) TryAcquire(r Request) (Hold, bool, error) {
	if !validMode(r.Mode) {
		return Hold{}, false, ErrInvalidMode
	}
	now := m.now()
	s := m.shardFor(r.Name)
	s.mu.Lock()
	e := s.locks[r.Name]
	if e == nil {
		h := s.create(r, now)
		s.mu.Unlock()
		return h, true, nil
	}
	b := batch{clock: m.now, now: now, have: true}
	s.touch(e, &b)
	h, ok, err := s.tryGrant(e, r, now)
	s.finish(e)
	s.mu.Unlock()
	b.run()
	return h, ok, err
}

// Acquire takes the lock at once if TryAcquire would (granted = true, w =
// nil, grant is not called), or queues the request at the tail of the
// name's FIFO queue and returns its Waiter. grant is then called exactly
// once, later, on whichever goroutine releases, cancels in front of, or
// expires the lock, after the lock has been handed to r.Owner (it already
// holds it when grant runs) and without any manager lock held; unless
// Waiter.Cancel or ReleaseAll removes the request first. A nil grant is
// allowed (poll Waiter.Granted). A non-reentrant request by an owner that
// already holds the lock in that mode queues behind itself, as a
// non-reentrant mutex would; only a release by another path (ttl expiry,
// ReleaseAll) or Cancel ends that wait. Errors: ErrUpgrade, ErrInvalidMode
// (nothing is queued then).
func (m *Manager) Acquire(r Request, grant func(Hold)) (h Hold, granted bool, w *Waiter, err error) {
	if !validMode(r.Mode) {
		return Hold{}, false, nil, ErrInvalidMode
	}
	now := m.now()
	s := m.shardFor(r.Name)
	s.mu.Lock()
	e := s.locks[r.Name]
	if e == nil {
		h = s.create(r, now)
		s.mu.Unlock()
		return h, true, nil, nil
	}
	b := batch{clock: m.now, now: now, have: true}
	s.touch(e, &b)
	h, granted, err = s.tryGrant(e, r, now)
	if !granted && err == nil {
		w = &Waiter{s: s, e: e, owner: r.Owner, mode: r.Mode, reentrant: r.Reentrant, ttl: r.TTL, grant: grant, kind: r.Kind}
		e.enqueue(w)
		s.waiting++
	}
	s.finish(e)
	s.mu.Unlock()
	b.run()
	return h, granted, w, err
}

// Release drops one level of owner's hold of name in mode. When the count
// reaches 0 the hold is gone and the lock is handed on in FIFO order: to
// the waiter at the head of the queue, or, for Shared, to every
// consecutive Shared waiter at the head together; their grant callbacks
// run on this goroutine before Release returns. It returns the remaining
// count. Errors: ErrNotHeld if owner holds nothing of name in mode (or its
// hold expired).
func (m *Manager) Release(name, owner string, mode Mode) (remaining int, err error) {
	s := m.shardFor(name)
	s.mu.Lock()
	e := s.locks[name]
	if e == nil {
		s.mu.Unlock()
		return 0, ErrNotHeld
	}
	b := batch{clock: m.now}
	s.touch(e, &b)
	if i := e.find(owner, mode); i < 0 {
		err = ErrNotHeld
	} else {
		e.holders[i].count--
		remaining = e.holders[i].count
		if remaining == 0 {
			e.remove(i)
			s.dispatch(e, &b)
		}
	}
	s.finish(e)
	s.mu.Unlock()
	b.run()
	return remaining, err
}

// Extend sets the expiry of owner's hold of name in mode to now+ttl
// (shortening or lengthening it); ttl <= 0 removes the expiry. Errors:
// ErrNotHeld if owner holds nothing of name in mode (or its hold already
// expired).
func (m *Manager) Extend(name, owner string, mode Mode, ttl time.Duration) error {
	now := m.now()
	s := m.shardFor(name)
	s.mu.Lock()
	e := s.locks[name]
	if e == nil {
		s.mu.Unlock()
		return ErrNotHeld
	}
	b := batch{clock: m.now, now: now, have: true}
	s.touch(e, &b)
	var err error
	if i := e.find(owner, mode); i < 0 {
		err = ErrNotHeld
	} else {
		var t time.Time
		if ttl > 0 {
			t = now.Add(ttl)
		}
		e.setExpires(i, t)
	}
	s.finish(e)
	s.mu.Unlock()
	b.run()
	return err
}

// Info returns a snapshot of lock name, and false if it is free (a free
// lock never has waiters). Holds that are due expire first. It never fails.
func (m *Manager) Info(name string) (Info, bool) {
	s := m.shardFor(name)
	s.mu.Lock()
	e := s.locks[name]
	if e == nil {
		s.mu.Unlock()
		return Info{}, false
	}
	b := batch{clock: m.now}
	s.touch(e, &b)
	var info Info
	ok := len(e.holders) > 0
	if ok {
		info.Mode = Shared
		if e.hasX {
			info.Mode = Exclusive
		}
		info.Waiting = e.nwait
		info.Owners = make([]OwnerHold, len(e.holders))
		for i, h := range e.holders {
			info.Owners[i] = h.ownerHold()
		}
	}
	s.finish(e)
	s.mu.Unlock()
	b.run()
	slices.SortFunc(info.Owners, func(a, b OwnerHold) int {
		return cmp.Or(a.AcquiredAt.Compare(b.AcquiredAt), cmp.Compare(a.Mode, b.Mode), strings.Compare(a.Owner, b.Owner))
	})
	return info, ok
}

// ReleaseAll drops every hold, whatever its count, whose owner starts with
// ownerPrefix ("" matches every owner), and cancels every queued waiter of
// such an owner (their grant callbacks are never called; Cancel on them
// reports true). Freed locks are handed on to the remaining waiters, whose
// grant callbacks run on this goroutine. It is meant for shutting down a
// runtime, visits every held name, and returns the number of holds dropped
// (one per owner and mode, not per count). It never fails.
func (m *Manager) ReleaseAll(ownerPrefix string) int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		b := batch{clock: m.now}
		s.mu.Lock()
		s.iterating = true
		for _, e := range s.locks {
			// Cancel the prefix's waiters first, so none of them is granted
			// by what follows.
			for w := e.head; w != nil; {
				next := w.next
				if strings.HasPrefix(w.owner, ownerPrefix) {
					s.dropWaiter(e, w)
				}
				w = next
			}
			s.touch(e, &b)
			for j := len(e.holders) - 1; j >= 0; j-- {
				if strings.HasPrefix(e.holders[j].owner, ownerPrefix) {
					e.remove(j)
					n++
				}
			}
			s.dispatch(e, &b)
			s.finish(e) // deleting the current key while ranging is fine
		}
		s.iterating = false
		s.maybeShrink()
		s.mu.Unlock()
		b.run()
	}
	return n
}

// Stats counts held names and queued waiters. Holds that are due but that
// nothing has touched yet are still counted. It never fails.
func (m *Manager) Stats() Stats {
	var st Stats
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		st.Active += len(s.locks)
		st.Waiting += s.waiting
		s.mu.Unlock()
	}
	return st
}

// create makes the entry of a free name, held by r.
func (s *shard) create(r Request, now time.Time) Hold {
	var e *entry
	if n := len(s.free); n > 0 {
		e = s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
	} else {
		e = newEntry()
	}
	e.name = r.Name
	h := e.add(r.Owner, r.Mode, r.Kind, now, r.TTL)
	s.locks[r.Name] = e
	if n := len(s.locks); n > s.peak {
		s.peak = n
	}
	if e.nttl > 0 {
		s.syncHeap(e)
	}
	return h
}

// tryGrant grants r on the existing entry e if it can be granted now.
func (s *shard) tryGrant(e *entry, r Request, now time.Time) (Hold, bool, error) {
	if i := e.find(r.Owner, r.Mode); i >= 0 {
		if !r.Reentrant {
			return Hold{}, false, nil
		}
		return e.reenter(i, now, r.TTL), true, nil
	}
	if r.Mode == Exclusive {
		if e.find(r.Owner, Shared) >= 0 {
			return Hold{}, false, ErrUpgrade
		}
		if len(e.holders) > 0 || e.head != nil {
			return Hold{}, false, nil
		}
	} else if !e.hasX || e.xowner != r.Owner { // not a downgrade
		if e.hasX || e.head != nil {
			return Hold{}, false, nil
		}
	}
	return e.add(r.Owner, r.Mode, r.Kind, now, r.TTL), true, nil
}

// touch expires e's due holds, if any, and hands the lock on.
func (s *shard) touch(e *entry, b *batch) {
	if e.nttl == 0 || b.time().Before(e.minExp) {
		return
	}
	e.expireDue(b.time())
	s.dispatch(e, b)
}

// dispatch grants the waiters at the head of e's queue for as long as they
// can be granted, in FIFO order, adding them to b.
func (s *shard) dispatch(e *entry, b *batch) {
	for w := e.head; w != nil; w = e.head {
		if !e.grantable(w) {
			return
		}
		e.unlink(w)
		s.waiting--
		now := b.time()
		if i := e.find(w.owner, w.mode); i >= 0 {
			w.hold = e.reenter(i, now, w.ttl)
		} else {
			w.hold = e.add(w.owner, w.mode, w.kind, now, w.ttl)
		}
		w.state = waitGranted
		w.e = nil
		b.push(w)
	}
}

func (s *shard) dropWaiter(e *entry, w *Waiter) {
	e.unlink(w)
	s.waiting--
	w.state = waitCancelled
	w.e = nil
	w.grant = nil
}

// finish ends every operation on e: it fixes e's place in the expiry heap
// and drops e if the lock is free.
func (s *shard) finish(e *entry) {
	s.syncHeap(e)
	if len(e.holders) > 0 || e.head != nil {
		return
	}
	delete(s.locks, e.name)
	e.reset()
	if len(s.free) < maxFreeEntries {
		s.free = append(s.free, e)
	}
	if !s.iterating {
		s.maybeShrink()
	}
}

// maybeShrink rebuilds the map after most of its names are gone: Go maps
// never give their buckets back, so a burst of distinct names would
// otherwise pin memory for good.
func (s *shard) maybeShrink() {
	if s.peak < shrinkMin {
		return
	}
	n := len(s.locks)
	switch {
	case n == 0:
		s.locks = make(map[string]*entry)
		s.peak = 0
	case n*8 < s.peak:
		// Not maps.Clone: it would keep the old table size.
		nm := make(map[string]*entry, n)
		for k, e := range s.locks {
			nm[k] = e
		}
		s.locks = nm
		s.peak = n
	}
}
