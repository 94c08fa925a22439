package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shieldrt/shieldglobal/internal/backoff"
)

// Handler processes one delivery. It is called on the consumer's goroutine
// and must not block: the Lua binding posts the delivery to its loop and
// returns; done(err) is called once when processing ends, from any
// goroutine (a second call is ignored). done(nil) acknowledges a reliable
// or broadcast message; done(err) nacks it after Options.RetryDelay (or
// after the delay of a RetryAfter error). For the plain kinds the message
// was consumed when it was popped: done only ends the task.
type Handler func(d *Delivery, done func(err error))

// StopFunc stops a consumer: no new message is taken; handlers already
// running may finish until ctx ends, and their messages are settled; the
// reliable messages still in flight then are released for immediate
// redelivery (not counted as a delivery), and so are messages that arrive
// for waits being withdrawn. It returns once the consumer's goroutine has
// ended; the error reports settle operations that could not be sent (their
// messages are redelivered after their visibility timeout). Calling it
// again waits again and returns the same error. It must not be called from
// the handler (it waits for the goroutine that calls the handler).
type StopFunc func(ctx context.Context) error

// Consumer is implemented by every kind.
type Consumer interface {
	// Consume runs h for every message, up to o.Concurrency at once, until
	// the returned StopFunc is called or the backend is closed. It starts
	// one goroutine (see the package doc). Errors: ErrInvalid (options),
	// ErrClosed.
	Consume(o ConsumeOptions, h Handler) (StopFunc, error)
}

// ConsumeOptions configure Consume.
type ConsumeOptions struct {
	// Concurrency is how many handlers may run at once; 0 means 1.
	Concurrency int
	// Block is the deadline of each internal wait (the consumer waits
	// again at once after a timeout). It bounds how long an outage can hide
	// behind a wait: a consumer resumes within 2 × Block of Redis coming
	// back. 0 means 5s.
	Block time.Duration
	// Alive, when set, gates the automatic extension of in-flight reliable
	// deliveries (every VisibilityTimeout/3): return false when the process
	// that runs the handlers is wedged, so that its messages go to another
	// consumer after their visibility timeout instead of being held forever.
	Alive func() bool
	// OnError is told about handler failures (a *HandlerError), deliveries
	// lost to another consumer (ErrNotHeld) and infrastructure errors; it is
	// called on the consumer's goroutine and must not block. nil ignores them.
	OnError func(err error)
}

// HandlerError is what OnError receives when a handler reported a failure.
type HandlerError struct {
	Queue string
	ID    string // message id ("" for the plain kinds)
	Err   error
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("queue: consumer of %q: message %q: %v", e.Queue, e.ID, e.Err)
}

func (e *HandlerError) Unwrap() error { return e.Err }

// retryError carries a handler's own retry delay.
type retryError struct {
	err   error
	delay time.Duration
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// RetryAfter wraps err so that Consume nacks the message with delay instead
// of Options.RetryDelay.
func RetryAfter(err error, delay time.Duration) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &retryError{err: err, delay: max(delay, 0)}
}

// Consumer timing.
const (
	defaultBlock   = 5 * time.Second
	opTimeout      = 3 * time.Second // one settle or extend round trip
	minBackoff     = 50 * time.Millisecond
	maxBackoff     = time.Second
	settleAttempts = 20 // an ack that keeps failing is given up (the message is redelivered)
)

// settleRetry spaces the attempts of an ack or nack that failed.
var settleRetry = backoff.Policy{Min: 2 * minBackoff, Max: maxBackoff}

// source is what a consumer pops from.
type source interface {
	popWait(timeout time.Duration, done func(*Delivery, error)) func() bool
	recv() receiver // nil for the plain kinds
	clock() Clock
	register(StopFunc) func()
	name() string
}

// messageSource adapts a plain, delay or priority queue.
type messageSource struct {
	w     Waiter[Message]
	up    Unpopper
	clk   Clock
	reg   func(StopFunc) func()
	queue string
}

func (s messageSource) popWait(timeout time.Duration, done func(*Delivery, error)) func() bool {
	return s.w.PopWait(timeout, func(m Message, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(&Delivery{Message: m, Deliveries: 1, up: s.up}, nil)
	})
}

func (messageSource) recv() receiver               { return nil }
func (s messageSource) clock() Clock               { return s.clk }
func (s messageSource) register(f StopFunc) func() { return s.reg(f) }
func (s messageSource) name() string               { return s.queue }

// receiverSource adapts a reliable queue or a broadcast group.
type receiverSource struct {
	r     receiver
	queue string
}

func (s receiverSource) popWait(timeout time.Duration, done func(*Delivery, error)) func() bool {
	return s.r.PopWait(timeout, done)
}

func (s receiverSource) recv() receiver             { return s.r }
func (s receiverSource) clock() Clock               { return s.r.clock() }
func (s receiverSource) register(f StopFunc) func() { return s.r.register(f) }
func (s receiverSource) name() string               { return s.queue }
