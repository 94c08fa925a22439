package lock

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/core/pubsub"
)

// Memory is an in-process Backend with the same semantics as Redis, step
// for step (the conformance suite checks both): leases, re-entry, shared
// holds with their own leases, fencing tokens, the fair queue with purging
// of silent waiters, and wake-ups.
//
// It starts no goroutine: leases and waiter deadlines are compared with the
// clock when the lock is next touched. Watch callbacks are called
// synchronously by the goroutine whose Release (or queue change) triggers
// them, after the backend's mutex is released, so they may call the
// backend. Token counters are kept for every name ever locked, like the
// Redis token keys. Methods fail only on invalid arguments, with the
// sentinels, or when ctx is already done.
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
	queue   []memWaiter // fair waiters in arrival order
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
		l = &memLock{readers: make(map[string]*memHold)}
		m.locks[name] = l
	}
	l.purgeHolds(now)
	l.purgeWaiters(now)
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

// gc forgets name's lock when nothing is left of it (tokens stay).
func (m *Memory) gc(name string, l *memLock) {
	if l.owner == "" && len(l.readers) == 0 && len(l.queue) == 0 {
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
// Errors: ErrUpgrade, ErrInvalid, ctx's error.
func (m *Memory) TryAcquire(ctx context.Context, name, owner string, mode Mode, o Options) (Grant, bool, time.Duration, error) {
	const op = "acquire"
	if err := checkArgs(op, name, owner, mode); err != nil {
		return Grant{}, false, 0, err
	}
	if err := checkTTL(op, name, o.TTL); err != nil {
		return Grant{}, false, 0, err
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, false, 0, opErr(op, name, err)
	}
	ttl := ttlMillis(o.TTL)
	wttl := ttlMillis(DefaultWaiterTTL(0))
	if o.WaiterTTL > 0 {
		wttl = ttlMillis(o.WaiterTTL)
	}

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
		return g, true, 0, nil
	case stRefused:
		return Grant{}, false, time.Duration(retry) * time.Millisecond, nil
	}
	return Grant{}, false, 0, statusErr(op, name, code)
}

func (m *Memory) attempt(l *memLock, name, owner string, mode Mode, o Options, now, ttl, wttl int64) (code int64, g Grant, retryIn int64) {
	refuse := func(retry int64) (int64, Grant, int64) {
		if o.Fair {
			l.enqueue(owner, now+wttl)
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
		if holder == owner {
			if !o.Reentrant {
				return stRefused, Grant{}, pttl()
			}
			l.count++
			l.exp = now + ttl
			return grant(l.token, l.count, l.acquired)
		}
		if holder != "" {
			return refuse(pttl())
		}
		if _, ok := l.readers[owner]; ok {
			return stUpgrade, Grant{}, 0
		}
		if len(l.readers) > 0 {
			return refuse(l.readersLeft(now))
		}
	} else {
		if h, ok := l.readers[owner]; ok {
			if !o.Reentrant {
				return stRefused, Grant{}, max(h.exp-now, 1)
			}
			h.count++
			h.exp = now + ttl
			return grant(h.token, h.count, h.acquired)
		}
		if holder != "" && holder != owner {
			return refuse(pttl())
		}
	}

	if o.Fair && holder != owner {
		if h := l.head(); h != "" && h != owner {
			l.enqueue(owner, now+wttl)
			return stRefused, Grant{}, max(l.queue[0].deadline-now, 1)
		}
	}
	l.leave(owner)

	m.tokens[name]++
	token := m.tokens[name]
	if mode == Exclusive {
		l.owner, l.count, l.token, l.acquired, l.exp = owner, 1, token, now, now+ttl
	} else {
		l.readers[owner] = &memHold{count: 1, token: token, acquired: now, exp: now + ttl}
	}
	return grant(token, 1, now)
}

// Release gives up one level of owner's hold, exactly as
// scripts/release.lua does. Errors: ErrNotHeld, ErrInvalid, ctx's error.
func (m *Memory) Release(ctx context.Context, name, owner string, mode Mode) (int, error) {
	const op = "release"
	if err := checkArgs(op, name, owner, mode); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, opErr(op, name, err)
	}
	m.mu.Lock()
	l := m.state(name, m.nowMs())
	remaining, wake, code := -1, false, int64(stGranted)
	if mode == Exclusive {
		if l.owner != owner {
			code = stNotHeld
		} else {
			l.count--
			remaining = l.count
			if l.count == 0 {
				l.owner = ""
				wake = true
			}
		}
	} else {
		if h, ok := l.readers[owner]; !ok {
			code = stNotHeld
		} else {
			h.count--
			remaining = h.count
			if h.count == 0 {
				delete(l.readers, owner)
				wake = len(l.readers) == 0
			}
		}
	}
	m.gc(name, l)
	m.mu.Unlock()
	if code != stGranted {
		return 0, statusErr(op, name, code)
	}
	if wake {
		m.notify(name)
	}
	return remaining, nil
}

// Extend resets owner's lease to ttl, exactly as scripts/extend.lua does.
// Errors: ErrNotHeld, ErrInvalid, ctx's error.
func (m *Memory) Extend(ctx context.Context, name, owner string, mode Mode, ttl time.Duration) error {
	const op = "extend"
	if err := checkArgs(op, name, owner, mode); err != nil {
		return err
	}
	if err := checkTTL(op, name, ttl); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return opErr(op, name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMs()
	l := m.state(name, now)
	defer m.gc(name, l)
	if mode == Exclusive {
		if l.owner != owner {
			return statusErr(op, name, stNotHeld)
		}
		l.exp = now + ttlMillis(ttl)
		return nil
	}
	h, ok := l.readers[owner]
	if !ok {
		return statusErr(op, name, stNotHeld)
	}
	h.exp = now + ttlMillis(ttl)
	return nil
}

// Info returns name's state, as scripts/info.lua does. Errors: ErrInvalid,
// ctx's error.
func (m *Memory) Info(ctx context.Context, name string) (Info, bool, error) {
	const op = "info"
	if err := checkName(op, name); err != nil {
		return Info{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, false, opErr(op, name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMs()
	l := m.state(name, now)
	defer m.gc(name, l)
	info := Info{Waiting: len(l.queue)}
	switch {
	case l.owner != "":
		info.Mode = Exclusive
		info.Owners = []Holder{{Owner: l.owner, Count: l.count}}
		info.TTL = time.Duration(max(l.exp-now, 0)) * time.Millisecond
		info.AcquiredAt = time.UnixMilli(l.acquired)
		info.Token = l.token
	case len(l.readers) > 0:
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
	default:
		return info, false, nil
	}
	return info, true, nil
}

// LeaveQueue removes owner from name's fair queue, as scripts/leave.lua
// does. Errors: ErrInvalid, ctx's error.
func (m *Memory) LeaveQueue(ctx context.Context, name, owner string) error {
	const op = "leave queue"
	if err := checkArgs(op, name, owner, Exclusive); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return opErr(op, name, err)
	}
	m.mu.Lock()
	l := m.locks[name]
	wake := false
	if l != nil {
		wasHead := l.head() == owner
		// The script does not purge here; neither does this.
		if l.leave(owner) && wasHead && l.head() != "" && (l.owner == "" || m.nowMs() > l.exp) {
			wake = true
		}
		m.gc(name, l)
	}
	m.mu.Unlock()
	if wake {
		m.notify(name)
	}
	return nil
}

// Watch registers fn for name's wake-ups until cancel. Errors: ErrInvalid,
// ctx's error.
func (m *Memory) Watch(ctx context.Context, name string, fn func()) (func(), error) {
	const op = "watch"
	if err := checkName(op, name); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, invalid(op, name, "nil func")
	}
	if err := ctx.Err(); err != nil {
		return nil, opErr(op, name, err)
	}
	sub, err := m.bus.Subscribe(ctx, name, func(pubsub.Message) { fn() })
	if err != nil {
		return nil, opErr(op, name, err)
	}
	return sub.Unsubscribe, nil
}
