package pubsub

import (
	"github.com/shieldrt/shieldglobal/core/store"

	"context"
	"fmt"
	"slices"
	"sync"
)

// Memory is an in-process Bus. Publish delivers synchronously, on the
// caller's goroutine, to every matching handler; it starts no goroutines.
// It behaves like a Redis bus with a non-empty prefix of which every
// "process" shares the one Memory value.
type Memory struct {
	mu       sync.Mutex
	closed   bool
	channels map[string][]*subscriber
	patterns []*memPattern // in order of first subscription
}

// memPattern is one distinct subscribed pattern.
type memPattern struct {
	pattern string
	subs    []*subscriber
}

// NewMemory returns an empty in-process bus. It never fails.
func NewMemory() *Memory {
	return &Memory{channels: make(map[string][]*subscriber)}
}

var _ Bus = (*Memory)(nil)

// Subscribe registers h for channel; it is active when Subscribe returns.
// Errors (wrapped as `pubsub: subscribe "channel": ...`): ErrClosed,
// ErrNilHandler, or ctx's error if ctx is already done.
func (m *Memory) Subscribe(ctx context.Context, channel string, h Handler) (Subscription, error) {
	s, err := m.subscribe(ctx, false, channel, h)
	if err != nil {
		return nil, fmt.Errorf("pubsub: subscribe %q: %w", channel, err)
	}
	return s, nil
}

// PSubscribe registers h for the Redis glob pattern; it is active when
// PSubscribe returns. Errors as Subscribe, wrapped as
// `pubsub: psubscribe "pattern": ...`.
func (m *Memory) PSubscribe(ctx context.Context, pattern string, h Handler) (Subscription, error) {
	s, err := m.subscribe(ctx, true, pattern, h)
	if err != nil {
		return nil, fmt.Errorf("pubsub: psubscribe %q: %w", pattern, err)
	}
	return s, nil
}

func (m *Memory) subscribe(ctx context.Context, isPattern bool, name string, h Handler) (*memSubscription, error) {
	if h == nil {
		return nil, ErrNilHandler
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := newSubscriber(h, subActive)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if !isPattern {
		m.channels[name] = append(m.channels[name], s)
	} else if i := m.patternIndex(name); i >= 0 {
		m.patterns[i].subs = append(m.patterns[i].subs, s)
	} else {
		m.patterns = append(m.patterns, &memPattern{pattern: name, subs: []*subscriber{s}})
	}
	return &memSubscription{m: m, isPattern: isPattern, name: name, s: s}, nil
}

func (m *Memory) patternIndex(pattern string) int {
	return slices.IndexFunc(m.patterns, func(p *memPattern) bool { return p.pattern == pattern })
}

// Publish delivers payload to channel's handlers and to the handlers of
// every matching pattern before it returns, without holding any lock while
// they run. receivers is 1 if the channel has a handler, plus 1 per
// distinct matching pattern. Errors (wrapped as
// `pubsub: publish "channel": ...`): ErrClosed, or ctx's error if ctx is
// already done.
func (m *Memory) Publish(ctx context.Context, channel string, payload []byte) (receivers int64, err error) {
	return m.PublishOp(channel, payload).Do(ctx)
}

// PublishOp is Publish as a local operation.
func (m *Memory) PublishOp(channel string, payload []byte) *store.Op[int64] {
	return store.Local(func() (int64, error) { return m.publish(channel, payload) })
}

func (m *Memory) publish(channel string, payload []byte) (receivers int64, err error) {
	type target struct {
		s       *subscriber
		pattern string
	}
	var targets []target
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return 0, fmt.Errorf("pubsub: publish %q: %w", channel, ErrClosed)
	}
	if subs := m.channels[channel]; len(subs) > 0 {
		receivers++
		for _, s := range subs {
			targets = append(targets, target{s: s})
		}
	}
	for _, p := range m.patterns {
		if matchChannel(p.pattern, channel) {
			receivers++
			for _, s := range p.subs {
				targets = append(targets, target{s: s, pattern: p.pattern})
			}
		}
	}
	m.mu.Unlock()
	if len(targets) == 0 {
		return receivers, nil
	}
	data := append([]byte{}, payload...) // the publisher may reuse payload
	for _, t := range targets {
		callHandler(t.s, Message{Channel: channel, Pattern: t.pattern, Payload: data})
	}
	return receivers, nil
}

// Close drops every subscription: no handler is called after it returns
// (calls in progress on other goroutines are waited for, unless Close is
// called from a handler). Later Subscribe, PSubscribe and Publish fail with
// ErrClosed. It is idempotent and returns nil.
func (m *Memory) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	var all []*subscriber
	for _, subs := range m.channels {
		all = append(all, subs...)
	}
	for _, p := range m.patterns {
		all = append(all, p.subs...)
	}
	m.channels, m.patterns = nil, nil
	m.mu.Unlock()
	for _, s := range all {
		s.stop()
	}
	return nil
}

// remove takes s off the registry. (Publish copies what it calls under the
// lock, so the slices can be edited in place.)
func (m *Memory) remove(isPattern bool, name string, s *subscriber) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	isS := func(x *subscriber) bool { return x == s }
	if !isPattern {
		if subs := slices.DeleteFunc(m.channels[name], isS); len(subs) > 0 {
			m.channels[name] = subs
		} else {
			delete(m.channels, name)
		}
		return
	}
	if i := m.patternIndex(name); i >= 0 {
		if m.patterns[i].subs = slices.DeleteFunc(m.patterns[i].subs, isS); len(m.patterns[i].subs) == 0 {
			m.patterns = slices.Delete(m.patterns, i, i+1)
		}
	}
}

type memSubscription struct {
	m         *Memory
	isPattern bool
	name      string
	s         *subscriber
}

// Unsubscribe implements Subscription.
func (u *memSubscription) Unsubscribe() {
	if u.s.stop() {
		u.m.remove(u.isPattern, u.name, u.s)
	}
}
