package queue

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// reliableGroup is the consumer group of a reliable queue.
const reliableGroup = "shield"

// parkedConsumer owns nacked deliveries waiting for their retry.
const parkedConsumer = "~retry"

// memStream is a reliable or broadcast queue in memory, modelled on a Redis
// stream: an entry log ordered by id, and consumer groups with a delivery
// cursor and a pending list each.
type memStream struct {
	m    *Memory
	kind Kind
	name string
	o    Options

	mu        sync.Mutex
	entries   []*memEntry // ordered by key; deleted ones are compacted away lazily
	dead      int         // deleted entries still in entries
	live      int
	last      entryKey
	groups    map[string]*memGroup
	receivers map[string]*memReceiver
	closed    bool

	letters        []DeadLetter
	lastLetter     entryKey
	lettersDropped int64 // dead letters dropped past their max length or TTL
	trimmed        int64
}

type entryKey struct{ ms, seq int64 }

func (k entryKey) less(o entryKey) bool { return k.ms < o.ms || k.ms == o.ms && k.seq < o.seq }
func (k entryKey) String() string {
	return strconv.FormatInt(k.ms, 10) + "-" + strconv.FormatInt(k.seq, 10)
}

func parseKey(id string) (entryKey, bool) {
	a, b, ok := strings.Cut(id, "-")
	if !ok {
		return entryKey{}, false
	}
	ms, err1 := strconv.ParseInt(a, 10, 64)
	seq, err2 := strconv.ParseInt(b, 10, 64)
	return entryKey{ms, seq}, err1 == nil && err2 == nil
}

// nextKey returns a key after last at time now (Redis's rule for XADD *).
func nextKey(last *entryKey, now time.Time) entryKey {
	k := entryKey{ms: ms(now)}
	if k.ms <= last.ms {
		k = entryKey{ms: last.ms, seq: last.seq + 1}
	}
	*last = k
	return k
}

type memEntry struct {
	key     entryKey
	body    []byte
	target  string // "" for every group, else the one group (a requeued dead letter)
	deleted bool
}

type memGroup struct {
	s    *memStream
	name string

	lastDelivered entryKey
	pending       map[string]*memPending
	visibility    deadlineHeap        // in-flight deliveries by visibility deadline
	retries       deadlineHeap        // parked deliveries by retry time
	waits         *waiters[*Delivery] // a pointer: RemoveGroup hands it to the group's successor
	stopTmr       func() bool
	timerAt       time.Time
	consumers     lastSeen

	expired, reclaimed, nacked, deadLettered, deadDropped int64
}

type memPending struct {
	e        *memEntry
	consumer string
	at       time.Time // last delivery or extension
	count    int
	parked   bool
	due      time.Time
}

// deadlineItem is a heap entry, valid while its pending entry still has the
// count and time it was pushed with (lazy deletion).
type deadlineItem struct {
	at    time.Time
	key   entryKey
	id    string
	count int
	stamp time.Time
}

type deadlineHeap []deadlineItem

func (h deadlineHeap) Len() int { return len(h) }
func (h deadlineHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].key.less(h[j].key)
}
func (h deadlineHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)   { *h = append(*h, x.(deadlineItem)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

func newMemStream(m *Memory, kind Kind, name string, o Options) *memStream {
	return &memStream{m: m, kind: kind, name: name, o: o, groups: map[string]*memGroup{}, receivers: map[string]*memReceiver{}}
}

func (s *memStream) now() time.Time { return s.m.clk.Now() }

// group returns group name, creating it at the end of the log if create.
func (s *memStream) group(name string, create bool) *memGroup {
	g := s.groups[name]
	if g == nil && create {
		g = &memGroup{s: s, name: name, lastDelivered: s.last, pending: map[string]*memPending{}}
		if s.kind == KindReliable {
			g.lastDelivered = entryKey{} // the reliable group sees everything
		}
		g.waits = &waiters[*Delivery]{mu: &s.mu, clock: s.m.clk}
		s.groups[name] = g
	}
	return g
}

// add appends bodies (caller holds mu).
func (s *memStream) add(bodies [][]byte, target string) []string {
	now := s.now()
	ids := make([]string, len(bodies))
	for i, b := range bodies {
		e := &memEntry{key: nextKey(&s.last, now), body: b, target: target}
		s.entries = append(s.entries, e)
		s.live++
		ids[i] = e.key.String()
	}
	return ids
}

// remove deletes e from the log (caller holds mu). The slot is compacted
// away later, by tidy.
func (s *memStream) remove(e *memEntry) {
	if e.deleted {
		return
	}
	e.deleted = true
	s.live--
	s.dead++
}

// tidy compacts the log once deleted entries are the majority (caller holds
// mu; not while iterating over entries).
func (s *memStream) tidy() {
	if s.dead > 64 && s.dead > len(s.entries)/2 {
		s.entries = slices.DeleteFunc(s.entries, func(e *memEntry) bool { return e.deleted })
		s.dead = 0
	}
}

// after returns the first live entry with a key after k, or nil.
func (s *memStream) after(k entryKey) *memEntry {
	i := sort.Search(len(s.entries), func(i int) bool { return k.less(s.entries[i].key) })
	for ; i < len(s.entries); i++ {
		if !s.entries[i].deleted {
			return s.entries[i]
		}
	}
	return nil
}

func (s *memStream) push(op string, bodies [][]byte) *store.Op[[]string] {
	return store.Local(func() ([]string, error) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, opErr(op, s.name, ErrClosed)
		}
		if s.kind == KindBroadcast {
			s.trim(len(bodies))
		} else if s.live+len(bodies) > s.o.MaxLength {
			s.mu.Unlock()
			return nil, opErr(op, s.name, ErrFull)
		}
		ids := s.add(bodies, "")
		gs := s.serveAll()
		s.tidy()
		s.mu.Unlock()
		callAll(gs)
		return ids, nil
	})
}

// trim drops broadcast entries every group has acknowledged, then, to make
// room for n more, the oldest ones, and those past MessageTTL (both counted).
func (s *memStream) trim(n int) {
	frontier := s.last
	frontier.seq++ // no groups: nobody needs any entry
	for _, g := range s.groups {
		f := g.lastDelivered
		f.seq++
		for _, p := range g.pending {
			if !p.e.deleted && p.e.key.less(f) {
				f = p.e.key
			}
		}
		if f.less(frontier) {
			frontier = f
		}
	}
	var cutoff int64
	if s.o.MessageTTL > 0 {
		cutoff = ms(s.now()) - s.o.MessageTTL.Milliseconds()
	}
	for _, e := range s.entries {
		if e.deleted {
			continue
		}
		switch {
		case e.key.less(frontier):
		case s.live+n > s.o.MaxLength, e.key.ms < cutoff:
			s.trimmed++
		default:
			return
		}
		s.remove(e)
	}
}

// serveAll serves the waiters of every group (caller holds mu).
func (s *memStream) serveAll() []grant[*Delivery] {
	var gs []grant[*Delivery]
	for _, g := range s.groups {
		gs = append(gs, g.serve()...)
	}
	return gs
}

// deliver makes the next delivery of group g, or returns nil (caller holds
// mu): a due retry, else a reclaimed delivery, else a new entry.
func (g *memGroup) deliver(now time.Time) *Delivery {
	s := g.s
	g.consumers.see(s.m.consumer, now)
	maxDeliveries := 1 + s.o.MaxRetries
	take := func(h *deadlineHeap, parked bool) *Delivery {
		for h.Len() > 0 && !(*h)[0].at.After(now) {
			it := heap.Pop(h).(deadlineItem)
			p := g.pending[it.id]
			if p == nil || p.parked != parked || p.count != it.count || !p.at.Equal(it.stamp) {
				continue // stale heap entry
			}
			if p.e.deleted {
				delete(g.pending, it.id)
				continue
			}
			if p.count+1 > maxDeliveries {
				g.deadLetter(p, now)
				continue
			}
			if !parked {
				g.reclaimed++
			}
			return g.hand(p, now)
		}
		return nil
	}
	if d := take(&g.retries, true); d != nil {
		return d
	}
	if d := take(&g.visibility, false); d != nil {
		return d
	}
	for {
		e := s.after(g.lastDelivered)
		if e == nil {
			return nil
		}
		g.lastDelivered = e.key
		if e.target != "" && e.target != g.name {
			continue
		}
		if s.o.MessageTTL > 0 && ms(now)-e.key.ms > s.o.MessageTTL.Milliseconds() {
			g.expired++
			if s.kind == KindReliable {
				s.remove(e) // after() skips it; tidy runs at the next push
			}
			continue
		}
		p := &memPending{e: e}
		g.pending[e.key.String()] = p
		return g.hand(p, now)
	}
}

// hand gives p to this process's consumer as a new delivery.
func (g *memGroup) hand(p *memPending, now time.Time) *Delivery {
	p.count++
	p.parked = false
	p.consumer = g.s.m.consumer
	p.at = now
	id := p.e.key.String()
	heap.Push(&g.visibility, deadlineItem{at: now.Add(g.s.o.VisibilityTimeout), key: p.e.key, id: id, count: p.count, stamp: now})
	d := &Delivery{
		Message:    Message{ID: id, Body: p.e.body, EnqueuedAt: fromMs(p.e.key.ms)},
		Deliveries: p.count,
	}
	if g.s.kind == KindBroadcast {
		d.Group = g.name
	}
	d.r = g.s.receivers[g.name]
	return d
}

// deadLetter moves p's message to the dead letters (or drops it) and
// acknowledges it (caller holds mu).
func (g *memGroup) deadLetter(p *memPending, now time.Time) {
	s := g.s
	g.deadLettered++
	if s.o.DeadLetter.Enabled {
		s.trimLetters(now, 1)
		dl := DeadLetter{ID: nextKey(&s.lastLetter, now).String(), MessageID: p.e.key.String(),
			Body: p.e.body, Deliveries: p.count, At: now.Truncate(time.Millisecond)}
		if s.kind == KindBroadcast {
			dl.Group = g.name
		}
		s.letters = append(s.letters, dl)
	} else {
		g.deadDropped++
	}
	g.ack(p)
}

// trimLetters drops dead letters past their TTL and, to make room for n,
// the oldest (caller holds mu).
func (s *memStream) trimLetters(now time.Time, n int) {
	drop := 0
	for drop < len(s.letters) {
		dl := s.letters[drop]
		old := s.o.DeadLetter.TTL > 0 && now.Sub(dl.At) > s.o.DeadLetter.TTL
		if !old && len(s.letters)-drop+n <= s.o.DeadLetter.MaxLength {
			break
		}
		drop++
	}
	if drop > 0 {
		s.letters = slices.Delete(s.letters, 0, drop)
		s.lettersDropped += int64(drop)
	}
}

// ack removes p (caller holds mu).
func (g *memGroup) ack(p *memPending) {
	delete(g.pending, p.e.key.String())
	if g.s.kind == KindReliable {
		g.s.remove(p.e)
	}
}

// serve hands deliveries to g's waiters and arms g's timer for the next
// retry or visibility deadline (caller holds mu).
func (g *memGroup) serve() []grant[*Delivery] {
	if g.waits.len() == 0 {
		return nil
	}
	now := g.s.now()
	var gs []grant[*Delivery]
	for g.waits.len() > 0 {
		d := g.deliver(now)
		if d == nil {
			break
		}
		gs = append(gs, grant[*Delivery]{w: g.waits.take(), v: d})
	}
	if g.waits.len() > 0 {
		var next time.Time
		for _, h := range []deadlineHeap{g.retries, g.visibility} {
			if h.Len() > 0 && (next.IsZero() || h[0].at.Before(next)) {
				next = h[0].at
			}
		}
		if !next.IsZero() {
			g.arm(next)
		}
	}
	return gs
}

func (g *memGroup) arm(t time.Time) {
	if g.stopTmr != nil && !g.timerAt.After(t) {
		return
	}
	if g.stopTmr != nil {
		g.stopTmr()
	}
	g.timerAt = t
	g.stopTmr = g.s.m.clk.AfterFunc(t.Sub(g.s.now()), func() {
		g.s.mu.Lock()
		g.stopTmr = nil
		gs := g.serve()
		g.s.mu.Unlock()
		callAll(gs)
	}).Stop
}

// held returns d's pending entry if this consumer still holds that delivery
// (caller holds mu).
func (g *memGroup) held(d *Delivery) *memPending {
	p := g.pending[d.ID]
	if p == nil || p.parked || p.count != d.Deliveries || p.consumer != g.s.m.consumer {
		return nil
	}
	return p
}

func (s *memStream) close() {
	s.mu.Lock()
	s.closed = true
	var gs []grant[*Delivery]
	for _, g := range s.groups {
		if g.stopTmr != nil {
			g.stopTmr()
			g.stopTmr = nil
		}
		gs = append(gs, g.waits.failAll(opErr("pop", s.name, ErrClosed))...)
	}
	s.mu.Unlock()
	callAll(gs)
}

// memReceiver implements Receiver for one group of a memory stream; there
// is one per group name, and deliveries point at it.
type memReceiver struct {
	s     *memStream
	group string
}

// receiver returns the receiver of group name (caller holds mu).
func (s *memStream) receiver(name string) *memReceiver {
	r := s.receivers[name]
	if r == nil {
		r = &memReceiver{s: s, group: name}
		s.receivers[name] = r
	}
	return r
}

func (r *memReceiver) g() *memGroup { return r.s.group(r.group, true) }

func (r *memReceiver) label() string {
	if r.s.kind == KindBroadcast {
		return r.s.name + "/" + r.group
	}
	return r.s.name
}

func (r *memReceiver) Pop() *store.Op[*Delivery] {
	return store.Local(func() (*Delivery, error) {
		r.s.mu.Lock()
		if r.s.closed {
			r.s.mu.Unlock()
			return nil, opErr("pop", r.label(), ErrClosed)
		}
		g := r.g()
		gs := g.serve()
		d := g.deliver(r.s.now())
		r.s.mu.Unlock()
		callAll(gs)
		if d == nil {
			return nil, opErr("pop", r.label(), ErrEmpty)
		}
		return d, nil
	})
}

func (r *memReceiver) PopWait(timeout time.Duration, done func(*Delivery, error)) func() bool {
	if err := checkTimeout("pop", r.label(), timeout); err != nil {
		done(nil, err)
		return func() bool { return false }
	}
	r.s.mu.Lock()
	if r.s.closed {
		r.s.mu.Unlock()
		done(nil, opErr("pop", r.label(), ErrClosed))
		return func() bool { return false }
	}
	g := r.g()
	_, cancel := g.waits.add(timeout, done)
	gs := g.serve()
	r.s.mu.Unlock()
	callAll(gs)
	return cancel
}

// settle runs fn on d's pending entry if this consumer holds it.
func settleOp[T any](r *memReceiver, op string, d *Delivery, mark bool, fn func(g *memGroup, p *memPending, now time.Time) (T, []grant[*Delivery])) *store.Op[T] {
	if err := d.begin(r, op, r.label(), mark); err != nil {
		return store.Failed[T](err)
	}
	return store.Local(func() (T, error) {
		var zero T
		r.s.mu.Lock()
		g := r.s.groups[r.group]
		var p *memPending
		if g != nil {
			p = g.held(d)
		}
		if p == nil && !(op == "ack" && g != nil && g.pending[d.ID] != nil) {
			r.s.mu.Unlock()
			err := opErr(op, r.label(), ErrNotHeld)
			if mark {
				d.finish(err)
			}
			return zero, err
		}
		if p == nil { // ack of a message another delivery holds: it is done all the same
			p = g.pending[d.ID]
		}
		v, gs := fn(g, p, r.s.now())
		r.s.mu.Unlock()
		if mark {
			d.finish(nil)
		}
		callAll(gs)
		return v, nil
	})
}

func (r *memReceiver) Ack(d *Delivery) *store.Op[struct{}] {
	return settleOp(r, "ack", d, true, func(g *memGroup, p *memPending, now time.Time) (struct{}, []grant[*Delivery]) {
		g.ack(p)
		return struct{}{}, nil
	})
}

func (r *memReceiver) ackMany(ds []*Delivery) *store.Op[[]error] {
	ops := make([]*store.Op[struct{}], len(ds))
	for i, d := range ds {
		ops[i] = r.Ack(d)
	}
	return store.Local(func() ([]error, error) {
		errs := make([]error, len(ds))
		for i, op := range ops {
			_, errs[i] = op.Do(context.Background())
		}
		return errs, nil
	})
}

func (r *memReceiver) Nack(d *Delivery, delay time.Duration) *store.Op[NackResult] {
	if err := checkDelay("nack", r.label(), delay); err != nil {
		return store.Failed[NackResult](err)
	}
	return settleOp(r, "nack", d, true, func(g *memGroup, p *memPending, now time.Time) (NackResult, []grant[*Delivery]) {
		g.nacked++
		if p.count >= 1+g.s.o.MaxRetries {
			g.deadLetter(p, now)
			return NackResult{DeadLettered: true, Dropped: !g.s.o.DeadLetter.Enabled}, nil
		}
		g.park(p, now, now.Add(time.Duration(millis(delay))*time.Millisecond))
		return NackResult{}, g.serve()
	})
}

func (r *memReceiver) Release(d *Delivery) *store.Op[struct{}] {
	return settleOp(r, "release", d, true, func(g *memGroup, p *memPending, now time.Time) (struct{}, []grant[*Delivery]) {
		p.count--
		g.park(p, now, now)
		return struct{}{}, g.serve()
	})
}

// park makes p wait for a retry at due.
func (g *memGroup) park(p *memPending, now, due time.Time) {
	p.parked = true
	p.consumer = parkedConsumer
	p.at = now
	p.due = due
	heap.Push(&g.retries, deadlineItem{at: due, key: p.e.key, id: p.e.key.String(), count: p.count, stamp: now})
}

func (r *memReceiver) Extend(d *Delivery) *store.Op[struct{}] {
	return settleOp(r, "extend", d, false, func(g *memGroup, p *memPending, now time.Time) (struct{}, []grant[*Delivery]) {
		g.touch(p, now)
		return struct{}{}, nil
	})
}

// touch restarts p's visibility timeout.
func (g *memGroup) touch(p *memPending, now time.Time) {
	p.at = now
	heap.Push(&g.visibility, deadlineItem{at: now.Add(g.s.o.VisibilityTimeout), key: p.e.key, id: p.e.key.String(), count: p.count, stamp: now})
	g.consumers.see(g.s.m.consumer, now)
}

func (r *memReceiver) extendMany(ds []*Delivery) *store.Op[[]error] {
	return store.Local(func() ([]error, error) {
		r.s.mu.Lock()
		defer r.s.mu.Unlock()
		now := r.s.now()
		errs := make([]error, len(ds))
		g := r.s.groups[r.group]
		for i, d := range ds {
			var p *memPending
			if g != nil && d.r == r && d.state.Load() == held {
				p = g.held(d)
			}
			if p == nil {
				errs[i] = opErr("extend", r.label(), fmt.Errorf("message %s: %w", d.ID, ErrNotHeld))
				continue
			}
			g.touch(p, now)
		}
		return errs, nil
	})
}

func (r *memReceiver) options() Options              { return r.s.o }
func (r *memReceiver) queueLabel() string            { return r.label() }
func (r *memReceiver) clock() Clock                  { return r.s.m.clk }
func (r *memReceiver) register(stop StopFunc) func() { return r.s.m.register(stop) }

func (r *memReceiver) Consume(o ConsumeOptions, h Handler) (StopFunc, error) {
	if r.s.m.isClosed() {
		return nil, opErr("consume", r.label(), ErrClosed)
	}
	return consume(receiverSource{r: r, queue: r.label()}, o, h)
}

// groupStats reports g (caller holds mu).
func (g *memGroup) stats(now time.Time) Stats {
	st := Stats{Name: g.name, Kind: g.s.kind, Consumers: g.consumers.live(now),
		Expired: g.expired, Reclaimed: g.reclaimed, Nacked: g.nacked,
		DeadLettered: g.deadLettered, DeadDropped: g.deadDropped}
	for _, p := range g.pending {
		if p.parked {
			st.Retrying++
		} else {
			st.InFlight++
		}
	}
	i := sort.Search(len(g.s.entries), func(i int) bool { return g.lastDelivered.less(g.s.entries[i].key) })
	for _, e := range g.s.entries[i:] {
		if !e.deleted && (e.target == "" || e.target == g.name) {
			st.Ready++
		}
	}
	return st
}
