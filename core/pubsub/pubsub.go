// Package pubsub is the publish/subscribe bus behind shield_global's
// g:subscribe, g:psubscribe and g:publish, and behind the local-cache
// invalidation channel.
//
// Two implementations behave the same: Redis (standalone or Cluster, see
// NewRedis) and Memory (one process, see NewMemory). Payloads are opaque
// bytes. Channel names are arbitrary byte strings; patterns use Redis's glob
// syntax (* ? [abc] [^a] [a-z] \x), matched exactly as Redis matches them.
//
// Handlers are called one at a time, in order: by the Redis bus on its
// dispatch goroutine (which never receives from the network, so a handler
// may call anything, Subscribe included), by the Memory bus on the goroutine
// that calls Publish. A handler must be quick and must not block (hand the
// message to a queue and return) and must not panic (the Redis bus does not
// recover: a panic ends the process). It may call Subscribe, Unsubscribe
// (its own or another's), Publish and Close.
package pubsub

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/shieldrt/shieldglobal/core/store"
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
	// When it returns no new call of the handler starts; a call already in
	// progress on another goroutine may still be finishing (Unsubscribe
	// does not wait for it, so it may be called from anywhere, a handler
	// included). The last Unsubscribe of a channel or pattern sends
	// UNSUBSCRIBE/PUNSUBSCRIBE on the Redis bus; until the server has
	// processed it, a Publish may still count this bus among its receivers.
	Unsubscribe()
}

// Bus is a publish/subscribe bus. All methods are safe for concurrent use.
type Bus interface {
	// Subscribe registers h for channel. When it returns without error the
	// subscription is active on the server (the SUBSCRIBE confirmation has
	// arrived), so a Publish issued afterwards is delivered to h.
	// Errors (wrapped as `pubsub: subscribe "channel": ...`): ErrClosed after
	// Close; ErrNilHandler; ctx's error when ctx ends before the
	// confirmation (for instance while Redis is unreachable) — then nothing
	// stays registered; a Redis error reply if the server refuses the
	// SUBSCRIBE.
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
	// PublishOp is Publish as an operation (store.Op), which the Lua runtime
	// sends together with its other tasks' commands.
	PublishOp(channel string, payload []byte) *store.Op[int64]
	// Close stops delivery, drops every subscription and stops the bus's
	// goroutines: no handler call starts after it returns (one in progress
	// may be finishing; Close does not wait for it, so a handler may call
	// it). It is idempotent and returns nil.
	Close() error
}

// Events are optional callbacks of the Redis bus about its subscription
// connection. Both are called on the dispatch goroutine, in order with the
// messages, and must not block.
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
)

// subscriber states.
const (
	subPending = iota // registered, waiting for the server's confirmation
	subActive         // receives messages
	subDead           // unsubscribed
)

// subscriber is one handler registration, shared by both buses. A dead
// subscriber is never called again.
type subscriber struct {
	h     Handler
	state atomic.Int32
}

func newSubscriber(h Handler, state int32) *subscriber {
	s := &subscriber{h: h}
	s.state.Store(state)
	return s
}

// activate makes a pending subscriber receive messages.
func (s *subscriber) activate() { s.state.CompareAndSwap(subPending, subActive) }

// stop marks s dead. It reports whether this call was the one that killed s.
func (s *subscriber) stop() bool { return s.state.Swap(subDead) != subDead }

// callHandler calls s's handler with m unless s is not active.
func callHandler(s *subscriber, m Message) {
	if s.state.Load() == subActive {
		s.h(m)
	}
}
