// Package queue is the message-queue core behind shield.queue,
// shield.delay_queue, shield.priority_queue, shield.reliable_queue and
// shield.broadcast_queue: five kinds of queue, each with a Redis backend
// (NewRedis: standalone, Sentinel or Cluster) and an in-process Memory
// backend (NewMemory) with the same semantics.
//
// # Kinds
//
//   - Plain: FIFO. Redis List (LPUSH / RPOP).
//   - Delay: a message becomes deliverable at its due time (push + delay,
//     or an absolute time); due messages come out oldest due first. Redis
//     sorted set scored by the due time in server milliseconds.
//   - Priority: smallest priority first, FIFO among equal priorities.
//     Redis sorted set: score = the priority exactly as given, member =
//     a fixed-width sequence number + the message, so equal scores order
//     by arrival and no precision is traded for the tie-break.
//   - Reliable: at-least-once delivery with explicit Ack / Nack, delivery
//     counts, a visibility timeout after which the message of a consumer
//     that went silent goes to another consumer, retries after a delay
//     and a dead-letter queue. Redis Stream with one consumer group.
//   - Broadcast: every subscriber group receives every message; within a
//     group each message goes to one consumer, with the reliable queue's
//     guarantees. Redis Stream with one consumer group per subscriber
//     group, and pub/sub wake-ups.
//
// # Operations and waits
//
// Every non-blocking call returns a *store.Op: a value that does nothing
// until it runs (op.Do(ctx), or in a store.Batch that the Lua runtime sends
// as one pipeline). A Redis op is one round trip (one script).
//
// Waiting calls (PopWait, Consume) are not ops: they take a callback and
// return a cancel function. On Redis one notifier goroutine per queue (or
// broadcast group) and process pops on behalf of every local waiter, woken
// by pub/sub messages the push scripts publish, by the next due time of a
// delay queue or retry, and by a safety re-check (Timing) so that a lost
// notification or a Redis restart cannot stall a waiter. On memory no
// goroutine waits: pushes hand messages to waiters directly and timers
// fire deadlines.
//
// # Values
//
// Message bodies are opaque bytes (the Lua binding encodes values with
// core/codec).
//
// # Time
//
// Due times, TTLs, visibility timeouts and retry delays use one clock for
// all processes: Redis server TIME, in whole milliseconds. The memory
// backend uses its Clock.
package queue

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/shieldrt/shieldglobal/internal/argerr"
)

// Errors returned (wrapped) by the queues. Expected outcomes are ErrEmpty,
// ErrTimeout, ErrFull, ErrNotFound, ErrNotHeld, ErrSettled and ErrForeign;
// misuse is ErrInvalid; ErrClosed follows Close. Infrastructure failures are
// other errors naming the queue and the operation
// (`queue: push "jobs": dial tcp ...`).
var (
	// ErrEmpty is returned by Pop when no message is deliverable.
	ErrEmpty = errors.New("queue: empty")
	// ErrTimeout is passed to a PopWait callback whose deadline passed
	// without a message (and without a failure: see PopWait).
	ErrTimeout = errors.New("queue: timeout")
	// ErrFull is returned by Push, PushBatch, PushAt and the dead-letter
	// Requeue calls when the queue holds Options.MaxLength messages; the
	// message is not stored (a batch is refused whole).
	ErrFull = errors.New("queue: full")
	// ErrNotFound is returned by DeadLetters.Requeue for an id that is not
	// (or no longer) a dead letter.
	ErrNotFound = errors.New("queue: not found")
	// ErrNotHeld is returned by Ack, Nack and Extend when the delivery is no
	// longer this consumer's: its visibility timeout passed and another
	// delivery of the message was made (the message is not lost; it is
	// processed again), or the message was trimmed or purged.
	ErrNotHeld = errors.New("queue: delivery no longer held")
	// ErrSettled is returned by Ack, Nack and Extend for a delivery that
	// was already acknowledged, nacked or released through this handle.
	ErrSettled = errors.New("queue: delivery already settled")
	// ErrForeign is returned by Ack, Nack, Extend and Unpop of a queue given
	// a delivery or message of another queue (or broadcast group).
	ErrForeign = errors.New("queue: delivery of another queue")
	// ErrInvalid is wrapped by every call given an invalid argument; the
	// message names the argument and its value.
	ErrInvalid = errors.New("queue: invalid argument")
	// ErrConflict is returned when a name is opened again in this process
	// as another kind, or with other Options.
	ErrConflict = errors.New("queue: conflicting open")
	// ErrClosed is returned by every call on a closed backend and passed to
	// waits the close ended.
	ErrClosed = errors.New("queue: backend closed")
)

// Kind is the kind of a queue.
type Kind uint8

// The kinds.
const (
	KindPlain Kind = iota + 1
	KindDelay
	KindPriority
	KindReliable
	KindBroadcast
)

// String returns the kind as the Redis meta hash stores it.
func (k Kind) String() string {
	switch k {
	case KindPlain:
		return "plain"
	case KindDelay:
		return "delay"
	case KindPriority:
		return "priority"
	case KindReliable:
		return "reliable"
	case KindBroadcast:
		return "broadcast"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Options are the limits of one queue, resolved once when it is opened.
// The module builds the defaults from the queue config section.
type Options struct {
	// MaxLength caps the messages a queue holds (a reliable queue counts
	// unacknowledged ones, in flight or waiting for a retry); a push past it
	// fails with ErrFull. A broadcast queue instead trims its oldest entries
	// (counted in Stats.Trimmed) so that an offline group cannot block
	// producers. Must be > 0.
	MaxLength int
	// MessageTTL: a message still undelivered this long after it became
	// deliverable (pushed; for a delay queue, due) is dropped when it would
	// be delivered, and counted (Stats.Expired). 0 disables it. Redelivered
	// (nacked or reclaimed) messages are not expired.
	MessageTTL time.Duration
	// MaxRetries is how many times a reliable or broadcast message is
	// delivered again after its first delivery; the delivery after that
	// goes to the dead letters instead. >= 0.
	MaxRetries int
	// RetryDelay is the delay of Consume's nack when a handler fails. >= 0.
	RetryDelay time.Duration
	// VisibilityTimeout: a reliable or broadcast delivery that is neither
	// acknowledged nor extended for this long is given to another consumer.
	// Must be > 0.
	VisibilityTimeout time.Duration
	// DeadLetter configures the dead letters of reliable and broadcast
	// queues.
	DeadLetter DeadLetterOptions
}

// DeadLetterOptions configure a dead-letter stream.
type DeadLetterOptions struct {
	// Enabled keeps messages that ran out of retries; when false they are
	// dropped and counted (Stats.DeadDropped).
	Enabled bool
	// MaxLength caps the dead letters; adding one past it drops the oldest
	// (counted: Stats.DeadDropped). Must be > 0.
	MaxLength int
	// TTL: dead letters older than this are dropped (when dead letters are
	// added or read; counted). 0 keeps them.
	TTL time.Duration
}

// validate reports the first invalid option.
func (o Options) validate(name string) error {
	bad := func(format string, args ...any) error { return invalid("open", name, format, args...) }
	switch {
	case o.MaxLength <= 0:
		return bad("max_length %d must be > 0", o.MaxLength)
	case o.MessageTTL < 0:
		return bad("message_ttl %v must be >= 0", o.MessageTTL)
	case o.MaxRetries < 0:
		return bad("max_retries %d must be >= 0", o.MaxRetries)
	case o.RetryDelay < 0:
		return bad("retry_delay %v must be >= 0", o.RetryDelay)
	case o.VisibilityTimeout < time.Millisecond:
		return bad("visibility_timeout %v must be >= 1ms", o.VisibilityTimeout)
	case o.DeadLetter.MaxLength <= 0:
		return bad("dead_letter.max_length %d must be > 0", o.DeadLetter.MaxLength)
	case o.DeadLetter.TTL < 0:
		return bad("dead_letter.ttl %v must be >= 0", o.DeadLetter.TTL)
	}
	return nil
}

// Message is one popped message of a plain, delay or priority queue, and the
// message part of a Delivery.
type Message struct {
	// ID identifies the message: the stream entry id of a reliable or
	// broadcast message ("1718000000000-0"); "" for the other kinds.
	ID string
	// Body is the message as pushed.
	Body []byte
	// EnqueuedAt is when it was pushed (server time, milliseconds).
	EnqueuedAt time.Time
	// Due is a delay-queue message's due time; zero for other kinds.
	Due time.Time
	// Priority is a priority-queue message's priority; 0 for other kinds.
	Priority float64

	// Where the message came from, to give it back unchanged (Unpop): the
	// queue that popped it, its Redis form, its memory sequence number.
	from any
	raw  string
	seq  uint64
}

// ExtendInterval is how often a reliable or broadcast delivery in flight
// is extended (by Consume and by a Leases): a third of the visibility
// timeout, so that two extensions may fail before the message goes to
// another consumer.
func (o Options) ExtendInterval() time.Duration {
	return max(o.VisibilityTimeout/3, time.Millisecond)
}

// Stats are the ops facts of one queue (or one broadcast group).
type Stats struct {
	Name string
	Kind Kind
	// Length is the number of messages held: waiting, due or not, plus (for
	// reliable queues) those in flight or waiting for a retry. Broadcast:
	// the entries retained in the stream.
	Length int64
	// Pending is the number of delay-queue messages not yet due.
	Pending int64
	// Ready is the number of messages deliverable now (delay: due;
	// reliable and broadcast groups: never delivered yet).
	Ready int64
	// InFlight is the number of reliable deliveries not yet settled.
	InFlight int64
	// Retrying is the number of nacked messages waiting for their retry.
	Retrying int64
	// Consumers is the number of consumers (processes) that popped,
	// waited or extended within the last ConsumerLiveness.
	Consumers int64
	// DeadLetters is the number of dead letters held.
	DeadLetters int64
	// Counters since the queue was created (they survive Purge).
	Expired      int64 // dropped at delivery after MessageTTL
	Trimmed      int64 // broadcast entries dropped past MaxLength or MessageTTL before every group acknowledged them
	Reclaimed    int64 // deliveries given to another consumer after a visibility timeout
	Nacked       int64 // nacks
	DeadLettered int64 // messages moved to the dead letters
	DeadDropped  int64 // dead letters dropped (dead letters disabled, past their max length or TTL)
	// Groups are a broadcast queue's groups, by name.
	Groups []Stats
}

// ConsumerLiveness is how recently a consumer must have been seen to count
// in Stats.Consumers.
const ConsumerLiveness = 10 * time.Second

// NackResult says what a Nack did.
type NackResult struct {
	// DeadLettered is true when the delivery was the last one allowed
	// (Options.MaxRetries): the message went to the dead letters (or was
	// dropped when they are disabled) instead of being retried.
	DeadLettered bool
	// Dropped is true when DeadLettered and the dead letters are disabled:
	// the message is gone.
	Dropped bool
}

// DeadLetter is one message that ran out of retries.
type DeadLetter struct {
	// ID is the dead letter's own id (for Requeue).
	ID string
	// MessageID is the id the message had in its queue.
	MessageID string
	// Body is the message.
	Body []byte
	// Deliveries is how many times it was delivered.
	Deliveries int
	// Group is the broadcast group that gave up on it ("" for a reliable
	// queue).
	Group string
	// At is when it became a dead letter (server time, ms).
	At time.Time
}

// checkName reports a queue or group name that cannot be used: empty, or
// (a queue) starting with '}', which would leave its keys without a common
// Cluster hash tag.
func checkName(what, name string) error {
	if name == "" || what == "queue" && name[0] == '}' {
		return argerr.Detail(ErrInvalid, "queue", fmt.Sprintf("%s name %q must be non-empty and must not start with '}'", what, name))
	}
	return nil
}

// invalid returns an ErrInvalid error for op on queue name.
func invalid(op, name, format string, args ...any) error {
	return argerr.New(ErrInvalid, "queue", op, name, fmt.Sprintf(format, args...))
}

// opErr wraps an infrastructure error with the operation and queue.
func opErr(op, name string, err error) error {
	return fmt.Errorf("queue: %s %q: %w", op, name, err)
}

// checkDelay validates a delay argument.
func checkDelay(op, name string, d time.Duration) error {
	if d < 0 {
		return invalid(op, name, "delay %v must be >= 0", d)
	}
	return nil
}

// checkPriority validates a priority argument.
func checkPriority(op, name string, p float64) error {
	if math.IsNaN(p) {
		return invalid(op, name, "priority NaN is not a number")
	}
	return nil
}

// checkTimeout validates a wait's timeout.
func checkTimeout(op, name string, d time.Duration) error {
	if d <= 0 {
		return invalid(op, name, "timeout %v must be > 0 (use Pop for a non-blocking pop)", d)
	}
	return nil
}

// millis is a duration in whole milliseconds, rounded up (a 1ns delay is
// 1ms, never 0).
func millis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
