package lock

import (
	"context"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/clock"
)

// Loop is the one goroutine a Session lives on (a Lua runtime's loop). Every
// method of a Session, Lock and Hold must be called on it, and every
// callback they take is called on it.
type Loop interface {
	// Post runs fn on the loop, later. Safe from any goroutine; dropped once
	// the loop has stopped.
	Post(fn func())
	// Send queues op (a KindRedis store.Op) into the loop turn's batch,
	// which goes out as one pipeline at the end of the turn; done runs on
	// the loop once op has settled. Loop only.
	Send(op store.Pending, done func())
	// Go runs fn on another goroutine (fn may wait on the network).
	Go(fn func())
	// Context is the context operations run with; it ends when the loop
	// stops.
	Context() context.Context
}

// Clock is the time of a Service (the module's one clock interface): Now,
// and timers whose functions run on some goroutine (a Session posts from
// them to its loop).
type Clock = clock.Clock

// Timer is a timer of a Clock.
type Timer = clock.Timer

// run runs op for the loop and calls done on it with the outcome: a local op
// at once, a Redis op in the turn's batch, a work op on another goroutine.
func run[T any](lp Loop, op *store.Op[T], done func(T, error)) {
	switch op.Kind() {
	case store.KindRedis:
		lp.Send(op, func() { done(op.Result()) })
	case store.KindWork:
		ctx := lp.Context()
		lp.Go(func() {
			v, err := op.Do(ctx)
			lp.Post(func() { done(v, err) })
		})
	default:
		done(op.Do(lp.Context()))
	}
}
