package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/internal/clock"
)

// Memory is the in-process Backend: the same semantics as Redis for one
// process (visibility timeouts, retries, dead letters, broadcast groups and
// catch-up), with Go data structures — a heap per plain, delay and priority
// queue, an entry log with per-group pending lists for reliable and
// broadcast queues. No goroutine waits: a push hands the message to the
// first waiter at once, and one timer per queue (armed only while someone
// waits) wakes waiters at the next due time, retry or visibility deadline.
// Consume starts one goroutine per consumer.
type Memory struct {
	clk      Clock
	consumer string

	mu      sync.Mutex
	closed  bool
	queues  map[string]*memOpen
	stops   map[int]StopFunc
	nextReg int
}

type memOpen struct {
	kind Kind
	opts Options
	q    any
	// closeFn fails the queue's waiters with ErrClosed.
	closeFn func()
}

// MemoryOptions configure NewMemory.
type MemoryOptions struct {
	// Clock is the time source; nil means the real clock.
	Clock Clock
	// Consumer names this process in deliveries; "" means "local".
	Consumer string
}

var _ Backend = (*Memory)(nil)

// NewMemory returns an empty memory backend.
func NewMemory(o MemoryOptions) *Memory {
	if o.Consumer == "" {
		o.Consumer = "local"
	}
	return &Memory{clk: clock.OrReal(o.Clock), consumer: o.Consumer, queues: map[string]*memOpen{}, stops: map[int]StopFunc{}}
}

// open returns the queue name of kind, creating it with mk.
func (m *Memory) open(kind Kind, name string, o Options, mk func() (any, func())) (any, error) {
	if err := checkName("queue", name); err != nil {
		return nil, err
	}
	if err := o.validate(name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, opErr("open", name, ErrClosed)
	}
	if e := m.queues[name]; e != nil {
		if e.kind != kind || e.opts != o {
			return nil, fmt.Errorf("queue: open %q as a %s queue: %w: it is open as a %s queue with options %+v",
				name, kind, ErrConflict, e.kind, e.opts)
		}
		return e.q, nil
	}
	q, closeFn := mk()
	m.queues[name] = &memOpen{kind: kind, opts: o, q: q, closeFn: closeFn}
	return q, nil
}

// Plain opens a FIFO queue.
func (m *Memory) Plain(name string, o Options) (Plain, error) {
	q, err := m.open(KindPlain, name, o, func() (any, func()) {
		s := newMemSorted(m, KindPlain, name, o)
		return &memPlain{s}, s.close
	})
	if err != nil {
		return nil, err
	}
	return q.(*memPlain), nil
}

// Delay opens a delay queue.
func (m *Memory) Delay(name string, o Options) (Delay, error) {
	q, err := m.open(KindDelay, name, o, func() (any, func()) {
		s := newMemSorted(m, KindDelay, name, o)
		return &memDelay{s}, s.close
	})
	if err != nil {
		return nil, err
	}
	return q.(*memDelay), nil
}

// Priority opens a priority queue.
func (m *Memory) Priority(name string, o Options) (Priority, error) {
	q, err := m.open(KindPriority, name, o, func() (any, func()) {
		s := newMemSorted(m, KindPriority, name, o)
		return &memPriority{s}, s.close
	})
	if err != nil {
		return nil, err
	}
	return q.(*memPriority), nil
}

// Reliable opens a reliable queue.
func (m *Memory) Reliable(name string, o Options) (Reliable, error) {
	q, err := m.open(KindReliable, name, o, func() (any, func()) {
		s := newMemStream(m, KindReliable, name, o)
		return &memReliable{memReceiver: s.receiver(reliableGroup)}, s.close
	})
	if err != nil {
		return nil, err
	}
	return q.(*memReliable), nil
}

// Broadcast opens a broadcast queue.
func (m *Memory) Broadcast(name string, o Options) (Broadcast, error) {
	q, err := m.open(KindBroadcast, name, o, func() (any, func()) {
		s := newMemStream(m, KindBroadcast, name, o)
		return &memBroadcast{s: s}, s.close
	})
	if err != nil {
		return nil, err
	}
	return q.(*memBroadcast), nil
}

// Opened lists the open queues sorted by name.
func (m *Memory) Opened() []Opened {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Opened, 0, len(m.queues))
	for name, e := range m.queues {
		out = append(out, Opened{Kind: e.kind, Name: name})
	}
	slices.SortFunc(out, func(a, b Opened) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Close fails every wait with ErrClosed and stops every consumer.
func (m *Memory) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	stops := make([]StopFunc, 0, len(m.stops))
	for _, s := range m.stops {
		stops = append(stops, s)
	}
	queues := make([]*memOpen, 0, len(m.queues))
	for _, e := range m.queues {
		queues = append(queues, e)
	}
	m.mu.Unlock()
	stopAll(stops)
	for _, e := range queues {
		e.closeFn()
	}
	return nil
}

// register records a consumer's stop for Close.
func (m *Memory) register(stop StopFunc) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextReg++
	id := m.nextReg
	m.stops[id] = stop
	return func() {
		m.mu.Lock()
		delete(m.stops, id)
		m.mu.Unlock()
	}
}

func (m *Memory) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// stopAll stops consumers with a short grace: their in-flight messages are
// released for immediate redelivery.
func stopAll(stops []StopFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range stops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s(ctx)
		}()
	}
	wg.Wait()
}

// closeGrace is how long Close lets running handlers finish.
const closeGrace = 2 * time.Second
