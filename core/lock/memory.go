package lock

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/core/store"
)

// Memory is an in-process Backend with the same semantics as Redis, step
// for step (the conformance suite checks both): leases, re-entry, shared
// holds with their own leases, fencing tokens, the fair queue and writer
// intents with purging of silent waiters, and wake-ups. Its operations are
// local (store.Local): they run where the caller runs them, without I/O.
//
// It starts no goroutine: leases and waiter deadlines are compared with the
// clock when the lock is next touched. Watch callbacks are called
// synchronously by the goroutine whose Release (or queue change) triggers
// them, after the backend's mutex is released, so they may call the
// backend. Token counters are kept for every name ever locked, like the
// Redis token keys. Operations fail only on invalid arguments, with the
// sentinels.
type Memory struct {
	now func() time.Time
	bus *pubsub.Memory // wake-ups; its channels are lock names

	mu     sync.Mutex
	locks  map[string]*memLock
	tokens map[string]int64
}

type memLock struct {
	// The exclusive hold; owner == "" when there is none.
	owner    string
	count    int
	token    int64
	acquired int64 // ms
	exp      int64 // ms; alive while now <= exp

	readers map[string]*memHold
	queue   []memWaiter      // fair waiters in arrival order
	writers map[string]int64 // waiting writers (not fair) -> liveness deadline (ms)
}

type memHold struct {
	count    int
	token    int64
	acquired int64 // ms
	exp      int64 // ms; alive while now <= exp
}

type memWaiter struct {
	owner    string
	deadline int64 // ms; purged once now > deadline
}

var _ Backend = (*Memory)(nil)

// NewMemory returns an empty in-process backend that reads the time from
// now (time.Now when nil; tests pass a fake clock). It never fails.
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{
		now:    now,
		bus:    pubsub.NewMemory(),
		locks:  make(map[string]*memLock),
		tokens: make(map[string]int64),
	}
}

func (m *Memory) nowMs() int64 { return m.now().UnixMilli() }

// state returns name's lock (creating it) with ended leases and silent
// waiters removed.
func (m *Memory) state(name string, now int64) *memLock {
	l := m.locks[name]
	if l == nil {
		l = &memLock{readers: make(map[string]*memHold), writers: make(map[string]int64)}
		m.locks[name] = l
	}
	l.purgeHolds(now)
	l.purgeWaiters(now)
	l.purgeWriters(now)
	return l
}

func (l *memLock) purgeHolds(now int64) {
	if l.owner != "" && now > l.exp {
		l.owner = ""
	}
	for o, h := range l.readers {
		if now > h.exp {
			delete(l.readers, o)
		}
	}
}

func (l *memLock) purgeWaiters(now int64) {
	l.queue = slices.DeleteFunc(l.queue, func(w memWaiter) bool { return now > w.deadline })
}

func (l *memLock) purgeWriters(now int64) {
	for o, d := range l.writers {
		if now > d {
			delete(l.writers, o)
		}
	}
}

// otherWriter returns the earliest liveness deadline of another owner's
// live writer intent.
func (l *memLock) otherWriter(owner string, now int64) (int64, bool) {
	var first int64
	found := false
	for o, d := range l.writers {
		if o != owner && d >= now && (!found || d < first) {
			first, found = d, true
		}
	}
	return first, found
}

func (l *memLock) liveWriters(now int64) int {
	n := 0
	for _, d := range l.writers {
		if d >= now {
			n++
		}
	}
	return n
}

// gc forgets name's lock when nothing is left of it (tokens stay).
func (m *Memory) gc(name string, l *memLock) {
	if l.owner == "" && len(l.readers) == 0 && len(l.queue) == 0 && len(l.writers) == 0 {
		delete(m.locks, name)
	}
}

func (l *memLock) head() string {
	if len(l.queue) == 0 {
		return ""
	}
	return l.queue[0].owner
}

func (l *memLock) queued(owner string) int {
	return slices.IndexFunc(l.queue, func(w memWaiter) bool { return w.owner == owner })
}

// enqueue puts owner at the tail (if not queued yet) and pushes its
// liveness deadline.
func (l *memLock) enqueue(owner string, deadline int64) {
	if i := l.queued(owner); i >= 0 {
		l.queue[i].deadline = deadline
		return
	}
	l.queue = append(l.queue, memWaiter{owner: owner, deadline: deadline})
}

func (l *memLock) leave(owner string) bool {
	if i := l.queued(owner); i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
		return true
	}
	return false
}

// readersLeft is the time until every shared hold has ended.
func (l *memLock) readersLeft(now int64) int64 {
	var last int64
	for _, h := range l.readers {
		last = max(last, h.exp)
	}
	return max(last-now, 1)
}

// notify wakes name's watchers; called without m.mu held.
func (m *Memory) notify(name string) {
	m.bus.Publish(context.Background(), name, nil)
}

// TryAcquire makes one attempt, exactly as scripts/acquire.lua does.
// Errors: ErrUpgrade, ErrInvalid.
func (m *Memory) TryAcquire(name, owner string, mode Mode, o Options) *store.Op[Attempt] {
	const op = "acquire"
	if err := checkArgs(op, name, owner, mode); err != nil {
		return store.Failed[Attempt](err)
	}
	if err := checkTTL(op, name, o.TTL); err != nil {
		return store.Failed[Attempt](err)
	}
	return store.Local(func() (Attempt, error) { return m.tryAcquire(name, owner, mode, o) })
}

func (m *Memory) tryAcquire(name, owner string, mode Mode, o Options) (Attempt, error) {
	const op = "acquire"
	ttl := ttlMillis(o.TTL)
	wttl := waiterTTL(o)

	m.mu.Lock()
	now := m.nowMs()
	l := m.locks[name]
	headBefore := ""
	if l != nil {
		headBefore = l.head() // before purging, like the script
	}
	if o.Fair && l != nil {
		if i := l.queued(owner); i >= 0 {
			l.queue[i].deadline = now + wttl // alive: refresh before purging
		}
	}
	l = m.state(name, now)
	code, g, retry := m.attempt(l, name, owner, mode, o, now, ttl, wttl)
	wake := headBefore != "" && l.head() != "" && l.head() != headBefore && l.owner == ""
	m.gc(name, l)
	m.mu.Unlock()

	if wake {
		m.notify(name)
	}
	switch code {
	case stGranted:
		return Attempt{Granted: true, Grant: g}, nil
	case stRefused:
		return Attempt{RetryIn: time.Duration(retry) * time.Millisecond}, nil
	}
	return Attempt{}, statusErr(op, name, code)
}

func (m *Memory) attempt(l *memLock, name, owner string, mode Mode, o Options, now, ttl, wttl int64) (code int64, g Grant, retryIn int64) {
	refuse := func(retry int64) (int64, Grant, int64) {
		switch {
		case !o.Waiting:
		case o.Fair:
			l.enqueue(owner, now+wttl)
		case mode == Exclusive:
			l.purgeWriters(now)
			l.writers[owner] = now + wttl
		}
		return stRefused, Grant{}, retry
	}
	grant := func(token int64, count int, acquired int64) (int64, Grant, int64) {
		return stGranted, Grant{
			Token:      token,
			Count:      count,
			AcquiredAt: time.UnixMilli(acquired),
			TTL:        time.Duration(ttl) * time.Millisecond,
		}, 0
	}
	pttl := func() int64 { return max(l.exp-now, 1) }

	holder := l.owner
	if mode == Exclusive {
		if holder == owner && l.token == o.Token {
			if !o.Reentrant {
				return stRefused, Grant{}, pttl()
			}
			l.count++
			l.exp = now + ttl
			return grant(l.token, l.count, l.acquired)
		}
		if o.Token != 0 {
			return stNotHeld, Grant{}, 0 // the re-entry's hold is gone
		}
		if holder != "" {
			return refuse(pttl()) // another owner's, or a stale hold of owner
		}
		if _, ok := l.readers[owner]; ok {
			return stUpgrade, Grant{}, 0
		}
		if len(l.readers) > 0 {
			return refuse(l.readersLeft(now))
		}
	} else {
		h, ok := l.readers[owner]
		if ok && h.token == o.Token {
			if !o.Reentrant {
				return stRefused, Grant{}, max(h.exp-now, 1)
			}
			h.count++
			h.exp = now + ttl
			return grant(h.token, h.count, h.acquired)
		}
		if o.Token != 0 {
			return stNotHeld, Grant{}, 0
		}
		if ok {
			return refuse(max(h.exp-now, 1)) // a stale shared hold of owner
		}
		if holder != "" && holder != owner {
			return refuse(pttl())
		}
		if !o.Fair && holder != owner {
			if d, ok := l.otherWriter(owner, now); ok {
				return stRefused, Grant{}, max(d-now, 1)
			}
		}
	}

	if o.Fair && holder != owner {
		if h := l.head(); h != "" && h != owner {
			if o.Waiting {
				l.enqueue(owner, now+wttl)
			}
			return stRefused, Grant{}, max(l.queue[0].deadline-now, 1)
		}
	}
	l.leave(owner)
	if mode == Exclusive {
		delete(l.writers, owner)
	}

	token := max(m.tokens[name]+1, now*TokensPerMs)
	m.tokens[name] = token
	if mode == Exclusive {
		l.owner, l.count, l.token, l.acquired, l.exp = owner, 1, token, now, now+ttl
	} else {
		l.readers[owner] = &memHold{count: 1, token: token, acquired: now, exp: now + ttl}
	}
	return grant(token, 1, now)
}

// Release gives up levels of owner's hold with token down to keep,
// exactly as scripts/release_exclusive.lua and release_shared.lua do.
// Errors: ErrNotHeld, ErrInvalid.
func (m *Memory) Release(name, owner string, mode Mode, token int64, keep int) *store.Op[None] {
	if err := checkRelease("release", name, owner, mode, keep); err != nil {
		return store.Failed[None](err)
	}
	return store.Local(func() (None, error) { return None{}, m.release(name, owner, mode, token, keep) })
}

func (m *Memory) release(name, owner string, mode Mode, token int64, keep int) error {
	const op = "release"
	m.mu.Lock()
	l := m.state(name, m.nowMs())
	wake, code := false, int64(stGranted)
	if mode == Exclusive {
		switch {
		case l.owner != owner || l.token != token:
			code = stNotHeld
		case keep > 0:
			l.count = keep
		default:
			l.owner = ""
			wake = true
		}
	} else {
		switch h, ok := l.readers[owner]; {
		case !ok || h.token != token:
			code = stNotHeld
		case keep > 0:
			h.count = keep
		default:
			delete(l.readers, owner)
			wake = len(l.readers) == 0
		}
	}
	m.gc(name, l)
	m.mu.Unlock()
	if code != stGranted {
		return statusErr(op, name, code)
	}
	if wake {
		m.notify(name)
	}
	return nil
}

// Extend resets owner's lease to ttl, exactly as scripts/extend.lua does.
// Errors: ErrNotHeld, ErrInvalid.
func (m *Memory) Extend(name, owner string, mode Mode, token int64, ttl time.Duration) *store.Op[None] {
	const op = "extend"
	if err := checkArgs(op, name, owner, mode); err != nil {
		return store.Failed[None](err)
	}
	if err := checkTTL(op, name, ttl); err != nil {
		return store.Failed[None](err)
	}
	return store.Local(func() (None, error) { return None{}, m.extend(name, owner, mode, token, ttl) })
}

func (m *Memory) extend(name, owner string, mode Mode, token int64, ttl time.Duration) error {
	const op = "extend"
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMs()
	l := m.state(name, now)
	defer m.gc(name, l)
	if mode == Exclusive {
		if l.owner != owner || l.token != token {
			return statusErr(op, name, stNotHeld)
		}
		l.exp = now + ttlMillis(ttl)
		return nil
	}
	h, ok := l.readers[owner]
	if !ok || h.token != token {
		return statusErr(op, name, stNotHeld)
	}
	h.exp = now + ttlMillis(ttl)
	return nil
}

// Info returns name's state, as scripts/info.lua does. Errors: ErrInvalid.
func (m *Memory) Info(name string) *store.Op[Info] {
	if err := checkName("info", name); err != nil {
		return store.Failed[Info](err)
	}
	return store.Local(func() (Info, error) { return m.info(name), nil })
}

func (m *Memory) info(name string) Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMs()
	l := m.state(name, now)
	defer m.gc(name, l)
	info := Info{Waiting: len(l.queue) + l.liveWriters(now)}
	switch {
	case l.owner != "":
		info.Held = true
		info.Mode = Exclusive
		info.Owners = []Holder{{Owner: l.owner, Count: l.count}}
		info.TTL = time.Duration(max(l.exp-now, 0)) * time.Millisecond
		info.AcquiredAt = time.UnixMilli(l.acquired)
		info.Token = l.token
	case len(l.readers) > 0:
		info.Held = true
		info.Mode = Shared
		var last, oldest int64
		for o, h := range l.readers {
			info.Owners = append(info.Owners, Holder{Owner: o, Count: h.count})
			last = max(last, h.exp)
			if oldest == 0 || h.acquired < oldest {
				oldest = h.acquired
			}
			info.Token = max(info.Token, h.token)
		}
		slices.SortFunc(info.Owners, func(a, b Holder) int { return strings.Compare(a.Owner, b.Owner) })
		info.TTL = time.Duration(max(last-now, 0)) * time.Millisecond
		info.AcquiredAt = time.UnixMilli(oldest)
	}
	return info
}

// LeaveQueue removes owner from name's fair queue and its writer intent, as
// scripts/leave.lua does. Errors: ErrInvalid.
func (m *Memory) LeaveQueue(name, owner string) *store.Op[None] {
	if err := checkArgs("leave queue", name, owner, Exclusive); err != nil {
		return store.Failed[None](err)
	}
	return store.Local(func() (None, error) { m.leaveQueue(name, owner); return None{}, nil })
}

func (m *Memory) leaveQueue(name, owner string) {
	m.mu.Lock()
	l := m.locks[name]
	wake := false
	if l != nil {
		now := m.nowMs()
		free := l.owner == "" || now > l.exp
		if _, ok := l.writers[owner]; ok {
			delete(l.writers, owner)
			if l.liveWriters(now) == 0 && free {
				wake = true
			}
		}
		wasHead := l.head() == owner
		// The script does not purge here; neither does this.
		if l.leave(owner) && wasHead && l.head() != "" && free {
			wake = true
		}
		m.gc(name, l)
	}
	m.mu.Unlock()
	if wake {
		m.notify(name)
	}
}

// Watch registers fn for name's wake-ups until cancel; ready is called
// before it returns. ready fails with ErrInvalid.
func (m *Memory) Watch(name string, fn func(), ready func(error)) func() {
	const op = "watch"
	if err := checkName(op, name); err != nil {
		ready(err)
		return func() {}
	}
	if fn == nil {
		ready(invalid(op, name, "nil func"))
		return func() {}
	}
	sub, err := m.bus.Subscribe(context.Background(), name, func(pubsub.Message) { fn() })
	if err != nil {
		ready(opErr(op, name, err))
		return func() {}
	}
	ready(nil)
	return sub.Unsubscribe
}
