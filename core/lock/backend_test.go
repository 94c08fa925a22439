package lock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Helpers that run one backend operation, for tests that call backends
// directly. Like a Session, they remember each owner's hold (its token and
// count) per backend, name and mode: try re-enters the remembered hold
// (o.Token, unless the test set one), rel gives up one level of it, relAll
// every level, ext extends it. A test that wants to name another hold
// calls the backend itself.

type heldKey struct {
	b           Backend
	name, owner string
	mode        Mode
}

type heldHold struct {
	token int64
	count int
}

var (
	heldMu sync.Mutex
	held   = map[heldKey]heldHold{}
)

func heldOf(b Backend, name, owner string, mode Mode) heldHold {
	heldMu.Lock()
	defer heldMu.Unlock()
	return held[heldKey{b, name, owner, mode}]
}

func setHeld(b Backend, name, owner string, mode Mode, h heldHold) {
	heldMu.Lock()
	defer heldMu.Unlock()
	if h.count == 0 {
		delete(held, heldKey{b, name, owner, mode})
		return
	}
	held[heldKey{b, name, owner, mode}] = h
}

func try(ctx context.Context, b Backend, name, owner string, mode Mode, o Options) (Grant, bool, time.Duration, error) {
	h := heldOf(b, name, owner, mode)
	if o.Token == 0 {
		o.Token = h.token
	}
	a, err := b.TryAcquire(name, owner, mode, o).Do(ctx)
	switch {
	case a.Granted && a.Token == h.token:
		setHeld(b, name, owner, mode, heldHold{h.token, h.count + 1})
	case a.Granted:
		setHeld(b, name, owner, mode, heldHold{a.Token, 1})
	case errors.Is(err, ErrNotHeld) && o.Token == h.token:
		setHeld(b, name, owner, mode, heldHold{})
	}
	return a.Grant, a.Granted, a.RetryIn, err
}

// rel gives up one level of the remembered hold and returns the levels
// left.
func rel(ctx context.Context, b Backend, name, owner string, mode Mode) (int, error) {
	h := heldOf(b, name, owner, mode)
	return relKeep(ctx, b, name, owner, mode, h, max(h.count-1, 0))
}

func relAll(ctx context.Context, b Backend, name, owner string, mode Mode) (int, error) {
	return relKeep(ctx, b, name, owner, mode, heldOf(b, name, owner, mode), 0)
}

func relKeep(ctx context.Context, b Backend, name, owner string, mode Mode, h heldHold, keep int) (int, error) {
	_, err := b.Release(name, owner, mode, h.token, keep).Do(ctx)
	switch {
	case err == nil:
		setHeld(b, name, owner, mode, heldHold{h.token, keep})
	case errors.Is(err, ErrNotHeld):
		setHeld(b, name, owner, mode, heldHold{})
	}
	return keep, err
}

func ext(ctx context.Context, b Backend, name, owner string, mode Mode, ttl time.Duration) error {
	_, err := b.Extend(name, owner, mode, heldOf(b, name, owner, mode).token, ttl).Do(ctx)
	return err
}

func inf(ctx context.Context, b Backend, name string) (Info, bool, error) {
	info, err := b.Info(name).Do(ctx)
	return info, info.Held, err
}

func leave(ctx context.Context, b Backend, name, owner string) error {
	_, err := b.LeaveQueue(name, owner).Do(ctx)
	return err
}

// watchB sets up a watch and waits until it is active (or failed).
func watchB(ctx context.Context, b Backend, name string, fn func()) (func(), error) {
	ready := make(chan error, 1)
	cancel := b.Watch(name, fn, func(err error) { ready <- err })
	select {
	case err := <-ready:
		if err != nil {
			cancel()
			return nil, err
		}
		return cancel, nil
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
}
