package scheduler

// itemKind is what a timer item does when it comes due.
type itemKind uint8

const (
	// itemFire is a task's next firing (for a distributed task: the moment
	// to claim it, a little ahead of its fire time).
	itemFire itemKind = iota
	// itemStart starts a claimed firing at its fire time.
	itemStart
	// itemRetry starts the next attempt of a failed firing.
	itemRetry
	// itemHeartbeat renews a distributed run's claim.
	itemHeartbeat
	// itemProbe checks whether a firing another process runs lost its
	// runner (its lease passed without renewal).
	itemProbe
	// itemFinish sends a run's outcome again (the Store did not answer).
	itemFinish
	// itemResync re-reads a task's record again (the Store did not answer).
	itemResync
)

// item is one pending timer of the loop. Every timer of the engine is an
// item in one heap, armed through a single Clock timer for the earliest.
type item struct {
	at   int64 // local clock, Unix ns
	seq  uint64
	kind itemKind
	task *task
	run  *run // itemStart, itemRetry, itemHeartbeat, itemFinish
	fire int64
	idx  int        // position in its heap, -1 when in none
	h    *timerHeap // the heap holding it, nil when in none
}

// timerHeap is a 4-ary min-heap of items by (at, seq): shallower than a
// binary heap, so a pop at 100 000 items touches ~9 levels. Measured
// against Go's runtime timers (one per task) in bench_test.go.
type timerHeap struct {
	items []*item
	seq   uint64
}

func (h *timerHeap) Len() int { return len(h.items) }

func (h *timerHeap) less(a, b *item) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// top returns the earliest item, or nil.
func (h *timerHeap) top() *item {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

// push adds it (which must not be in the heap).
func (h *timerHeap) push(it *item) {
	h.seq++
	it.seq = h.seq
	it.h = h
	it.idx = len(h.items)
	h.items = append(h.items, it)
	h.up(it.idx)
}

// pop removes and returns the earliest item.
func (h *timerHeap) pop() *item {
	it := h.items[0]
	h.removeAt(0)
	return it
}

// remove takes it out of the heap if it is in it.
func (h *timerHeap) remove(it *item) {
	if it != nil && it.idx >= 0 {
		h.removeAt(it.idx)
	}
}

func (h *timerHeap) removeAt(i int) {
	it := h.items[i]
	last := len(h.items) - 1
	if i != last {
		h.items[i] = h.items[last]
		h.items[i].idx = i
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
	it.idx = -1
	it.h = nil
}

func (h *timerHeap) up(i int) {
	it := h.items[i]
	for i > 0 {
		p := (i - 1) / 4
		if !h.less(it, h.items[p]) {
			break
		}
		h.items[i] = h.items[p]
		h.items[i].idx = i
		i = p
	}
	h.items[i] = it
	it.idx = i
}

// down sifts item i down; it reports whether it moved.
func (h *timerHeap) down(i int) bool {
	it := h.items[i]
	start := i
	n := len(h.items)
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+4 && j < n; j++ {
			if h.less(h.items[j], h.items[m]) {
				m = j
			}
		}
		if !h.less(h.items[m], it) {
			break
		}
		h.items[i] = h.items[m]
		h.items[i].idx = i
		i = m
	}
	h.items[i] = it
	it.idx = i
	return i != start
}
