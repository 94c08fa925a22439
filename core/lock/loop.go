package lock

import (
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/clock"
)

// Loop is the one goroutine a Session lives on (a Lua runtime's loop; the
// contract every core session shares). Every method of a Session, Lock and
// Hold must be called on it, and every callback they take is called on it.
type Loop = store.Loop

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
