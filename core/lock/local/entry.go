package local

import "time"

// indexThreshold is the number of holders of one name above which an
// (owner, mode) → slot index map is kept, so that lookups stay O(1) for a
// lock with many readers. Below it a linear scan is faster.
const indexThreshold = 8

// holder is one (owner, mode) hold of a name.
type holder struct {
	owner    string
	mode     Mode
	count    int
	acquired time.Time
	expires  time.Time // zero = no ttl
	kind     Kind
}

func (h *holder) ownerHold() OwnerHold {
	return OwnerHold{Owner: h.owner, Mode: h.mode, Count: h.count, AcquiredAt: h.acquired, ExpiresAt: h.expires, Kind: h.kind}
}

// hkey identifies a holder in entry.index.
type hkey struct {
	owner string
	mode  Mode
}

// entry is the state of one named lock. It exists in its shard's map
// exactly while it has at least one holder: every operation restores the
// invariant "no holders ⇒ no waiters" (a waiter at the head of the queue of
// a free lock is always grantable) and then drops a free entry.
type entry struct {
	name    string
	holders []holder
	inline  [2]holder    // backing array of holders for the common case
	index   map[hkey]int // nil unless len(holders) > indexThreshold
	hasX    bool         // an Exclusive holder exists (there is at most one)
	xowner  string       // its owner
	nttl    int          // holders with a non-zero expires
	minExp  time.Time    // earliest expires among holders; valid if nttl > 0
	hidx    int          // position in the shard's expiry heap, -1 if absent
	head    *Waiter      // FIFO queue of waiters
	tail    *Waiter      //
	nwait   int          // length of the queue
}

func newEntry() *entry {
	e := &entry{hidx: -1}
	e.holders = e.inline[:0]
	return e
}

// reset clears e for reuse from the shard's free list.
func (e *entry) reset() {
	e.name = ""
	if cap(e.holders) > 4*len(e.inline) {
		e.holders = e.inline[:0] // do not keep a huge reader array alive
	} else {
		e.holders = e.holders[:0]
	}
	e.index = nil
	e.hasX = false
	e.xowner = ""
	e.nttl = 0
	e.minExp = time.Time{}
	e.hidx = -1
	e.head, e.tail, e.nwait = nil, nil, 0
}

// find returns the slot of owner's hold in mode, or -1.
func (e *entry) find(owner string, mode Mode) int {
	if e.index != nil {
		if i, ok := e.index[hkey{owner, mode}]; ok {
			return i
		}
		return -1
	}
	for i := range e.holders {
		if h := &e.holders[i]; h.mode == mode && h.owner == owner {
			return i
		}
	}
	return -1
}

// add appends a new hold of count 1 and returns it as a Hold.
func (e *entry) add(owner string, mode Mode, kind Kind, now time.Time, ttl time.Duration) Hold {
	e.holders = append(e.holders, holder{owner: owner, mode: mode, count: 1, acquired: now, kind: kind})
	i := len(e.holders) - 1
	if e.index != nil {
		e.index[hkey{owner, mode}] = i
	} else if len(e.holders) > indexThreshold {
		e.index = make(map[hkey]int, 2*len(e.holders))
		for j := range e.holders {
			e.index[hkey{e.holders[j].owner, e.holders[j].mode}] = j
		}
	}
	if mode == Exclusive {
		e.hasX, e.xowner = true, owner
	}
	if ttl > 0 {
		e.setExpires(i, now.Add(ttl))
	}
	return e.hold(i)
}

// remove drops slot i entirely (whatever its count). The last holder takes
// its place, so slots are not stable across a remove.
func (e *entry) remove(i int) {
	e.setExpires(i, time.Time{})
	h := e.holders[i]
	last := len(e.holders) - 1
	if i != last {
		e.holders[i] = e.holders[last]
		if e.index != nil {
			e.index[hkey{e.holders[i].owner, e.holders[i].mode}] = i
		}
	}
	e.holders[last] = holder{} // let the owner string be collected
	e.holders = e.holders[:last]
	if e.index != nil {
		delete(e.index, hkey{h.owner, h.mode})
		if len(e.holders) <= indexThreshold/2 {
			e.index = nil
		}
	}
	if h.mode == Exclusive {
		e.hasX, e.xowner = false, ""
	}
}

// setExpires sets the expiry of slot i (zero = none), keeping nttl and
// minExp up to date.
func (e *entry) setExpires(i int, t time.Time) {
	h := &e.holders[i]
	old := h.expires
	h.expires = t
	switch {
	case old.IsZero() && t.IsZero():
	case old.IsZero():
		e.nttl++
		if e.nttl == 1 || t.Before(e.minExp) {
			e.minExp = t
		}
	case t.IsZero():
		e.nttl--
		if e.nttl == 0 {
			e.minExp = time.Time{}
		} else if !old.After(e.minExp) {
			e.recomputeMin()
		}
	default:
		if t.Before(e.minExp) {
			e.minExp = t
		} else if !old.After(e.minExp) {
			e.recomputeMin()
		}
	}
}

func (e *entry) recomputeMin() {
	var m time.Time
	for i := range e.holders {
		if x := e.holders[i].expires; !x.IsZero() && (m.IsZero() || x.Before(m)) {
			m = x
		}
	}
	e.minExp = m
}

// reenter adds one level to slot i. With ttl > 0 it pushes the expiry to at
// least now+ttl; it never shortens an expiry nor gives one to a hold that
// has none.
func (e *entry) reenter(i int, now time.Time, ttl time.Duration) Hold {
	h := &e.holders[i]
	h.count++
	if ttl > 0 && !h.expires.IsZero() {
		if t := now.Add(ttl); t.After(h.expires) {
			e.setExpires(i, t)
		}
	}
	return e.hold(i)
}

func (e *entry) hold(i int) Hold {
	h := &e.holders[i]
	return Hold{Count: h.count, AcquiredAt: h.acquired, ExpiresAt: h.expires}
}

// grantable reports whether queued waiter w can be granted now.
func (e *entry) grantable(w *Waiter) bool {
	if e.find(w.owner, w.mode) >= 0 {
		return w.reentrant
	}
	if w.mode == Exclusive {
		return len(e.holders) == 0
	}
	return !e.hasX || e.xowner == w.owner
}

// expireDue drops every hold whose expiry is at or before now and returns
// how many it dropped.
func (e *entry) expireDue(now time.Time) int {
	n := 0
	// Backwards, because remove moves the last slot into the removed one.
	for i := len(e.holders) - 1; i >= 0; i-- {
		if x := e.holders[i].expires; !x.IsZero() && !now.Before(x) {
			e.remove(i)
			n++
		}
	}
	return n
}

func (e *entry) enqueue(w *Waiter) {
	w.prev = e.tail
	if e.tail != nil {
		e.tail.next = w
	} else {
		e.head = w
	}
	e.tail = w
	e.nwait++
}

func (e *entry) unlink(w *Waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		e.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		e.tail = w.prev
	}
	w.prev, w.next = nil, nil
	e.nwait--
}

// Expiry heap of a shard: a binary min-heap of the entries that have at
// least one hold with a ttl, ordered by entry.minExp.

func (s *shard) heapLess(i, j int) bool { return s.heap[i].minExp.Before(s.heap[j].minExp) }

func (s *shard) heapSwap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.heap[i].hidx = i
	s.heap[j].hidx = j
}

func (s *shard) heapUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.heapLess(i, p) {
			return
		}
		s.heapSwap(i, p)
		i = p
	}
}

func (s *shard) heapDown(i int) bool {
	start, n := i, len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && s.heapLess(r, l) {
			c = r
		}
		if !s.heapLess(c, i) {
			break
		}
		s.heapSwap(i, c)
		i = c
	}
	return i > start
}

func (s *shard) heapRemove(e *entry) {
	i, last := e.hidx, len(s.heap)-1
	if i != last {
		s.heapSwap(i, last)
	}
	s.heap[last] = nil
	s.heap = s.heap[:last]
	e.hidx = -1
	if i != last {
		if !s.heapDown(i) {
			s.heapUp(i)
		}
	}
	if last == 0 && cap(s.heap) > 1024 {
		s.heap = nil
	}
}

// syncHeap puts e at its place in the expiry heap (or out of it) after its
// holds changed, and tells the manager's timer if e became the earliest.
func (s *shard) syncHeap(e *entry) {
	switch {
	case e.nttl == 0:
		if e.hidx >= 0 {
			s.heapRemove(e)
		}
		return
	case e.hidx < 0:
		e.hidx = len(s.heap)
		s.heap = append(s.heap, e)
		s.heapUp(e.hidx)
	default:
		if !s.heapDown(e.hidx) {
			s.heapUp(e.hidx)
		}
	}
	if e.hidx == 0 && s.m.expiryOn.Load() {
		s.m.noteExpiry(e.minExp)
	}
}
