package queue

import (
	"context"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Backend opens queues. Opening does no I/O: a Redis queue's keys are
// created by its first push. Opening a name again returns the same queue
// (one notifier per queue and process) if the kind and Options match, else
// ErrConflict. A Redis backend does not stop two processes from using one
// name as two kinds: keep names distinct per kind (Redis answers WRONGTYPE
// to a List/Sorted-set/Stream mismatch; a delay and a priority queue of
// one name would share a sorted set).
//
// Open errors: ErrInvalid (bad name or Options), ErrConflict, ErrClosed.
type Backend interface {
	Plain(name string, o Options) (Plain, error)
	Delay(name string, o Options) (Delay, error)
	Priority(name string, o Options) (Priority, error)
	Reliable(name string, o Options) (Reliable, error)
	Broadcast(name string, o Options) (Broadcast, error)
	// Opened lists the queues opened in this process, by kind and name, for
	// the ops endpoint (run each one's Stats).
	Opened() []Opened
	// Close ends every wait with ErrClosed, stops every consumer started by
	// Consume or Subscribe (in-flight reliable messages are released for
	// immediate redelivery) and the backend's goroutines, and waits for
	// them. It is idempotent.
	Close() error
}

// Opened names an open queue.
type Opened struct {
	Kind Kind
	Name string
}

// Waiter is the blocking pop shared by every kind. PopWait calls done exactly
// once: with a message; with ErrTimeout when timeout passes without one (or
// with the infrastructure error that kept the backend from popping, when its
// last attempt failed); with ErrClosed; or with ErrInvalid for a timeout
// <= 0. done must not block. It may run before PopWait returns, on the
// calling goroutine (a memory queue with a message waiting, a bad
// argument), and otherwise runs on a backend goroutine (a memory queue's
// pusher or timer, the Redis notifier).
//
// cancel withdraws the wait. It returns true when it did, and then done is
// never called; false when done has been or is being called (the caller
// then owns the message: a reliable delivery must be acked, nacked or
// released). cancel is idempotent.
//
// A message popped for a waiter that gave up meanwhile goes to the next
// waiter of this process, or back to the queue unchanged (a reliable
// delivery is released, uncounted). On Redis a wait always starts with a
// round trip on the notifier goroutine: callers that want an inline fast
// path run Pop first.
type Waiter[T any] interface {
	PopWait(timeout time.Duration, done func(T, error)) (cancel func() bool)
}

// Unpopper is the one "give back" of the plain, delay and priority queues
// (a reliable delivery's is Release, with the same meaning).
//
// Give back means: the message returns as if it had never been popped — in
// its place, unchanged. A plain message goes to the head of the queue (the
// next pop takes it, before every message pushed after it); a delay message
// keeps its due time and a priority message its priority, each ahead of the
// messages of the same due time or priority pushed after it; EnqueuedAt
// (which MessageTTL counts from) is kept, and MaxLength is not checked (the
// message had its place). It is for a message nobody processed: a pop whose
// caller went away, a handler the shutdown interrupted. Pushing the message
// again instead would put it behind newer ones, which breaks the FIFO order
// the queues promise and restarts its MessageTTL at every bounce.
type Unpopper interface {
	// Unpop gives back m, a message a Pop, PopWait or Consume of this queue
	// returned; give each message back at most once. Errors: ErrInvalid (a
	// message no pop returned), ErrForeign (a message of another queue),
	// ErrClosed, infrastructure errors.
	Unpop(m Message) *store.Op[struct{}]
}

// Plain is a FIFO queue.
type Plain interface {
	Name() string
	// Push appends body. Errors: ErrFull, infrastructure errors.
	Push(body []byte) *store.Op[struct{}]
	// PushBatch appends bodies in order, atomically: all or (ErrFull)
	// none. An empty batch is a no-op.
	PushBatch(bodies [][]byte) *store.Op[struct{}]
	// Pop takes the oldest message. Errors: ErrEmpty, infrastructure errors.
	Pop() *store.Op[Message]
	Waiter[Message]
	Unpopper
	// Length is the number of messages.
	Length() *store.Op[int64]
	// Purge drops every message and returns how many there were.
	Purge() *store.Op[int64]
	Stats() *store.Op[Stats]
	Consumer
}

// Delay is a queue whose messages become deliverable at a due time.
type Delay interface {
	Name() string
	// Push adds body, due delay from now (server time). Errors:
	// ErrInvalid (delay < 0), ErrFull, infrastructure errors.
	Push(body []byte, delay time.Duration) *store.Op[struct{}]
	// PushAt adds body, due at at (a time in the past is due at once).
	// Errors: ErrFull, infrastructure errors.
	PushAt(body []byte, at time.Time) *store.Op[struct{}]
	// Pop takes the message that has been due longest. Errors: ErrEmpty
	// (nothing due), infrastructure errors.
	Pop() *store.Op[Message]
	Waiter[Message]
	Unpopper
	// Length is the number of messages, due or not.
	Length() *store.Op[int64]
	// Pending is the number of messages not yet due.
	Pending() *store.Op[int64]
	// Ready is the number of due messages.
	Ready() *store.Op[int64]
	Purge() *store.Op[int64]
	Stats() *store.Op[Stats]
	Consumer
}

// Priority is a queue that delivers the smallest priority first, FIFO among
// equal priorities.
type Priority interface {
	Name() string
	// Push adds body with priority (any float64 but NaN; ±Inf allowed).
	// Errors: ErrInvalid (NaN), ErrFull, infrastructure errors.
	Push(body []byte, priority float64) *store.Op[struct{}]
	// Pop takes the first message. Errors: ErrEmpty, infrastructure errors.
	Pop() *store.Op[Message]
	Waiter[Message]
	Unpopper
	Length() *store.Op[int64]
	Purge() *store.Op[int64]
	Stats() *store.Op[Stats]
	Consumer
}

// Receiver is the consuming side of a reliable queue and of a broadcast
// group: deliveries that must be settled.
type Receiver interface {
	// Pop delivers the next message to this process's consumer: a retry
	// that is due, else a message whose holder's visibility timeout passed
	// (reclaimed), else a new one. Errors: ErrEmpty, infrastructure
	// errors. Messages past MessageTTL are dropped on the way (counted);
	// messages past MaxRetries go to the dead letters on the way.
	Pop() *store.Op[*Delivery]
	Waiter[*Delivery]
	// Ack settles d: the message is done. Errors: ErrSettled, ErrForeign,
	// ErrNotHeld (already acknowledged by another delivery, trimmed or
	// purged), infrastructure errors (then d stays held and Ack may be
	// tried again).
	Ack(d *Delivery) *store.Op[struct{}]
	// Nack gives d back for redelivery after delay (>= 0), counting it as a
	// failed delivery: if it was the last delivery MaxRetries allows, the
	// message goes to the dead letters first and is acknowledged after
	// (result DeadLettered). Errors: ErrInvalid (delay < 0), ErrSettled,
	// ErrForeign, ErrNotHeld, infrastructure errors.
	Nack(d *Delivery, delay time.Duration) *store.Op[NackResult]
	// Release gives d back for immediate redelivery without counting the
	// delivery (shutdown, a waiter that gave up, a task that ended holding
	// it): the reliable queue's unpop, with Unpopper's meaning — the next
	// pop of the group takes it before any new message. Errors as Nack.
	Release(d *Delivery) *store.Op[struct{}]
	// Extend restarts d's visibility timeout, so no other consumer gets the
	// message while its handler still runs; call it well within
	// VisibilityTimeout (Consume does it by itself). Errors: ErrSettled,
	// ErrForeign, ErrNotHeld (too late: the message was given to another
	// delivery), infrastructure errors.
	Extend(d *Delivery) *store.Op[struct{}]
	Consumer
}

// Reliable is an at-least-once queue with acknowledgements.
type Reliable interface {
	Name() string
	// Push appends body and returns its message id. Errors: ErrFull,
	// infrastructure errors.
	Push(body []byte) *store.Op[string]
	// PushBatch appends bodies atomically (all or none, ErrFull) and returns
	// their ids.
	PushBatch(bodies [][]byte) *store.Op[[]string]
	Receiver
	// Length is the number of messages not acknowledged yet: waiting, in
	// flight or waiting for a retry.
	Length() *store.Op[int64]
	// Purge drops every message, in flight or not (their deliveries become
	// ErrNotHeld), and returns how many there were. Dead letters stay.
	Purge() *store.Op[int64]
	Stats() *store.Op[Stats]
	DeadLetters() DeadLetters
}

// Broadcast is a queue every subscriber group receives in full.
type Broadcast interface {
	Name() string
	// Push appends body for every group and returns its id. Past MaxLength
	// the oldest entries are trimmed (counted), never refused. Errors:
	// infrastructure errors.
	Push(body []byte) *store.Op[string]
	// Group returns the consuming side of subscriber group name (no I/O).
	// A group exists in Redis from its first Join or pop on; it receives
	// every message pushed after that, also those pushed while no consumer
	// of it runs (within MaxLength and MessageTTL). Errors: ErrInvalid,
	// ErrClosed.
	Group(name string) (Group, error)
	// Subscribe is Group(group), Join and Consume: it returns once the
	// group exists. ctx bounds the Join. Errors: those of Group, the Join's.
	Subscribe(ctx context.Context, group string, o ConsumeOptions, h Handler) (stop StopFunc, err error)
	// RemoveGroup deletes a group and its pending deliveries, so it no
	// longer holds entries back from trimming; it reports whether it existed.
	// Remove only groups none of whose consumers runs: a consumer still
	// running re-creates the group, empty, at its next pop.
	RemoveGroup(name string) *store.Op[bool]
	// Length is the number of entries retained.
	Length() *store.Op[int64]
	// Stats reports the queue and, in Groups, each group.
	Stats() *store.Op[Stats]
	// DeadLetters are the messages groups gave up on; Requeue delivers one
	// again to its group only.
	DeadLetters() DeadLetters
}

// Group is one subscriber group of a broadcast queue.
type Group interface {
	// Name is the group's name.
	Name() string
	// Join creates the group if it does not exist yet (it then receives
	// messages pushed from now on). Errors: infrastructure errors.
	Join() *store.Op[struct{}]
	Receiver
	Stats() *store.Op[Stats]
}

// DeadLetters are the messages of a reliable or broadcast queue that ran out
// of retries, oldest first.
type DeadLetters interface {
	// Range returns up to count dead letters from index start (0 = oldest).
	// Errors: ErrInvalid (start < 0, count < 0), infrastructure errors.
	Range(start, count int) *store.Op[[]DeadLetter]
	Length() *store.Op[int64]
	// Requeue moves dead letter id back to its queue (for a broadcast
	// queue: to its group only) as a new message with a fresh delivery
	// count. Errors: ErrNotFound, ErrFull, infrastructure errors.
	Requeue(id string) *store.Op[struct{}]
	// RequeueAll moves dead letters back, oldest first, while the queue has
	// room, and returns how many it moved; ErrFull (with the count) when
	// some stayed because the queue is full.
	RequeueAll() *store.Op[int]
	// Purge drops every dead letter and returns how many there were.
	Purge() *store.Op[int64]
	// Delete drops the dead letters ids and returns how many of them there
	// were (an id that is not a dead letter is not an error). Errors:
	// ErrInvalid (no ids, an empty id), infrastructure errors.
	Delete(ids ...string) *store.Op[int64]
}
