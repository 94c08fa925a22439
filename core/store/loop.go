package store

import "context"

// Loop is the one goroutine a core session lives on (a Lua runtime's loop):
// lock.Session and queue.Leases take it, and internal/runtime's Loop
// implements it, so one adapter serves every session. Every method of such
// a session must be called on it, and every callback it takes runs on it.
type Loop interface {
	// Post runs fn on the loop, later. Safe from any goroutine; dropped once
	// the loop has stopped.
	Post(fn func())
	// Send queues op (a KindRedis Op) into the loop turn's batch, which
	// goes out as one pipeline at the end of the turn; done runs on the loop
	// once op has settled. Loop only.
	Send(op Pending, done func())
	// Go runs fn on another goroutine (fn may wait on the network).
	Go(fn func())
	// Context is the context operations run with; it ends when the loop
	// stops.
	Context() context.Context
}

// RunOn runs op for lp and calls done on the loop with the outcome: a local
// op at once, a Redis op in the turn's batch, a work op on another
// goroutine (its outcome posted back).
func RunOn[T any](lp Loop, op *Op[T], done func(T, error)) {
	switch op.Kind() {
	case KindRedis:
		lp.Send(op, func() { done(op.Result()) })
	case KindWork:
		ctx := lp.Context()
		lp.Go(func() {
			v, err := op.Do(ctx)
			lp.Post(func() { done(v, err) })
		})
	default:
		done(op.Do(lp.Context()))
	}
}
