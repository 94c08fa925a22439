package rank

// An order-statistic B+tree: members in rank order in leaves of up to fan
// entries (keys inline, so a search reads a few contiguous cache lines per
// level), inner nodes holding per child an upper-bound key and the number
// of members below it, and parent pointers. A member's rank is its index in
// its leaf plus the counts of the children left of its path, summed on the
// way up (no key comparisons); the member at a rank is found by counts on
// the way down. Height is 4 at 1 000 000 members. Not safe for concurrent
// use; memBoard guards it.

const (
	fan = 64 // entries per node, at most fan-1 at rest
	// A node below minFill entries merges with a sibling when both fit in
	// one node; an empty leaf always merges away.
	minFill = fan / 4
)

// key is an entry's sort key: higher scores first, then the smaller seq
// (TiesReach) or the greater uid (TiesUID, uid held by the item).
type key struct {
	score float64
	seq   uint64
}

// item is one member.
type item struct {
	uid string
	key
	leaf *leaf // the leaf holding it
}

type leaf struct {
	n          int
	keys       [fan]key
	items      [fan]*item
	parent     *inner
	prev, next *leaf
}

// bound is a separator: a key and its uid (for TiesUID ties).
type bound struct {
	key
	uid string
}

type inner struct {
	n int // children
	// sep[i] (i < n-1) is the last key child i may hold; every key of
	// child i+1 ranks after it.
	sep      [fan]bound
	count    [fan]int // members under child i
	leafKids bool     // children are leaves (else inner nodes)
	leaves   [fan]*leaf
	inners   [fan]*inner
	parent   *inner
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
	e := l.keys[i]
	if e.score != k.score {
		return e.score > k.score
	}
	if t.byUID {
		return l.items[i].uid > uid
	}
	return e.seq < k.seq
}

// childFor returns the child of in that k belongs to: the number of
// separators ranking before it.
func (t *tree) childFor(in *inner, k key, uid string) int {
	lo, hi := 0, in.n-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s := &in.sep[m]; t.before(s.key, s.uid, k, uid) {
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

// index returns it's index in its leaf: a binary search on the inline
// keys (keys are unique), which reads fewer cache lines than a scan.
func (t *tree) index(it *item) int {
	l := it.leaf
	if i := t.search(l, it.key, it.uid); i < l.n && l.items[i] == it {
		return i
	}
	panic("rank: item not at its key in its leaf")
}

// lastBound is l's last entry as a separator.
func (l *leaf) lastBound() bound {
	return bound{l.keys[l.n-1], l.items[l.n-1].uid}
}

func (in *inner) leafIndex(l *leaf) int {
	for i := range in.n {
		if in.leaves[i] == l {
			return i
		}
	}
	panic("rank: leaf not in its parent")
}

func (in *inner) innerIndex(c *inner) int {
	for i := range in.n {
		if in.inners[i] == c {
			return i
		}
	}
	panic("rank: node not in its parent")
}

func (in *inner) total() int {
	n := 0
	for i := range in.n {
		n += in.count[i]
	}
	return n
}

// adopt makes in the parent of its children [from, to).
func (in *inner) adopt(from, to int) {
	if in.leafKids {
		for _, c := range in.leaves[from:to] {
			c.parent = in
		}
		return
	}
	for _, c := range in.inners[from:to] {
		c.parent = in
	}
}

// adoptItems makes l the leaf of its entries [from, to).
func (l *leaf) adoptItems(from, to int) {
	for _, it := range l.items[from:to] {
		it.leaf = l
	}
}

// insert adds it (key and uid set).
func (t *tree) insert(it *item) {
	in := t.root
	for !in.leafKids {
		i := t.childFor(in, it.key, it.uid)
		in.count[i]++
		in = in.inners[i]
	}
	i := t.childFor(in, it.key, it.uid)
	in.count[i]++
	l := in.leaves[i]
	pos := t.search(l, it.key, it.uid)
	copy(l.keys[pos+1:l.n+1], l.keys[pos:l.n])
	copy(l.items[pos+1:l.n+1], l.items[pos:l.n])
	l.keys[pos], l.items[pos] = it.key, it
	l.n++
	it.leaf = l
	t.length++
	if l.n == fan {
		t.splitLeaf(l)
	}
}

// splitLeaf moves the upper half of a full leaf to a new right sibling.
func (t *tree) splitLeaf(l *leaf) {
	const half = fan / 2
	r := &leaf{n: l.n - half, parent: l.parent, prev: l, next: l.next}
	copy(r.keys[:], l.keys[half:l.n])
	copy(r.items[:], l.items[half:l.n])
	clear(l.items[half:l.n])
	l.n = half
	r.adoptItems(0, r.n)
	if l.next != nil {
		l.next.prev = r
	}
	l.next = r
	p := l.parent
	i := p.leafIndex(l)
	p.insertChild(i, l.lastBound(), l.n, r.n)
	p.leaves[i+1] = r
	if p.n == fan {
		t.splitInner(p)
	}
}

// insertChild opens a slot in p for a new child right of child i: child
// i's bound becomes sep and its count left, the new child (set by the
// caller) takes child i's old bound and count right.
func (p *inner) insertChild(i int, sep bound, left, right int) {
	copy(p.sep[i+1:p.n], p.sep[i:p.n-1])
	copy(p.count[i+2:p.n+1], p.count[i+1:p.n])
	copy(p.leaves[i+2:p.n+1], p.leaves[i+1:p.n])
	copy(p.inners[i+2:p.n+1], p.inners[i+1:p.n])
	p.sep[i] = sep
	p.count[i], p.count[i+1] = left, right
	p.leaves[i+1], p.inners[i+1] = nil, nil
	p.n++
}

// splitInner moves the upper half of a full inner node to a new right
// sibling (under a new root when p is the root).
func (t *tree) splitInner(p *inner) {
	const half = fan / 2
	q := &inner{n: p.n - half, leafKids: p.leafKids, parent: p.parent}
	copy(q.sep[:], p.sep[half:p.n-1])
	copy(q.count[:], p.count[half:p.n])
	copy(q.leaves[:], p.leaves[half:p.n])
	copy(q.inners[:], p.inners[half:p.n])
	q.adopt(0, q.n)
	sep := p.sep[half-1]
	clear(p.sep[half-1 : p.n-1])
	clear(p.count[half:p.n])
	clear(p.leaves[half:p.n])
	clear(p.inners[half:p.n])
	p.n = half
	g := p.parent
	if g == nil {
		g = &inner{n: 1}
		g.inners[0] = p
		p.parent, q.parent = g, g
		t.root = g
	}
	i := g.innerIndex(p)
	g.insertChild(i, sep, p.total(), q.total())
	g.inners[i+1] = q
	if g.n == fan {
		t.splitInner(g)
	}
}

// remove takes it out of the tree.
func (t *tree) remove(it *item) { t.removeAt(it, t.index(it)) }

// removeAt takes it, at index pos of its leaf, out of the tree.
func (t *tree) removeAt(it *item, pos int) {
	l := it.leaf
	copy(l.keys[pos:], l.keys[pos+1:l.n])
	copy(l.items[pos:], l.items[pos+1:l.n])
	l.n--
	l.items[l.n] = nil
	it.leaf = nil
	t.length--
	p := l.parent
	i := p.leafIndex(l)
	p.count[i]--
	for c, g := p, p.parent; g != nil; c, g = g, g.parent {
		g.count[g.innerIndex(c)]--
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
		copy(l.items[l.n:], r.items[:k])
		l.n += k
		l.adoptItems(l.n-k, l.n)
		copy(r.keys[:], r.keys[k:r.n])
		copy(r.items[:], r.items[k:r.n])
		clear(r.items[r.n-k : r.n])
		r.n -= k
	} else { // l's last entries to r
		k := l.n - want
		copy(r.keys[k:], r.keys[:r.n])
		copy(r.items[k:], r.items[:r.n])
		copy(r.keys[:k], l.keys[l.n-k:l.n])
		copy(r.items[:k], l.items[l.n-k:l.n])
		clear(l.items[l.n-k : l.n])
		l.n -= k
		r.n += k
		r.adoptItems(0, k)
	}
	p.count[j], p.count[j+1] = l.n, r.n
	p.sep[j] = l.lastBound()
}

// dropChild removes p's child j+1 after its entries joined child j, which
// takes over its bound and count (the bound between them goes).
func (p *inner) dropChild(j int) {
	p.count[j] += p.count[j+1]
	copy(p.sep[j:], p.sep[j+1:p.n-1])
	p.sep[p.n-2] = bound{}
	copy(p.count[j+1:], p.count[j+2:p.n])
	copy(p.leaves[j+1:], p.leaves[j+2:p.n])
	copy(p.inners[j+1:], p.inners[j+2:p.n])
	p.n--
	p.leaves[p.n], p.inners[p.n], p.count[p.n] = nil, nil, 0
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
	j := g.innerIndex(p)
	if j == g.n-1 {
		j--
	}
	l, r := g.inners[j], g.inners[j+1]
	if l.n+r.n < fan {
		// l's children, then r's, with g's bound between them.
		l.sep[l.n-1] = g.sep[j]
		copy(l.sep[l.n:], r.sep[:r.n-1])
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
		l.sep[l.n-1] = g.sep[j]
		copy(l.sep[l.n:], r.sep[:k-1])
		g.sep[j] = r.sep[k-1]
		copy(l.count[l.n:], r.count[:k])
		copy(l.leaves[l.n:], r.leaves[:k])
		copy(l.inners[l.n:], r.inners[:k])
		l.n += k
		l.adopt(l.n-k, l.n)
		copy(r.sep[:], r.sep[k:r.n-1])
		copy(r.count[:], r.count[k:r.n])
		copy(r.leaves[:], r.leaves[k:r.n])
		copy(r.inners[:], r.inners[k:r.n])
		clear(r.sep[r.n-1-k : r.n-1])
		clear(r.count[r.n-k : r.n])
		clear(r.leaves[r.n-k : r.n])
		clear(r.inners[r.n-k : r.n])
		r.n -= k
	} else { // l's last children to r
		k := l.n - want
		copy(r.sep[k:], r.sep[:r.n-1])
		r.sep[k-1] = g.sep[j]
		copy(r.sep[:k-1], l.sep[l.n-k:l.n-1])
		g.sep[j] = l.sep[l.n-k-1]
		copy(r.count[k:], r.count[:r.n])
		copy(r.leaves[k:], r.leaves[:r.n])
		copy(r.inners[k:], r.inners[:r.n])
		copy(r.count[:k], l.count[l.n-k:l.n])
		copy(r.leaves[:k], l.leaves[l.n-k:l.n])
		copy(r.inners[:k], l.inners[l.n-k:l.n])
		r.n += k
		r.adopt(0, k)
		clear(l.sep[l.n-k-1 : l.n-1])
		clear(l.count[l.n-k : l.n])
		clear(l.leaves[l.n-k : l.n])
		clear(l.inners[l.n-k : l.n])
		l.n -= k
	}
	g.count[j], g.count[j+1] = l.total(), r.total()
}

// move gives it a new key: within its leaf when the key stays between two
// other entries of it (no count changes), else by a remove and an insert.
func (t *tree) move(it *item, k key) {
	l := it.leaf
	pos := t.index(it)
	lo, hi := 0, l.n-1
	if pos == lo {
		lo++
	}
	if pos == hi {
		hi--
	}
	if lo < hi && t.entryBefore(l, lo, k, it.uid) && !t.entryBefore(l, hi, k, it.uid) {
		copy(l.keys[pos:], l.keys[pos+1:l.n])
		copy(l.items[pos:], l.items[pos+1:l.n])
		l.n--
		at := t.search(l, k, it.uid)
		copy(l.keys[at+1:l.n+1], l.keys[at:l.n])
		copy(l.items[at+1:l.n+1], l.items[at:l.n])
		l.keys[at], l.items[at] = k, it
		l.n++
		it.key = k
		return
	}
	t.removeAt(it, pos)
	it.key = k
	t.insert(it)
}

// rank returns it's 1-based rank.
func (t *tree) rank(it *item) int {
	l := it.leaf
	r := t.index(it) + 1
	p := l.parent
	for j := range p.leafIndex(l) {
		r += p.count[j]
	}
	for c, g := p, p.parent; g != nil; c, g = g, g.parent {
		for j := range g.innerIndex(c) {
			r += g.count[j]
		}
	}
	return r
}

// cursor is a position in the rank order.
type cursor struct {
	l *leaf
	i int
}

func (c cursor) valid() bool { return c.l != nil && c.i < c.l.n }
func (c cursor) item() *item { return c.l.items[c.i] }
func (c cursor) entry(rank int) Entry {
	it := c.l.items[c.i]
	return Entry{UID: it.uid, Score: it.score, Rank: rank}
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
		for r > in.count[i] {
			r -= in.count[i]
			i++
		}
		if in.leafKids {
			return cursor{l: in.leaves[i], i: r - 1}
		}
		in = in.inners[i]
	}
}

// cursorOf returns it's cursor.
func (t *tree) cursorOf(it *item) cursor { return cursor{l: it.leaf, i: t.index(it)} }

// last returns the last-ranked item, nil when empty.
func (t *tree) last() *item {
	if t.length == 0 {
		return nil
	}
	in := t.root
	for !in.leafKids {
		in = in.inners[in.n-1]
	}
	l := in.leaves[in.n-1]
	return l.items[l.n-1]
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
		for j := range lo {
			r += in.count[j]
		}
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
