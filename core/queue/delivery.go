package queue

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Delivery is one delivery of a message to this process: a reliable or
// broadcast message that must be settled (Ack, Nack or Release), or — in
// Consume on the other kinds — a popped message, consumed already, that
// Release can still give back (Unpop).
//
// A Delivery is a handle: settle it once. Ack, Nack and Release mark it
// settled when they succeed; a second settle fails with ErrSettled.
type Delivery struct {
	Message
	// Deliveries is how many times the message has been delivered,
	// this delivery included (1 the first time). Reclaims after a visibility
	// timeout count; Release does not.
	Deliveries int
	// Group is the broadcast group ("" otherwise).
	Group string

	r     receiver // nil for the plain kinds
	up    Unpopper // the plain kinds' queue (Release)
	state atomic.Int32
	lost  atomic.Bool // a settle found the delivery no longer held
}

// Delivery states.
const (
	held     = 0
	settling = 1 // an Ack/Nack/Release op is built and has not finished
	settled  = 2
)

// receiver is what the backends' reliable queues and broadcast groups
// implement besides Receiver, for Delivery's methods and Consume.
type receiver interface {
	Receiver
	// extendMany extends every delivery in ds in one round trip; the result
	// has one error per delivery (nil, ErrNotHeld).
	extendMany(ds []*Delivery) *store.Op[[]error]
	// ackMany acknowledges every delivery in ds in one round trip; one error
	// per delivery (nil, ErrSettled, ErrForeign, ErrNotHeld, or the failure).
	ackMany(ds []*Delivery) *store.Op[[]error]
	options() Options
	clock() Clock
	register(stop StopFunc) (unregister func())
	// queueLabel names the queue (broadcast: "queue/group") in messages.
	queueLabel() string
}

// Ack is d's queue's Ack(d); for the plain kinds it only settles d (the
// message was consumed when it was popped).
func (d *Delivery) Ack() *store.Op[struct{}] {
	if d.r == nil {
		d.state.Store(settled)
		return done(struct{}{})
	}
	return d.r.Ack(d)
}

// Nack is d's queue's Nack(d, delay); for the plain kinds it does nothing.
func (d *Delivery) Nack(delay time.Duration) *store.Op[NackResult] {
	if d.r == nil {
		return done(NackResult{})
	}
	return d.r.Nack(d, delay)
}

// Release gives d back (see Unpopper for the one meaning of giving back):
// d's queue's Release(d), or for the plain kinds its Unpop(d.Message).
// Errors: those of Release or Unpop; ErrSettled for a plain-kind delivery
// acknowledged or given back already.
func (d *Delivery) Release() *store.Op[struct{}] {
	if d.r != nil {
		return d.r.Release(d)
	}
	if d.up == nil {
		return store.Failed[struct{}](fmt.Errorf("queue: release: %w: a delivery no pop returned", ErrInvalid))
	}
	if !d.state.CompareAndSwap(held, settled) {
		return store.Failed[struct{}](fmt.Errorf("queue: release: %w", ErrSettled))
	}
	return d.up.Unpop(d.Message)
}

// Extend is d's queue's Extend(d); for the plain kinds it does nothing.
func (d *Delivery) Extend() *store.Op[struct{}] {
	if d.r == nil {
		return done(struct{}{})
	}
	return d.r.Extend(d)
}

// Settled reports whether d was acknowledged, nacked or released.
func (d *Delivery) Settled() bool { return d.state.Load() == settled }

func done[T any](v T) *store.Op[T] { return store.Local(func() (T, error) { return v, nil }) }

// begin checks that d belongs to r and is held, and marks it settling (or,
// for Extend, only checks). The returned error is ErrForeign or ErrSettled.
func (d *Delivery) begin(r receiver, op, name string, settle bool) error {
	if d == nil {
		return invalid(op, name, "nil delivery")
	}
	if d.r != r {
		return opErr(op, name, ErrForeign)
	}
	if !settle {
		if d.state.Load() != held {
			return opErr(op, name, ErrSettled)
		}
		return nil
	}
	if !d.state.CompareAndSwap(held, settling) {
		return opErr(op, name, ErrSettled)
	}
	return nil
}

// finish ends a settle op: settled on success or on an outcome that ends the
// delivery anyway (ErrNotHeld), held again after an infrastructure error so
// the caller may retry.
func (d *Delivery) finish(err error) {
	if isNotHeld(err) {
		d.lost.Store(true)
	}
	if err == nil || isNotHeld(err) {
		d.state.Store(settled)
		return
	}
	d.state.Store(held)
}
