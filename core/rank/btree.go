package rank

// An order-statistic B+tree: members in rank order in leaves of up to fan
// entries (key and uid inline, so a search and a run of neighbours read
// contiguous cache lines), inner nodes holding per child an upper-bound key
// and the number of members below it, and parent pointers with the node's
// index in its parent. A member's rank is its index in its leaf plus the
// counts of the children left of its path, summed on the way up (no key
// comparisons, no search for the child in its parent); the member at a
// rank is found by counts on the way down. Height is 4 at 1 000 000
// members. Not safe for concurrent use; memBoard guards it.

const (
	fan = 64 // entries per node, at most fan-1 at rest
	// A node below minFill entries merges with a sibling when both fit in
	// one node; an empty leaf always merges away.
	minFill = fan / 4
)

// key is an entry's sort key: higher scores first, then the smaller seq
// (TiesReach) or the greater uid (TiesUID, uid held next to the key).
type key struct {
	score float64
	seq   uint64
}

// item is a member's handle, the value of memBoard's map: it stays the
// same while the entry moves between leaves, and says which leaf holds
// the entry. It is small (16 bytes) so that the lookup of a member reads
// one cache line for it; the entry's key and uid live in the leaf.
type item struct {
	leaf  *leaf
	score float64 // the entry's score, for reads that need no leaf
}

type leaf struct {
	// The header and the first items share a cache line: finding an item
	// (a scan of items) starts there.
	parent *inner
	pidx   int // index in parent
	n      int
	items  [fan]*item
	keys   [fan]key
	uids   [fan]string
	prev   *leaf
	next   *leaf
}

type inner struct {
	parent   *inner
	pidx     int  // index in parent
	n        int  // children
	leafKids bool // children are leaves (else inner nodes)
	// count[i] is the number of members under child i. int32 halves the
	// cache lines a rank sums over; a board would need hundreds of GB of
	// memory to overflow it.
	count [fan]int32
	// sep[i] (i < n-1) is the last key child i may hold (sepUID[i] its
	// uid); every key of child i+1 ranks after it.
	sep    [fan]key
	sepUID [fan]string
	leaves [fan]*leaf
	inners [fan]*inner
}

type tree struct {
	byUID  bool
	root   *inner // always an inner node; its single leaf when small
	length int
}

func newTree(byUID bool) *tree {
	r := &inner{n: 1, leafKids: true}
	r.leaves[0] = &leaf{parent: r}
	return &tree{byUID: byUID, root: r}
}

// before reports whether key a (of uid au) ranks before b (of uid bu).
func (t *tree) before(a key, au string, b key, bu string) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if t.byUID {
		return au > bu
	}
	return a.seq < b.seq
}

// entryBefore reports whether l's entry i ranks before k (of uid).
func (t *tree) entryBefore(l *leaf, i int, k key, uid string) bool {
	return t.before(l.keys[i], l.uids[i], k, uid)
}

// childFor returns the child of in that k belongs to: the number of
// separators ranking before it.
func (t *tree) childFor(in *inner, k key, uid string) int {
	lo, hi := 0, in.n-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.before(in.sep[m], in.sepUID[m], k, uid) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// search returns the number of l's entries ranking before k.
func (t *tree) search(l *leaf, k key, uid string) int {
	lo, hi := 0, l.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.entryBefore(l, m, k, uid) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// index returns it's index in its leaf: a scan of the item pointers reads
// them in order from the header's cache line on (the prefetcher follows),
// fewer lines than a binary search on the keys would jump between.
func (l *leaf) index(it *item) int {
	for i, x := range l.items[:l.n] {
		if x == it {
			return i
		}
	}
	panic("rank: item not in its leaf")
}

func (in *inner) total() int { return in.below(in.n) }

// below returns the number of members under in's children left of i.
func (in *inner) below(i int) int {
	n := 0
	for _, c := range in.count[:i] {
		n += int(c)
	}
	return n
}

// adopt makes in the parent of its children [from, to), at their indexes.
func (in *inner) adopt(from, to int) {
	if in.leafKids {
		for i := from; i < to; i++ {
			c := in.leaves[i]
			c.parent, c.pidx = in, i
		}
		return
	}
	for i := from; i < to; i++ {
		c := in.inners[i]
		c.parent, c.pidx = in, i
	}
}

// adoptItems makes l the leaf of its entries [from, to).
func (l *leaf) adoptItems(from, to int) {
	for _, it := range l.items[from:to] {
		it.leaf = l
	}
}

// insert adds it with key k and uid.
func (t *tree) insert(it *item, k key, uid string) {
	in := t.root
	for !in.leafKids {
		i := t.childFor(in, k, uid)
		in.count[i]++
		in = in.inners[i]
	}
	i := t.childFor(in, k, uid)
	in.count[i]++
	l := in.leaves[i]
	pos := t.search(l, k, uid)
	copy(l.keys[pos+1:l.n+1], l.keys[pos:l.n])
	copy(l.uids[pos+1:l.n+1], l.uids[pos:l.n])
	copy(l.items[pos+1:l.n+1], l.items[pos:l.n])
	l.keys[pos], l.uids[pos], l.items[pos] = k, uid, it
	l.n++
	it.leaf, it.score = l, k.score
	t.length++
	if l.n == fan {
		t.splitLeaf(l)
	}
}

// splitLeaf moves the upper half of a full leaf to a new right sibling.
func (t *tree) splitLeaf(l *leaf) {
	const half = fan / 2
	r := &leaf{n: l.n - half, prev: l, next: l.next}
	copy(r.keys[:], l.keys[half:l.n])
	copy(r.uids[:], l.uids[half:l.n])
	copy(r.items[:], l.items[half:l.n])
	clear(l.uids[half:l.n])
	clear(l.items[half:l.n])
	l.n = half
	r.adoptItems(0, r.n)
	if l.next != nil {
		l.next.prev = r
	}
	l.next = r
	p, i := l.parent, l.pidx
	p.insertChild(i, l.keys[l.n-1], l.uids[l.n-1], l.n, r.n)
	p.leaves[i+1] = r
	p.adopt(i+1, p.n)
	if p.n == fan {
		t.splitInner(p)
	}
}

// insertChild opens a slot in p for a new child right of child i: child
// i's bound becomes sep (of uid) and its count left, the new child (set
// and adopted by the caller) takes child i's old bound and count right.
func (p *inner) insertChild(i int, sep key, uid string, left, right int) {
	copy(p.sep[i+1:p.n], p.sep[i:p.n-1])
	copy(p.sepUID[i+1:p.n], p.sepUID[i:p.n-1])
	copy(p.count[i+2:p.n+1], p.count[i+1:p.n])
	copy(p.leaves[i+2:p.n+1], p.leaves[i+1:p.n])
	copy(p.inners[i+2:p.n+1], p.inners[i+1:p.n])
	p.sep[i], p.sepUID[i] = sep, uid
	p.count[i], p.count[i+1] = int32(left), int32(right)
	p.leaves[i+1], p.inners[i+1] = nil, nil
	p.n++
}

// splitInner moves the upper half of a full inner node to a new right
// sibling (under a new root when p is the root).
func (t *tree) splitInner(p *inner) {
	const half = fan / 2
	q := &inner{n: p.n - half, leafKids: p.leafKids}
	copy(q.sep[:], p.sep[half:p.n-1])
	copy(q.sepUID[:], p.sepUID[half:p.n-1])
	copy(q.count[:], p.count[half:p.n])
	copy(q.leaves[:], p.leaves[half:p.n])
	copy(q.inners[:], p.inners[half:p.n])
	q.adopt(0, q.n)
	sep, uid := p.sep[half-1], p.sepUID[half-1]
	clear(p.sep[half-1 : p.n-1])
	clear(p.sepUID[half-1 : p.n-1])
	clear(p.count[half:p.n])
	clear(p.leaves[half:p.n])
	clear(p.inners[half:p.n])
	p.n = half
	g := p.parent
	if g == nil {
		g = &inner{n: 1}
		g.inners[0] = p
		g.adopt(0, 1)
		t.root = g
	}
	i := p.pidx
	g.insertChild(i, sep, uid, p.total(), q.total())
	g.inners[i+1] = q
	g.adopt(i+1, g.n)
	if g.n == fan {
		t.splitInner(g)
	}
}

// remove takes it out of the tree.
func (t *tree) remove(it *item) { t.removeAt(it.leaf, it.leaf.index(it)) }

// removeAt takes l's entry pos out of the tree.
func (t *tree) removeAt(l *leaf, pos int) {
	l.items[pos].leaf = nil
	copy(l.keys[pos:], l.keys[pos+1:l.n])
	copy(l.uids[pos:], l.uids[pos+1:l.n])
	copy(l.items[pos:], l.items[pos+1:l.n])
	l.n--
	l.uids[l.n], l.items[l.n] = "", nil
	t.length--
	p, i := l.parent, l.pidx
	p.count[i]--
	for c, g := p, p.parent; g != nil; c, g = g, g.parent {
		g.count[c.pidx]--
	}
	if l.n < minFill && p.n > 1 {
		if i == p.n-1 {
			i--
		}
		t.balanceLeaves(p, i)
	}
}

// balanceLeaves merges p's children j and j+1 when they fit in one leaf,
// else evens out their entries (each then holds at least fan/2).
func (t *tree) balanceLeaves(p *inner, j int) {
	l, r := p.leaves[j], p.leaves[j+1]
	if l.n+r.n < fan {
		copy(l.keys[l.n:], r.keys[:r.n])
		copy(l.uids[l.n:], r.uids[:r.n])
		copy(l.items[l.n:], r.items[:r.n])
		l.n += r.n
		l.adoptItems(l.n-r.n, l.n)
		l.next = r.next
		if r.next != nil {
			r.next.prev = l
		}
		p.dropChild(j)
		t.balanceInner(p)
		return
	}
	if want := (l.n + r.n) / 2; l.n < want { // r's first entries to l
		k := want - l.n
		copy(l.keys[l.n:], r.keys[:k])
		copy(l.uids[l.n:], r.uids[:k])
		copy(l.items[l.n:], r.items[:k])
		l.n += k
		l.adoptItems(l.n-k, l.n)
		copy(r.keys[:], r.keys[k:r.n])
		copy(r.uids[:], r.uids[k:r.n])
		copy(r.items[:], r.items[k:r.n])
		clear(r.uids[r.n-k : r.n])
		clear(r.items[r.n-k : r.n])
		r.n -= k
	} else { // l's last entries to r
		k := l.n - want
		copy(r.keys[k:], r.keys[:r.n])
		copy(r.uids[k:], r.uids[:r.n])
		copy(r.items[k:], r.items[:r.n])
		copy(r.keys[:k], l.keys[l.n-k:l.n])
		copy(r.uids[:k], l.uids[l.n-k:l.n])
		copy(r.items[:k], l.items[l.n-k:l.n])
		clear(l.uids[l.n-k : l.n])
		clear(l.items[l.n-k : l.n])
		l.n -= k
		r.n += k
		r.adoptItems(0, k)
	}
	p.count[j], p.count[j+1] = int32(l.n), int32(r.n)
	p.sep[j], p.sepUID[j] = l.keys[l.n-1], l.uids[l.n-1]
}

// dropChild removes p's child j+1 after its entries joined child j, which
// takes over its bound and count (the bound between them goes).
func (p *inner) dropChild(j int) {
	p.count[j] += p.count[j+1]
	copy(p.sep[j:], p.sep[j+1:p.n-1])
	copy(p.sepUID[j:], p.sepUID[j+1:p.n-1])
	p.sep[p.n-2], p.sepUID[p.n-2] = key{}, ""
	copy(p.count[j+1:], p.count[j+2:p.n])
	copy(p.leaves[j+1:], p.leaves[j+2:p.n])
	copy(p.inners[j+1:], p.inners[j+2:p.n])
	p.n--
	p.leaves[p.n], p.inners[p.n], p.count[p.n] = nil, nil, 0
	p.adopt(j+1, p.n)
}

// balanceInner restores p after it lost a child: a non-root node below
// minFill merges with or borrows from a sibling; a root with a single
// inner child gives way to it.
func (t *tree) balanceInner(p *inner) {
	g := p.parent
	if g == nil {
		for !t.root.leafKids && t.root.n == 1 {
			t.root = t.root.inners[0]
			t.root.parent = nil
		}
		return
	}
	if p.n >= minFill {
		return
	}
	j := p.pidx
	if j == g.n-1 {
		j--
	}
	l, r := g.inners[j], g.inners[j+1]
	if l.n+r.n < fan {
		// l's children, then r's, with g's bound between them.
		l.sep[l.n-1], l.sepUID[l.n-1] = g.sep[j], g.sepUID[j]
		copy(l.sep[l.n:], r.sep[:r.n-1])
		copy(l.sepUID[l.n:], r.sepUID[:r.n-1])
		copy(l.count[l.n:], r.count[:r.n])
		copy(l.leaves[l.n:], r.leaves[:r.n])
		copy(l.inners[l.n:], r.inners[:r.n])
		l.n += r.n
		l.adopt(l.n-r.n, l.n)
		g.dropChild(j)
		t.balanceInner(g)
		return
	}
	if want := (l.n + r.n) / 2; l.n < want { // r's first children to l
		k := want - l.n
		l.sep[l.n-1], l.sepUID[l.n-1] = g.sep[j], g.sepUID[j]
		copy(l.sep[l.n:], r.sep[:k-1])
		copy(l.sepUID[l.n:], r.sepUID[:k-1])
		g.sep[j], g.sepUID[j] = r.sep[k-1], r.sepUID[k-1]
		copy(l.count[l.n:], r.count[:k])
		copy(l.leaves[l.n:], r.leaves[:k])
		copy(l.inners[l.n:], r.inners[:k])
		l.n += k
		l.adopt(l.n-k, l.n)
		copy(r.sep[:], r.sep[k:r.n-1])
		copy(r.sepUID[:], r.sepUID[k:r.n-1])
		copy(r.count[:], r.count[k:r.n])
		copy(r.leaves[:], r.leaves[k:r.n])
		copy(r.inners[:], r.inners[k:r.n])
		clear(r.sep[r.n-1-k : r.n-1])
		clear(r.sepUID[r.n-1-k : r.n-1])
		clear(r.count[r.n-k : r.n])
		clear(r.leaves[r.n-k : r.n])
		clear(r.inners[r.n-k : r.n])
		r.n -= k
		r.adopt(0, r.n)
	} else { // l's last children to r
		k := l.n - want
		copy(r.sep[k:], r.sep[:r.n-1])
		copy(r.sepUID[k:], r.sepUID[:r.n-1])
		r.sep[k-1], r.sepUID[k-1] = g.sep[j], g.sepUID[j]
		copy(r.sep[:k-1], l.sep[l.n-k:l.n-1])
		copy(r.sepUID[:k-1], l.sepUID[l.n-k:l.n-1])
		g.sep[j], g.sepUID[j] = l.sep[l.n-k-1], l.sepUID[l.n-k-1]
		copy(r.count[k:], r.count[:r.n])
		copy(r.leaves[k:], r.leaves[:r.n])
		copy(r.inners[k:], r.inners[:r.n])
		copy(r.count[:k], l.count[l.n-k:l.n])
		copy(r.leaves[:k], l.leaves[l.n-k:l.n])
		copy(r.inners[:k], l.inners[l.n-k:l.n])
		r.n += k
		r.adopt(0, r.n)
		clear(l.sep[l.n-k-1 : l.n-1])
		clear(l.sepUID[l.n-k-1 : l.n-1])
		clear(l.count[l.n-k : l.n])
		clear(l.leaves[l.n-k : l.n])
		clear(l.inners[l.n-k : l.n])
		l.n -= k
	}
	g.count[j], g.count[j+1] = int32(l.total()), int32(r.total())
}

// move gives it a new key: within its leaf when the key stays between two
// other entries of it (no count changes; only the entries between the old
// and the new place shift), else by a remove and an insert.
func (t *tree) move(it *item, k key) {
	l := it.leaf
	pos := l.index(it)
	uid := l.uids[pos]
	lo, hi := 0, l.n-1
	if pos == lo {
		lo++
	}
	if pos == hi {
		hi--
	}
	if lo < hi && t.entryBefore(l, lo, k, uid) && !t.entryBefore(l, hi, k, uid) {
		// at counts the entries before k, the old one among them when it
		// ranks before k too.
		at := t.search(l, k, uid)
		if at > pos {
			at--
			copy(l.keys[pos:at], l.keys[pos+1:at+1])
			copy(l.uids[pos:at], l.uids[pos+1:at+1])
			copy(l.items[pos:at], l.items[pos+1:at+1])
		} else {
			copy(l.keys[at+1:pos+1], l.keys[at:pos])
			copy(l.uids[at+1:pos+1], l.uids[at:pos])
			copy(l.items[at+1:pos+1], l.items[at:pos])
		}
		l.keys[at], l.uids[at], l.items[at] = k, uid, it
		it.score = k.score
		return
	}
	t.removeAt(l, pos)
	t.insert(it, k, uid)
}

// rank returns it's 1-based rank.
func (t *tree) rank(it *item) int { return rankAt(it.leaf, it.leaf.index(it)) }

// rankAt returns the 1-based rank of l's entry i.
func rankAt(l *leaf, i int) int {
	r := i + 1
	p, j := l.parent, l.pidx
	for {
		r += p.below(j)
		if p.parent == nil {
			return r
		}
		p, j = p.parent, p.pidx
	}
}

// cursor is a position in the rank order.
type cursor struct {
	l *leaf
	i int
}

func (c cursor) valid() bool    { return c.l != nil && c.i < c.l.n }
func (c cursor) score() float64 { return c.l.keys[c.i].score }
func (c cursor) entry(rank int) Entry {
	return Entry{UID: c.l.uids[c.i], Score: c.l.keys[c.i].score, Rank: rank}
}

func (c cursor) next() cursor {
	if c.i++; c.i >= c.l.n {
		return cursor{l: c.l.next}
	}
	return c
}

func (c cursor) prev() cursor {
	if c.i--; c.i < 0 {
		if c.l = c.l.prev; c.l != nil {
			c.i = c.l.n - 1
		}
	}
	return c
}

// at returns the cursor at rank r (1 <= r <= length).
func (t *tree) at(r int) cursor {
	in := t.root
	for {
		i := 0
		for r > int(in.count[i]) {
			r -= int(in.count[i])
			i++
		}
		if in.leafKids {
			return cursor{l: in.leaves[i], i: r - 1}
		}
		in = in.inners[i]
	}
}

// cursorOf returns it's cursor.
func (t *tree) cursorOf(it *item) cursor { return cursor{l: it.leaf, i: it.leaf.index(it)} }

// last returns the cursor at the last-ranked entry (invalid when empty).
func (t *tree) last() cursor {
	if t.length == 0 {
		return cursor{}
	}
	in := t.root
	for !in.leafKids {
		in = in.inners[in.n-1]
	}
	l := in.leaves[in.n-1]
	return cursor{l: l, i: l.n - 1}
}

// firstAtMost returns the cursor at the best-ranked entry with score <=
// max and its rank (an invalid cursor when there is none).
func (t *tree) firstAtMost(max float64) (cursor, int) {
	r := 1
	in := t.root
	for {
		lo, hi := 0, in.n-1
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if in.sep[m].score > max {
				lo = m + 1
			} else {
				hi = m
			}
		}
		r += in.below(lo)
		if in.leafKids {
			l := in.leaves[lo]
			i := 0
			for i < l.n && l.keys[i].score > max {
				i++
			}
			r += i
			if i == l.n {
				return cursor{l: l.next}, r
			}
			return cursor{l: l, i: i}, r
		}
		in = in.inners[lo]
	}
}
