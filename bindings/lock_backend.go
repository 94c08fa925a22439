package bindings

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/lock/local"
)

// Locks backs the lock capability: in-process locks (shield.mutex, rwlock,
// spinlock), shared by every runtime of the Module, and distributed locks
// (shield.distributed_mutex, distributed_rwlock, lock()).
type Locks struct {
	Local *local.Manager
	Dist  lock.Backend
	// DistInline is true when Dist does no I/O (memory backend).
	DistInline bool
	// Redlock is non-nil when lock.redlock is enabled: distributed mutexes use it.
	Redlock lock.Backend
	Config  config.Lock
}

var (
	errNotHeld = errors.New("not held")
	errTimeout = errors.New("timeout")
)

// grant is what an acquire obtained.
type grant struct {
	token      int64
	count      int
	acquiredAt time.Time
	ttl        time.Duration
}

// holderInfo describes the current holders of a lock, for owner/ttl/info.
type holderInfo struct {
	owners     []string
	count      int
	ttl        time.Duration // < 0: no expiry
	acquiredAt time.Time
	token      int64
}

// lockOpts are a lock object's options, defaults from the lock config.
type lockOpts struct {
	ttl        time.Duration
	retry      time.Duration
	maxRetries int
	reentrant  bool
	wait       time.Duration // default acquire timeout, 0 = forever
	fair       bool
	autoExtend bool
	interval   time.Duration
	spin       bool
}

// lockImpl is one backend of lock objects: the in-process manager or a
// distributed backend.
type lockImpl interface {
	inline() bool
	try(ctx context.Context, name, owner string, mode lock.Mode, o lockOpts) (grant, bool, error)
	// wait acquires, waiting up to timeout (0 = forever); done is called
	// exactly once, from any goroutine. The returned cancel gives up a
	// pending wait at runtime shutdown (done then reports errTimeout or a
	// grant that the caller releases).
	wait(ctx context.Context, name, owner string, mode lock.Mode, o lockOpts, timeout time.Duration, done func(grant, error)) (cancel func())
	release(ctx context.Context, name, owner string, mode lock.Mode) (int, error)
	extend(ctx context.Context, name, owner string, mode lock.Mode, ttl time.Duration) error
	info(ctx context.Context, name string, mode lock.Mode) (holderInfo, bool, error)
}

// localImpl adapts the in-process lock manager. Waiting is a queued
// callback: no goroutine per waiter; FIFO hand-off on release.
type localImpl struct{ m *local.Manager }

func mapLocalErr(err error) error {
	switch {
	case errors.Is(err, local.ErrNotHeld):
		return errNotHeld
	case errors.Is(err, local.ErrUpgrade):
		return lock.ErrUpgrade
	}
	return err
}

func (l localImpl) inline() bool { return true }

func (l localImpl) request(name, owner string, mode lock.Mode, o lockOpts) local.Request {
	return local.Request{Name: name, Owner: owner, Mode: mode, Reentrant: o.reentrant, TTL: o.ttl}
}

func (l localImpl) try(_ context.Context, name, owner string, mode lock.Mode, o lockOpts) (grant, bool, error) {
	r := l.request(name, owner, mode, o)
	h, ok, err := l.m.TryAcquire(r)
	// A spinlock busy-waits a little for a holder on another goroutine
	// (another Lua state) before it queues, so a short hold costs no yield.
	for i := 0; o.spin && !ok && err == nil && i < 64; i++ {
		runtime.Gosched()
		h, ok, err = l.m.TryAcquire(r)
	}
	return grant{count: h.Count, acquiredAt: h.AcquiredAt, ttl: o.ttl}, ok, mapLocalErr(err)
}

func (l localImpl) wait(_ context.Context, name, owner string, mode lock.Mode, o lockOpts, timeout time.Duration, done func(grant, error)) func() {
	h, granted, w, err := l.m.Acquire(l.request(name, owner, mode, o), func(h local.Hold) {
		done(grant{count: h.Count, acquiredAt: h.AcquiredAt, ttl: o.ttl}, nil)
	})
	switch {
	case err != nil:
		done(grant{}, mapLocalErr(err))
		return func() {}
	case granted:
		done(grant{count: h.Count, acquiredAt: h.AcquiredAt, ttl: o.ttl}, nil)
		return func() {}
	}
	giveUp := func() {
		if w.Cancel() {
			done(grant{}, errTimeout)
		}
	}
	if timeout > 0 {
		t := time.AfterFunc(timeout, giveUp)
		return func() { t.Stop(); giveUp() }
	}
	return giveUp
}

func (l localImpl) release(_ context.Context, name, owner string, mode lock.Mode) (int, error) {
	n, err := l.m.Release(name, owner, mode)
	return n, mapLocalErr(err)
}

func (l localImpl) extend(_ context.Context, name, owner string, mode lock.Mode, ttl time.Duration) error {
	return mapLocalErr(l.m.Extend(name, owner, mode, ttl))
}

func (l localImpl) info(_ context.Context, name string, mode lock.Mode) (holderInfo, bool, error) {
	in, ok := l.m.Info(name)
	if !ok || len(in.Owners) == 0 {
		return holderInfo{}, false, nil
	}
	hi := holderInfo{ttl: -1}
	for _, o := range in.Owners {
		if o.Mode != mode && len(in.Owners) > 1 {
			continue
		}
		hi.owners = append(hi.owners, o.Owner)
		hi.count += o.Count
		if hi.acquiredAt.IsZero() || o.AcquiredAt.Before(hi.acquiredAt) {
			hi.acquiredAt = o.AcquiredAt
		}
		if !o.ExpiresAt.IsZero() {
			if left := time.Until(o.ExpiresAt); hi.ttl < 0 || left < hi.ttl {
				hi.ttl = max(left, 0)
			}
		}
	}
	return hi, len(hi.owners) > 0, nil
}

// distImpl adapts a distributed backend (Redis, Redlock or memory). The
// tasks of one process first queue at a local FIFO gate of the same name
// and mode, so only one waiter per process and lock contends in Redis: a
// release wakes one process's waiter, not every task that waits.
type distImpl struct {
	b        lock.Backend
	gate     localImpl
	isInline bool
	run      func(func()) // the runtime's workers
}

// gateName keeps gate names apart from the names of scripts' own local locks.
func gateName(name string) string { return "\x00dist\x00" + name }

func mapDistErr(err error) error {
	switch {
	case errors.Is(err, lock.ErrNotHeld):
		return errNotHeld
	case errors.Is(err, lock.ErrNotObtained):
		return errTimeout
	}
	return err
}

func (d distImpl) inline() bool { return d.isInline }

func (d distImpl) options(o lockOpts) lock.Options {
	return lock.Options{TTL: o.ttl, Reentrant: o.reentrant, Fair: o.fair}
}

// gateOpts: the gate lives as long as the lease (extended with it), so a
// forgotten lock frees the gate when Redis frees the lock.
func (d distImpl) gateOpts(o lockOpts) lockOpts {
	return lockOpts{reentrant: o.reentrant, ttl: o.ttl}
}

func toGrant(g lock.Grant) grant {
	return grant{token: g.Token, count: g.Count, acquiredAt: g.AcquiredAt, ttl: g.TTL}
}

func (d distImpl) try(ctx context.Context, name, owner string, mode lock.Mode, o lockOpts) (grant, bool, error) {
	if _, ok, err := d.gate.try(ctx, gateName(name), owner, mode, d.gateOpts(o)); !ok || err != nil {
		return grant{}, false, err
	}
	g, ok, _, err := d.b.TryAcquire(ctx, name, owner, mode, d.options(o))
	if !ok || err != nil {
		d.gate.release(ctx, gateName(name), owner, mode)
		if err == nil && o.fair {
			// A fair try that was not granted left a queue entry: take it out.
			_ = d.b.LeaveQueue(ctx, name, owner)
		}
	}
	return toGrant(g), ok, mapDistErr(err)
}

func (d distImpl) wait(ctx context.Context, name, owner string, mode lock.Mode, o lockOpts, timeout time.Duration, done func(grant, error)) func() {
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	var cancelGate func()
	cancelGate = d.gate.wait(ctx, gateName(name), owner, mode, d.gateOpts(o), timeout, func(_ grant, err error) {
		if err != nil {
			cancel()
			done(grant{}, err)
			return
		}
		d.run(func() {
			defer cancel()
			g, err := lock.Acquire(ctx, d.b, name, owner, mode, d.options(o), o.retry, o.maxRetries)
			if err != nil {
				d.gate.release(ctx, gateName(name), owner, mode)
			}
			done(toGrant(g), mapDistErr(err))
		})
	})
	return func() { cancel(); cancelGate() }
}

func (d distImpl) release(ctx context.Context, name, owner string, mode lock.Mode) (int, error) {
	n, err := d.b.Release(ctx, name, owner, mode)
	err = mapDistErr(err)
	if err == nil || errors.Is(err, errNotHeld) {
		d.gate.release(ctx, gateName(name), owner, mode)
	}
	return n, err
}

func (d distImpl) extend(ctx context.Context, name, owner string, mode lock.Mode, ttl time.Duration) error {
	err := mapDistErr(d.b.Extend(ctx, name, owner, mode, ttl))
	if err == nil {
		_ = d.gate.extend(ctx, gateName(name), owner, mode, ttl)
	}
	return err
}

func (d distImpl) info(ctx context.Context, name string, mode lock.Mode) (holderInfo, bool, error) {
	in, ok, err := d.b.Info(ctx, name)
	if err != nil || !ok || len(in.Owners) == 0 {
		return holderInfo{}, false, err
	}
	hi := holderInfo{ttl: in.TTL, acquiredAt: in.AcquiredAt, token: in.Token}
	for _, h := range in.Owners {
		hi.owners = append(hi.owners, h.Owner)
		hi.count += h.Count
	}
	return hi, true, nil
}
