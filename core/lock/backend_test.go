package lock

import (
	"context"
	"time"
)

// Helpers that run one backend operation, for tests that call backends
// directly.

func try(ctx context.Context, b Backend, name, owner string, mode Mode, o Options) (Grant, bool, time.Duration, error) {
	a, err := b.TryAcquire(name, owner, mode, o).Do(ctx)
	return a.Grant, a.Granted, a.RetryIn, err
}

func rel(ctx context.Context, b Backend, name, owner string, mode Mode) (int, error) {
	return b.Release(name, owner, mode, false).Do(ctx)
}

func relAll(ctx context.Context, b Backend, name, owner string, mode Mode) (int, error) {
	return b.Release(name, owner, mode, true).Do(ctx)
}

func ext(ctx context.Context, b Backend, name, owner string, mode Mode, ttl time.Duration) error {
	_, err := b.Extend(name, owner, mode, ttl).Do(ctx)
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
