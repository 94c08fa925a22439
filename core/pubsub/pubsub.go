// Package pubsub is the publish/subscribe bus behind shield_global's
// g:subscribe, g:psubscribe and g:publish, and behind the local-cache
// invalidation channel.
//
// Two implementations behave the same: Redis (standalone or Cluster, see
// NewRedis) and Memory (one process, see NewMemory). Payloads are opaque
// bytes. Channel names are arbitrary byte strings; patterns use Redis's glob
// syntax (* ? [abc] [^a] [a-z] \x), matched exactly as Redis matches them.
//
// Handlers are called synchronously: by the Redis bus on its single delivery
// goroutine, by the Memory bus on the goroutine that calls Publish. A handler
// must be quick and must not block (hand the message to a queue and return)
// and must not panic (the Redis bus does not recover: a panic ends the
// process). It may call Unsubscribe (its own or another's), Publish and
// Close; on the Redis bus, Subscribe and PSubscribe from its own handlers
// (or Events callbacks) fail with ErrInHandler instead of deadlocking, since
// their confirmation is received by the goroutine running the handler.
package pubsub

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"runtime"
	"sync"
)

// Message is one delivered publish.
type Message struct {
	// Channel is the channel the message was published to, without the
	// bus prefix.
	Channel string
	// Pattern is the pattern of the PSubscribe that matched, without the
	// bus prefix; "" for a plain Subscribe.
	Pattern string
	// Payload is the published bytes. Handlers of the same message may
	// share one slice: treat it as read-only.
	Payload []byte
}

// Handler receives messages. It is called on the Redis bus's delivery
// goroutine or on the Memory bus publisher's goroutine, and must not block.
type Handler func(Message)

// Subscription is one registered handler.
type Subscription interface {
	// Unsubscribe removes the handler. It is idempotent and never fails.
	// When it returns, the handler is not running on any other goroutine
	// and will not be called again (called from inside a handler, it does
	// not wait for calls in progress, which would deadlock: it only
	// prevents new ones). The last Unsubscribe of a channel or pattern
	// sends UNSUBSCRIBE/PUNSUBSCRIBE on the Redis bus; until the server has
	// processed it, a Publish may still count this bus among its receivers.
	Unsubscribe()
}

// Bus is a publish/subscribe bus. All methods are safe for concurrent use.
type Bus interface {
	// Subscribe registers h for channel. When it returns without error the
	// subscription is active on the server (the SUBSCRIBE confirmation has
	// arrived), so a Publish issued afterwards is delivered to h.
	// Errors (wrapped as `pubsub: subscribe "channel": ...`): ErrClosed after
	// Close; ErrNilHandler; ErrInHandler when called from a Redis bus's own
	// handler; ctx's error when ctx ends before the confirmation (for
	// instance while Redis is unreachable) — then nothing stays registered;
	// a Redis error reply if the server refuses the SUBSCRIBE.
	Subscribe(ctx context.Context, channel string, h Handler) (Subscription, error)
	// PSubscribe is Subscribe for a Redis glob pattern (* ? [abc] [^a]
	// [a-z] \x); messages carry the pattern in Message.Pattern. Errors as
	// Subscribe, wrapped as `pubsub: psubscribe "pattern": ...`.
	PSubscribe(ctx context.Context, pattern string, h Handler) (Subscription, error)
	// Publish sends payload to channel and returns the number of receivers
	// as Redis's PUBLISH counts them for the bus's namespace: per bus, 1 if
	// the channel has a plain subscriber plus 1 per distinct subscribed
	// pattern that matches it. Errors (wrapped as
	// `pubsub: publish "channel": ...`): ErrClosed after Close, ctx's
	// error, or the Redis error.
	Publish(ctx context.Context, channel string, payload []byte) (receivers int64, err error)
	// Close stops delivery, drops every subscription and stops the bus's
	// goroutines, waiting for them unless called from a handler (no
	// handler is called after it returns). It is idempotent and returns
	// nil.
	Close() error
}

// Events are optional callbacks of the Redis bus about its subscription
// connection. Both are called on the delivery goroutine and must not block.
type Events struct {
	// Down is called once per outage, when the subscription connection
	// fails (a read or write error, a failed reconnect, or no answer to a
	// ping within the receive timeout). Until the following Up, messages
	// may have been lost.
	Down func(err error)
	// Up is called once after each Down, when the connection is
	// re-established and every subscription is confirmed again by the
	// server. It is not called for the first connection.
	Up func()
}

// Errors returned (wrapped) by the buses.
var (
	// ErrClosed is returned by Subscribe, PSubscribe and Publish after Close.
	ErrClosed = errors.New("pubsub: bus closed")
	// ErrNilHandler is returned by Subscribe and PSubscribe for a nil Handler.
	ErrNilHandler = errors.New("pubsub: nil handler")
	// ErrInHandler is returned by the Redis bus's Subscribe and PSubscribe
	// when called from one of its own handlers or Events callbacks: the
	// confirmation they wait for is received by the very goroutine that
	// runs them.
	ErrInHandler = errors.New("pubsub: subscribe called from a handler on the delivery goroutine")
)

// subscriber states.
const (
	subPending = iota // registered, waiting for the server's confirmation
	subActive         // receives messages
	subDead           // unsubscribed
)

// subscriber is one handler registration, shared by both buses. It makes
// Unsubscribe strict: a dead subscriber is never called, and stop waits for
// calls in progress on other goroutines.
type subscriber struct {
	h Handler

	mu      sync.Mutex
	cond    sync.Cond // L is &mu; signalled when running drops to 0
	state   int
	running int // calls of h in progress
}

func newSubscriber(h Handler, state int) *subscriber {
	s := &subscriber{h: h, state: state}
	s.cond.L = &s.mu
	return s
}

// activate makes a pending subscriber receive messages.
func (s *subscriber) activate() {
	s.mu.Lock()
	if s.state == subPending {
		s.state = subActive
	}
	s.mu.Unlock()
}

// stop marks s dead and, unless the caller is itself running a handler,
// waits until no call of s's handler is in progress. It reports whether this
// call was the one that killed s.
func (s *subscriber) stop() bool {
	s.mu.Lock()
	first := s.state != subDead
	s.state = subDead
	busy := s.running > 0
	s.mu.Unlock()
	if !busy || insideHandler() {
		// Inside a handler, waiting could deadlock (on itself, or on a
		// handler that is waiting for this one); it only stops new calls.
		return first
	}
	s.mu.Lock()
	for s.running > 0 {
		s.cond.Wait()
	}
	s.mu.Unlock()
	return first
}

func (s *subscriber) callDone() {
	s.mu.Lock()
	s.running--
	if s.running == 0 {
		s.cond.Broadcast()
	}
	s.mu.Unlock()
}

// callHandler calls s's handler with m unless s is not active. It is the
// only place handlers are called from: insideHandler looks for its frame.
//
//go:noinline
func callHandler(s *subscriber, m Message) {
	s.mu.Lock()
	if s.state != subActive {
		s.mu.Unlock()
		return
	}
	s.running++
	s.mu.Unlock()
	defer s.callDone()
	s.h(m)
}

// callHandlerName is the symbol name of callHandler, for insideHandler.
var callHandlerName = runtime.FuncForPC(reflect.ValueOf(callHandler).Pointer()).Name()

// insideHandler reports whether the calling goroutine is running a handler
// (callHandler is on its stack). It walks the whole stack, so it is only
// used on the rare path of an Unsubscribe racing a delivery.
func insideHandler() bool {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	for n == len(pcs) {
		pcs = make([]uintptr, 2*len(pcs))
		n = runtime.Callers(2, pcs)
	}
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.Function == callHandlerName {
			return true
		}
		if !more {
			return false
		}
	}
}

// goid returns the calling goroutine's id (parsed from its stack header).
// The Redis bus uses it only to recognize its own delivery goroutine in the
// rare calls (Subscribe, Close) that must not wait for that goroutine.
func goid() uint64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
