package queue

import (
	"container/heap"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// memSorted is a plain, delay or priority queue in memory: a heap ordered by
// (score, seq) — score 0 for plain, the due time (ms) for delay, the
// priority for priority — so every kind pops its first message in O(log n)
// and equal scores leave in arrival order.
type memSorted struct {
	m    *Memory
	kind Kind
	name string
	o    Options

	mu      sync.Mutex
	items   sortedHeap
	seq     uint64
	waits   waiters[Message]
	timerAt time.Time // armed wake-up for the next due message (delay)
	stopTmr func() bool
	closed  bool

	expired   int64
	consumers lastSeen
}

type sortedItem struct {
	score float64
	seq   uint64
	msg   Message
}

type sortedHeap []sortedItem

func (h sortedHeap) Len() int { return len(h) }
func (h sortedHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score < h[j].score
	}
	return h[i].seq < h[j].seq
}
func (h sortedHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sortedHeap) Push(x any)   { *h = append(*h, x.(sortedItem)) }
func (h *sortedHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = sortedItem{}
	*h = old[:len(old)-1]
	return it
}

func newMemSorted(m *Memory, kind Kind, name string, o Options) *memSorted {
	s := &memSorted{m: m, kind: kind, name: name, o: o}
	s.waits = waiters[Message]{mu: &s.mu, clock: m.clk}
	return s
}

func (s *memSorted) now() time.Time { return s.m.clk.Now() }

// push adds messages (all or none); score gives each one's score.
func (s *memSorted) push(op string, bodies [][]byte, score func(now time.Time) (float64, time.Time)) *store.Op[struct{}] {
	return store.Local(func() (struct{}, error) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return struct{}{}, opErr(op, s.name, ErrClosed)
		}
		if len(s.items)+len(bodies) > s.o.MaxLength {
			s.mu.Unlock()
			return struct{}{}, opErr(op, s.name, ErrFull)
		}
		now := s.now().Truncate(time.Millisecond)
		for _, b := range bodies {
			sc, due := score(now)
			s.seq++
			msg := Message{Body: b, EnqueuedAt: now, Due: due, from: s, seq: s.seq}
			if s.kind == KindPriority {
				msg.Priority = sc
			}
			heap.Push(&s.items, sortedItem{score: sc, seq: s.seq, msg: msg})
		}
		gs := s.serve()
		s.mu.Unlock()
		callAll(gs)
		return struct{}{}, nil
	})
}

// next takes the first deliverable message, dropping expired ones (caller
// holds mu). ok is false when none is deliverable.
func (s *memSorted) next(now time.Time) (Message, bool) {
	for len(s.items) > 0 {
		top := s.items[0]
		if s.kind == KindDelay && top.msg.Due.After(now) {
			return Message{}, false
		}
		heap.Pop(&s.items)
		if s.o.MessageTTL > 0 {
			from := top.msg.EnqueuedAt
			if s.kind == KindDelay {
				from = top.msg.Due
			}
			if now.Sub(from) > s.o.MessageTTL {
				s.expired++
				continue
			}
		}
		return top.msg, true
	}
	return Message{}, false
}

// serve hands deliverable messages to waiters and arms the due-time timer
// (caller holds mu; call the grants after unlocking).
func (s *memSorted) serve() []grant[Message] {
	var gs []grant[Message]
	if s.waits.len() == 0 {
		return nil
	}
	now := s.now()
	s.consumers.see(s.m.consumer, now)
	for s.waits.len() > 0 {
		msg, ok := s.next(now)
		if !ok {
			break
		}
		gs = append(gs, grant[Message]{w: s.waits.take(), v: msg})
	}
	if s.kind == KindDelay && s.waits.len() > 0 && len(s.items) > 0 {
		s.arm(s.items[0].msg.Due)
	}
	return gs
}

// arm sets the queue's one timer to wake waiters at t, unless an earlier
// wake-up is armed.
func (s *memSorted) arm(t time.Time) {
	if s.stopTmr != nil && !s.timerAt.After(t) {
		return
	}
	if s.stopTmr != nil {
		s.stopTmr()
	}
	s.timerAt = t
	s.stopTmr = s.m.clk.AfterFunc(t.Sub(s.now()), func() {
		s.mu.Lock()
		s.stopTmr = nil
		gs := s.serve()
		s.mu.Unlock()
		callAll(gs)
	}).Stop
}

func (s *memSorted) pop() *store.Op[Message] {
	return store.Local(func() (Message, error) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return Message{}, opErr("pop", s.name, ErrClosed)
		}
		gs := s.serve() // waiters came first
		now := s.now()
		s.consumers.see(s.m.consumer, now)
		msg, ok := s.next(now)
		s.mu.Unlock()
		callAll(gs)
		if !ok {
			return Message{}, opErr("pop", s.name, ErrEmpty)
		}
		return msg, nil
	})
}

// Unpop puts m back with its score and sequence number: its old place.
func (s *memSorted) Unpop(m Message) *store.Op[struct{}] {
	if m.seq == 0 {
		return store.Failed[struct{}](invalid("unpop", s.name, "a message no pop returned"))
	}
	if m.from != s {
		return store.Failed[struct{}](opErr("unpop", s.name, ErrForeign))
	}
	return store.Local(func() (struct{}, error) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return struct{}{}, opErr("unpop", s.name, ErrClosed)
		}
		var score float64
		switch s.kind {
		case KindDelay:
			score = float64(ms(m.Due))
		case KindPriority:
			score = m.Priority
		}
		heap.Push(&s.items, sortedItem{score: score, seq: m.seq, msg: m})
		gs := s.serve()
		s.mu.Unlock()
		callAll(gs)
		return struct{}{}, nil
	})
}

func (s *memSorted) PopWait(timeout time.Duration, done func(Message, error)) func() bool {
	if err := checkTimeout("pop", s.name, timeout); err != nil {
		done(Message{}, err)
		return func() bool { return false }
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		done(Message{}, opErr("pop", s.name, ErrClosed))
		return func() bool { return false }
	}
	_, cancel := s.waits.add(timeout, done)
	gs := s.serve()
	s.mu.Unlock()
	callAll(gs)
	return cancel
}

func (s *memSorted) countDue(due bool) *store.Op[int64] {
	return store.Local(func() (int64, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		now := s.now()
		var n int64
		for _, it := range s.items {
			if !it.msg.Due.After(now) == due {
				n++
			}
		}
		return n, nil
	})
}

func (s *memSorted) Length() *store.Op[int64] {
	return store.Local(func() (int64, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return int64(len(s.items)), nil
	})
}

func (s *memSorted) Purge() *store.Op[int64] {
	return store.Local(func() (int64, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := int64(len(s.items))
		s.items = nil
		return n, nil
	})
}

func (s *memSorted) Stats() *store.Op[Stats] {
	return store.Local(func() (Stats, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		now := s.now()
		st := Stats{Name: s.name, Kind: s.kind, Length: int64(len(s.items)), Expired: s.expired,
			Consumers: s.consumers.live(now)}
		if s.kind == KindDelay {
			for _, it := range s.items {
				if it.msg.Due.After(now) {
					st.Pending++
				}
			}
			st.Ready = st.Length - st.Pending
		} else {
			st.Ready = st.Length
		}
		return st, nil
	})
}

func (s *memSorted) Consume(o ConsumeOptions, h Handler) (StopFunc, error) {
	return consume(messageSource{w: s, up: s, clk: s.m.clk, reg: s.m.register, queue: s.name}, o, h)
}

func (s *memSorted) close() {
	s.mu.Lock()
	s.closed = true
	if s.stopTmr != nil {
		s.stopTmr()
		s.stopTmr = nil
	}
	gs := s.waits.failAll(opErr("pop", s.name, ErrClosed))
	s.mu.Unlock()
	callAll(gs)
}

func (s *memSorted) Name() string { return s.name }

// memPlain is a memory FIFO queue.
type memPlain struct{ *memSorted }

func (q *memPlain) Push(body []byte) *store.Op[struct{}] { return q.PushBatch([][]byte{body}) }

func (q *memPlain) PushBatch(bodies [][]byte) *store.Op[struct{}] {
	return q.push("push", bodies, func(time.Time) (float64, time.Time) { return 0, time.Time{} })
}

func (q *memPlain) Pop() *store.Op[Message] { return q.pop() }

// memDelay is a memory delay queue.
type memDelay struct{ *memSorted }

func (q *memDelay) Push(body []byte, delay time.Duration) *store.Op[struct{}] {
	if err := checkDelay("push", q.name, delay); err != nil {
		return store.Failed[struct{}](err)
	}
	d := time.Duration(millis(delay)) * time.Millisecond
	return q.push("push", [][]byte{body}, func(now time.Time) (float64, time.Time) {
		due := now.Add(d)
		return float64(ms(due)), due
	})
}

func (q *memDelay) PushAt(body []byte, at time.Time) *store.Op[struct{}] {
	due := at.Truncate(time.Millisecond)
	return q.push("push_at", [][]byte{body}, func(time.Time) (float64, time.Time) {
		return float64(ms(due)), due
	})
}

func (q *memDelay) Pop() *store.Op[Message] { return q.pop() }

func (q *memDelay) Pending() *store.Op[int64] { return q.countDue(false) }

func (q *memDelay) Ready() *store.Op[int64] { return q.countDue(true) }

// memPriority is a memory priority queue.
type memPriority struct{ *memSorted }

func (q *memPriority) Push(body []byte, priority float64) *store.Op[struct{}] {
	if err := checkPriority("push", q.name, priority); err != nil {
		return store.Failed[struct{}](err)
	}
	return q.push("push", [][]byte{body}, func(time.Time) (float64, time.Time) { return priority, time.Time{} })
}

func (q *memPriority) Pop() *store.Op[Message] { return q.pop() }

// lastSeen remembers when each consumer was last seen, for Stats.Consumers.
type lastSeen map[string]time.Time

func (l *lastSeen) see(consumer string, now time.Time) {
	if *l == nil {
		*l = lastSeen{}
	}
	(*l)[consumer] = now
}

func (l lastSeen) live(now time.Time) int64 {
	var n int64
	for c, t := range l {
		if now.Sub(t) <= ConsumerLiveness {
			n++
		} else {
			delete(l, c)
		}
	}
	return n
}
