package rank

import (
	"math"
	"runtime"
	"unsafe"
)

// An order-statistic B+tree with its members: members in rank order in
// leaves of up to fan entries (key and member id inline, so a search and a
// run of neighbours read contiguous cache lines), inner nodes holding per
// child an upper-bound key and the number of members below it, and parent
// links with the node's index in its parent. A member's rank is its index
// in its leaf plus the counts of the children left of its path, summed on
// the way up (no key comparisons, no search for the child in its parent);
// the member at a rank is found by counts on the way down. Height is 4 at
// 1 000 000 members.
//
// Members, leaves and the uid index hold no pointers (region.go): a member
// is a 64-byte record with its score, its leaf and its uid inline, and
// leaves and members are named by uint32 ids. The inner nodes (about one
// per 2 000 members) are Go objects, and so are the uids over 48 bytes and,
// under TiesUID, the separators' uids: those the collector does mark. Not
// safe for concurrent use; memBoard guards it.

const (
	fan = 64 // entries per node, at most fan-1 at rest
	// A node below minFill entries merges with a sibling when both fit in
	// one node; an empty leaf always merges away.
	minFill = fan / 4
	noLeaf  = ^uint32(0)
	// A uid of up to inlineUID bytes lives in its member record (one cache
	// line with the score and the leaf); a longer one in tree.long.
	inlineUID = 48
)

// key is an entry's sort key: higher scores first, then the smaller seq
// (TiesReach) or the greater uid (TiesUID; the uid is the member's).
type key struct {
	score float64
	seq   uint64
}

// member is a member's record: it stays in place while the entry moves
// between leaves, and says which leaf holds the entry.
type member struct {
	score float64 // the entry's score, for reads that need no leaf
	leaf  uint32
	ulen  uint32 // the uid's length
	uid   [inlineUID]byte
}

type leaf struct {
	// The header and the first ids share a cache line: finding a member
	// (a scan of ids) starts there. Leaves are a whole number of lines
	// (the padding; chunks start on a page), so no leaf's header or
	// entries straddle a line more than they must.
	parent uint32 // inner node id
	pidx   int32  // index in parent
	n      int32
	prev   uint32 // noLeaf at the ends
	next   uint32
	ids    [fan]uint32
	keys   [fan]key
	_      [40]byte
}

// Leaves and member records are whole cache lines (a compile error if
// not).
var (
	_ = [1]struct{}{}[unsafe.Sizeof(leaf{})%64]
	_ = [1]struct{}{}[unsafe.Sizeof(member{})%64]
)

type inner struct {
	id       uint32 // in tree.inners
	parent   *inner
	pidx     int  // index in parent
	n        int  // children
	leafKids bool // children are leaves (else inner nodes)
	// count[i] is the number of members under child i. int32 halves the
	// cache lines a rank sums over; a board would need hundreds of GB of
	// memory to overflow it.
	count [fan]int32
	// sep[i] (i < n-1) is the last key child i may hold (sepUID[i] its
	// uid under TiesUID); every key of child i+1 ranks after it.
	sep    [fan]key
	sepUID [fan]string
	leaves [fan]uint32
	inners [fan]*inner
}

type tree struct {
	byUID   bool
	root    *inner // always an inner node; its single leaf when small
	length  int
	members slab[member]
	leaves  slab[leaf]
	index   index
	long    map[uint32]string // uids longer than inlineUID
	inners  []*inner          // by id (nil: free)
	free    []uint32          // free inner ids
	mem     *regions
}

func newTree(byUID bool) *tree {
	// First chunks of 8 members and 1 leaf, doubling from there: a game
	// keeps many small boards.
	t := &tree{byUID: byUID, members: newSlab[member](3), leaves: newSlab[leaf](0), mem: &regions{}}
	t.index = newIndex(t.mem)
	t.root = t.newInner(true)
	t.root.n = 1
	t.root.leaves[0] = t.newLeaf(t.root, 0)
	// A tree dropped without release still gives its mapped memory back.
	runtime.AddCleanup(t, (*regions).release, t.mem)
	return t
}

// release gives the tree's mapped memory back; t must not be used after
// (its arrays are dropped too, so a use is a nil dereference, not a read
// of unmapped memory).
func (t *tree) release() {
	t.members.chunks, t.leaves.chunks, t.index.slots = nil, nil, nil
	t.mem.release()
}

// grown reports whether the tree ever held more members than its first
// chunk: an empty tree that did still has the memory of its peak.
func (t *tree) grown() bool { return t.members.next > 1<<t.members.shift }

func (t *tree) member(id uint32) *member { return t.members.at(id) }
func (t *tree) leaf(id uint32) *leaf     { return t.leaves.at(id) }

func (t *tree) newLeaf(parent *inner, pidx int) uint32 {
	id := t.leaves.alloc(t.mem)
	*t.leaf(id) = leaf{parent: parent.id, pidx: int32(pidx), prev: noLeaf, next: noLeaf}
	return id
}

func (t *tree) newInner(leafKids bool) *inner {
	in := &inner{leafKids: leafKids}
	if n := len(t.free); n > 0 {
		in.id = t.free[n-1]
		t.free = t.free[:n-1]
		t.inners[in.id] = in
	} else {
		in.id = uint32(len(t.inners))
		t.inners = append(t.inners, in)
	}
	return in
}

func (t *tree) dropInner(in *inner) {
	t.inners[in.id] = nil
	t.free = append(t.free, in.id)
}

// uidView returns id's uid without copying it: valid until the member is
// removed, and never to be kept.
func (t *tree) uidView(id uint32) string {
	m := t.member(id)
	if m.ulen > inlineUID {
		return t.long[id]
	}
	return unsafe.String(&m.uid[0], m.ulen)
}

// uidOf returns a copy of id's uid.
func (t *tree) uidOf(id uint32) string {
	m := t.member(id)
	if m.ulen > inlineUID {
		return t.long[id]
	}
	return string(m.uid[:m.ulen])
}

// find returns the id of uid's member.
func (t *tree) find(uid string) (uint32, bool) { return t.findPlace(uid, nil, key{}) }

// findPlace returns the id of uid's member and, when p is not nil, the
// place of key k (locate). Its loads go out in the order that lets their
// cache misses overlap: the descent (inner nodes, mostly cached), then the
// index slot right before the leaf search. A core runs ahead of a miss
// only a few hundred instructions, so loads that do not depend on each
// other overlap only when they are that close in the code.
func (t *tree) findPlace(uid string, p *place, k key) (uint32, bool) {
	h := t.index.hash(uid)
	slots := t.index.slots
	mask := uint32(len(slots) - 1)
	i := h & mask
	var l *leaf
	var n int
	if p != nil {
		l, n = t.descend(k, uid, p)
	}
	s := slots[i]
	if p != nil {
		p.pos = t.search(l, n, k, uid)
	}
	for ; s != 0; i = (i + 1) & mask {
		if id := uint32(s) - 1; uint32(s>>32) == h && t.uidView(id) == uid {
			return id, true
		}
		s = slots[(i+1)&mask]
	}
	return 0, false
}

// add makes uid a member with key k and returns its id (uid is not one).
func (t *tree) add(uid string, k key) uint32 {
	var p place
	t.locate(k, uid, &p)
	return t.addAt(uid, k, &p)
}

// addAt makes uid a member with key k at its place p (uid is not one).
func (t *tree) addAt(uid string, k key, p *place) uint32 {
	id := t.members.alloc(t.mem)
	m := t.member(id)
	m.ulen = uint32(len(uid))
	if len(uid) > inlineUID {
		if t.long == nil {
			t.long = make(map[uint32]string)
		}
		t.long[id] = uid
	} else {
		copy(m.uid[:], uid)
	}
	t.index.add(t.mem, t.index.hash(uid), id)
	t.insertAt(p, id, k)
	return id
}

// delete takes member id out of the tree and the index.
func (t *tree) delete(id uint32) {
	m := t.member(id)
	l := t.leaf(m.leaf)
	t.removeAt(m.leaf, l, l.index(id))
	t.index.remove(t.index.hash(t.uidView(id)), id)
	if m.ulen > inlineUID {
		delete(t.long, id)
	}
	t.members.release(id)
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

// entryBefore reports whether l's entry i ranks before k (of uid); it
// reads the entry's uid only on a tie under TiesUID.
func (t *tree) entryBefore(l *leaf, i int, k key, uid string) bool {
	a := l.keys[i]
	if a.score != k.score || !t.byUID {
		return t.before(a, "", k, uid)
	}
	return t.uidView(l.ids[i]) > uid
}

// sepUID is the separator uid for l's entry i: "" under TiesReach, where
// separators compare by seq.
func (t *tree) sepUID(l *leaf, i int) string {
	if !t.byUID {
		return ""
	}
	return t.uidOf(l.ids[i])
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

// search returns the number of l's n entries ranking before k. A binary
// search: its first probes read the same few lines of a node every time,
// which stay cached; a first pass over every eighth key (loads that do not
// wait for each other) read more lines and was slower.
func (t *tree) search(l *leaf, n int, k key, uid string) int {
	lo, hi := 0, n
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

// index returns id's index in l: a scan of the ids reads them in order
// from the header's cache line on (the prefetcher follows), fewer lines
// than a binary search on the keys would jump between.
func (l *leaf) index(id uint32) int {
	for i, x := range l.ids[:l.n] {
		if x == id {
			return i
		}
	}
	panic("rank: member not in its leaf")
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
func (t *tree) adopt(in *inner, from, to int) {
	if in.leafKids {
		for i := from; i < to; i++ {
			c := t.leaf(in.leaves[i])
			c.parent, c.pidx = in.id, int32(i)
		}
		return
	}
	for i := from; i < to; i++ {
		c := in.inners[i]
		c.parent, c.pidx = in, i
	}
}

// adoptMembers makes leaf lid (l) the leaf of its entries [from, to).
func (t *tree) adoptMembers(lid uint32, l *leaf, from, to int) {
	for _, id := range l.ids[from:to] {
		t.member(id).leaf = lid
	}
}

// place is where a key belongs: the inner nodes from the root down with
// the child taken in each, the leaf, and the number of its entries that
// rank before the key. It stays right until the tree's shape changes (a
// split, merge or borrow) or the leaf changes.
type place struct {
	depth int
	in    [maxDepth]*inner
	at    [maxDepth]int
	leaf  uint32
	pos   int
}

// maxDepth bounds the inner levels: a non-root inner node has at least
// minFill children and a leaf at least minFill entries, so 8 levels would
// hold more than 2^32 members.
const maxDepth = 8

// locate finds k's place (of uid) without changing the tree.
func (t *tree) locate(k key, uid string, p *place) {
	l, n := t.descend(k, uid, p)
	p.pos = t.search(l, n, k, uid)
}

// descend fills p down to the leaf where k (of uid) belongs and returns
// the leaf and its number of entries, all without reading the leaf: inner
// nodes only, about one per 2 000 members, which stay cached. The count
// comes from the parent, so the leaf search that follows need not wait
// for the leaf header's cache miss before its loads go out.
func (t *tree) descend(k key, uid string, p *place) (*leaf, int) {
	in, d := t.root, 0
	for {
		i := t.childFor(in, k, uid)
		p.in[d], p.at[d] = in, i
		d++
		if in.leafKids {
			p.depth, p.leaf = d, in.leaves[i]
			return t.leaf(p.leaf), int(in.count[i])
		}
		in = in.inners[i]
	}
}

// insert adds member id with key k and uid.
func (t *tree) insert(id uint32, k key, uid string) {
	var p place
	t.locate(k, uid, &p)
	t.insertAt(&p, id, k)
}

// insertAt adds member id with key k at its place p.
func (t *tree) insertAt(p *place, id uint32, k key) {
	for d := range p.depth {
		p.in[d].count[p.at[d]]++
	}
	lid, pos := p.leaf, p.pos
	l := t.leaf(lid)
	n := int(l.n)
	copy(l.keys[pos+1:n+1], l.keys[pos:n])
	copy(l.ids[pos+1:n+1], l.ids[pos:n])
	l.keys[pos], l.ids[pos] = k, id
	l.n++
	m := t.member(id)
	m.leaf, m.score = lid, k.score
	t.length++
	if l.n == fan {
		t.splitLeaf(lid, l)
	}
}

// splitLeaf moves the upper half of a full leaf to a new right sibling.
func (t *tree) splitLeaf(lid uint32, l *leaf) {
	const half = fan / 2
	p, i := t.inners[l.parent], int(l.pidx)
	rid := t.newLeaf(p, i+1)
	r := t.leaf(rid)
	r.n, r.prev, r.next = l.n-half, lid, l.next
	copy(r.keys[:], l.keys[half:l.n])
	copy(r.ids[:], l.ids[half:l.n])
	l.n = half
	t.adoptMembers(rid, r, 0, int(r.n))
	if l.next != noLeaf {
		t.leaf(l.next).prev = rid
	}
	l.next = rid
	p.insertChild(i, l.keys[half-1], t.sepUID(l, half-1), half, int(r.n))
	p.leaves[i+1] = rid
	t.adopt(p, i+1, p.n)
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
	p.leaves[i+1], p.inners[i+1] = 0, nil
	p.n++
}

// splitInner moves the upper half of a full inner node to a new right
// sibling (under a new root when p is the root).
func (t *tree) splitInner(p *inner) {
	const half = fan / 2
	q := t.newInner(p.leafKids)
	q.n = p.n - half
	copy(q.sep[:], p.sep[half:p.n-1])
	copy(q.sepUID[:], p.sepUID[half:p.n-1])
	copy(q.count[:], p.count[half:p.n])
	copy(q.leaves[:], p.leaves[half:p.n])
	copy(q.inners[:], p.inners[half:p.n])
	t.adopt(q, 0, q.n)
	sep, uid := p.sep[half-1], p.sepUID[half-1]
	clear(p.sep[half-1 : p.n-1])
	clear(p.sepUID[half-1 : p.n-1])
	clear(p.count[half:p.n])
	clear(p.leaves[half:p.n])
	clear(p.inners[half:p.n])
	p.n = half
	g := p.parent
	if g == nil {
		g = t.newInner(false)
		g.n = 1
		g.inners[0] = p
		t.adopt(g, 0, 1)
		t.root = g
	}
	i := p.pidx
	g.insertChild(i, sep, uid, p.total(), q.total())
	g.inners[i+1] = q
	t.adopt(g, i+1, g.n)
	if g.n == fan {
		t.splitInner(g)
	}
}

// removeAt takes leaf lid's (l's) entry pos out of the tree; the member
// keeps its record. It reports whether the tree changed shape (a leaf
// merged or borrowed), which moves places found before.
func (t *tree) removeAt(lid uint32, l *leaf, pos int) (reshaped bool) {
	n := int(l.n)
	copy(l.keys[pos:], l.keys[pos+1:n])
	copy(l.ids[pos:], l.ids[pos+1:n])
	l.n--
	t.length--
	p, i := t.inners[l.parent], int(l.pidx)
	p.count[i]--
	for c, g := p, p.parent; g != nil; c, g = g, g.parent {
		g.count[c.pidx]--
	}
	if l.n < minFill && p.n > 1 {
		if i == p.n-1 {
			i--
		}
		t.balanceLeaves(p, i)
		return true
	}
	return false
}

// balanceLeaves merges p's children j and j+1 when they fit in one leaf,
// else evens out their entries (each then holds at least fan/2).
func (t *tree) balanceLeaves(p *inner, j int) {
	lid, rid := p.leaves[j], p.leaves[j+1]
	l, r := t.leaf(lid), t.leaf(rid)
	ln, rn := int(l.n), int(r.n)
	if ln+rn < fan {
		copy(l.keys[ln:], r.keys[:rn])
		copy(l.ids[ln:], r.ids[:rn])
		l.n += r.n
		t.adoptMembers(lid, l, ln, ln+rn)
		l.next = r.next
		if r.next != noLeaf {
			t.leaf(r.next).prev = lid
		}
		t.leaves.release(rid)
		t.dropChild(p, j)
		t.balanceInner(p)
		return
	}
	if want := (ln + rn) / 2; ln < want { // r's first entries to l
		k := want - ln
		copy(l.keys[ln:], r.keys[:k])
		copy(l.ids[ln:], r.ids[:k])
		t.adoptMembers(lid, l, ln, ln+k)
		copy(r.keys[:], r.keys[k:rn])
		copy(r.ids[:], r.ids[k:rn])
		ln, rn = ln+k, rn-k
	} else { // l's last entries to r
		k := ln - want
		copy(r.keys[k:], r.keys[:rn])
		copy(r.ids[k:], r.ids[:rn])
		copy(r.keys[:k], l.keys[ln-k:ln])
		copy(r.ids[:k], l.ids[ln-k:ln])
		t.adoptMembers(rid, r, 0, k)
		ln, rn = ln-k, rn+k
	}
	l.n, r.n = int32(ln), int32(rn)
	p.count[j], p.count[j+1] = int32(ln), int32(rn)
	p.sep[j], p.sepUID[j] = l.keys[ln-1], t.sepUID(l, ln-1)
}

// dropChild removes p's child j+1 after its entries joined child j, which
// takes over its bound and count (the bound between them goes).
func (t *tree) dropChild(p *inner, j int) {
	p.count[j] += p.count[j+1]
	copy(p.sep[j:], p.sep[j+1:p.n-1])
	copy(p.sepUID[j:], p.sepUID[j+1:p.n-1])
	p.sep[p.n-2], p.sepUID[p.n-2] = key{}, ""
	copy(p.count[j+1:], p.count[j+2:p.n])
	copy(p.leaves[j+1:], p.leaves[j+2:p.n])
	copy(p.inners[j+1:], p.inners[j+2:p.n])
	p.n--
	p.leaves[p.n], p.inners[p.n], p.count[p.n] = 0, nil, 0
	t.adopt(p, j+1, p.n)
}

// balanceInner restores p after it lost a child: a non-root node below
// minFill merges with or borrows from a sibling; a root with a single
// inner child gives way to it.
func (t *tree) balanceInner(p *inner) {
	g := p.parent
	if g == nil {
		for !t.root.leafKids && t.root.n == 1 {
			old := t.root
			t.root = old.inners[0]
			t.root.parent = nil
			t.dropInner(old)
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
		t.adopt(l, l.n-r.n, l.n)
		t.dropInner(r)
		t.dropChild(g, j)
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
		t.adopt(l, l.n-k, l.n)
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
		t.adopt(r, 0, r.n)
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
		t.adopt(r, 0, r.n)
		clear(l.sep[l.n-k-1 : l.n-1])
		clear(l.sepUID[l.n-k-1 : l.n-1])
		clear(l.count[l.n-k : l.n])
		clear(l.leaves[l.n-k : l.n])
		clear(l.inners[l.n-k : l.n])
		l.n -= k
	}
	g.count[j], g.count[j+1] = int32(l.total()), int32(r.total())
}

// move gives member id a new key.
func (t *tree) move(id uint32, k key) {
	var p place
	t.locate(k, t.uidIfByUID(id), &p)
	t.moveTo(id, k, &p)
}

// uidIfByUID returns id's uid (a view) under TiesUID, where keys compare
// by it, and "" under TiesReach, where they do not.
func (t *tree) uidIfByUID(id uint32) string {
	if !t.byUID {
		return ""
	}
	return t.uidView(id)
}

// moveTo gives member id key k at its place p, located with the member
// still in its old place: within its leaf when p is in that leaf (no
// count changes; only the entries between the old and the new place
// shift), else by a remove and an insert at p (or a new search when the
// removal reshaped the tree).
func (t *tree) moveTo(id uint32, k key, p *place) {
	m := t.member(id)
	lid := m.leaf
	l := t.leaf(lid)
	pos := l.index(id)
	if p.leaf == lid {
		// p.pos counts the entries before k, the old one among them when
		// it ranks before k too.
		at := p.pos
		if at > pos {
			at--
			copy(l.keys[pos:at], l.keys[pos+1:at+1])
			copy(l.ids[pos:at], l.ids[pos+1:at+1])
		} else {
			copy(l.keys[at+1:pos+1], l.keys[at:pos])
			copy(l.ids[at+1:pos+1], l.ids[at:pos])
		}
		l.keys[at], l.ids[at] = k, id
		m.score = k.score
		return
	}
	if t.removeAt(lid, l, pos) {
		t.insert(id, k, t.uidIfByUID(id))
		return
	}
	t.insertAt(p, id, k)
}

// exchange gives members a and b each other's entries (place and key).
func (t *tree) exchange(a, b uint32) {
	ma, mb := t.member(a), t.member(b)
	la, lb := t.leaf(ma.leaf), t.leaf(mb.leaf)
	ia, ib := la.index(a), lb.index(b)
	la.ids[ia], lb.ids[ib] = b, a
	ma.leaf, mb.leaf = mb.leaf, ma.leaf
	ma.score, mb.score = mb.score, ma.score
}

// keyOf returns member id's key.
func (t *tree) keyOf(id uint32) key {
	l := t.leaf(t.member(id).leaf)
	return l.keys[l.index(id)]
}

// rank returns member id's 1-based rank.
func (t *tree) rank(id uint32) int {
	l := t.leaf(t.member(id).leaf)
	return t.rankAt(l, l.index(id))
}

// rankAt returns the 1-based rank of l's entry i.
func (t *tree) rankAt(l *leaf, i int) int {
	r := i + 1
	p, j := t.inners[l.parent], int(l.pidx)
	for {
		r += p.below(j)
		if p.parent == nil {
			return r
		}
		p, j = p.parent, p.pidx
	}
}

// run returns up to n entries from c (at rank r) on, ending before the
// first with a score below min (-Inf: none). It walks the leaves for the
// member ids first (each entry's Rank holds its id meanwhile; ranks run
// on from r), then reads every member record, whose cache misses overlap,
// and copies the uids into one array for all of them. The scores come from
// the records too, so a run that needs no bound reads no leaf keys.
func (t *tree) run(c cursor, r, n int, min float64, capHint int) []Entry {
	out := make([]Entry, 0, capHint)
	bounded := !math.IsInf(min, -1)
	for ; len(out) < n && c.valid() && (!bounded || c.score() >= min); c = c.next() {
		out = append(out, Entry{Rank: int(c.id())})
	}
	size := 0
	for _, e := range out {
		if m := t.member(uint32(e.Rank)); m.ulen <= inlineUID {
			size += int(m.ulen)
		}
	}
	buf := make([]byte, 0, size)
	for i := range out {
		e := &out[i]
		id := uint32(e.Rank)
		m := t.member(id)
		e.Rank, e.Score = r+i, m.score
		if m.ulen > inlineUID {
			e.UID = t.long[id]
			continue
		}
		// buf never grows past size, so earlier uids stay where they are.
		at := len(buf)
		buf = append(buf, m.uid[:m.ulen]...)
		e.UID = unsafe.String(&buf[at], m.ulen)
	}
	return out
}

// cursor is a position in the rank order.
type cursor struct {
	t *tree
	l *leaf // nil past either end
	i int
}

func (c cursor) valid() bool    { return c.l != nil && c.i < int(c.l.n) }
func (c cursor) id() uint32     { return c.l.ids[c.i] }
func (c cursor) score() float64 { return c.l.keys[c.i].score }

func (c cursor) next() cursor {
	if c.i++; c.i >= int(c.l.n) {
		return c.t.leafCursor(c.l.next, 0)
	}
	return c
}

func (c cursor) prev() cursor {
	if c.i--; c.i < 0 {
		if c.l.prev == noLeaf {
			return cursor{t: c.t}
		}
		l := c.t.leaf(c.l.prev)
		return cursor{c.t, l, int(l.n) - 1}
	}
	return c
}

// leafCursor returns the cursor at leaf id's entry i (invalid for noLeaf).
func (t *tree) leafCursor(id uint32, i int) cursor {
	if id == noLeaf {
		return cursor{t: t}
	}
	return cursor{t, t.leaf(id), i}
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
			return t.leafCursor(in.leaves[i], r-1)
		}
		in = in.inners[i]
	}
}

// cursorOf returns member id's cursor.
func (t *tree) cursorOf(id uint32) cursor {
	l := t.leaf(t.member(id).leaf)
	return cursor{t, l, l.index(id)}
}

// last returns the cursor at the last-ranked entry (invalid when empty).
func (t *tree) last() cursor {
	if t.length == 0 {
		return cursor{t: t}
	}
	in := t.root
	for !in.leafKids {
		in = in.inners[in.n-1]
	}
	l := t.leaf(in.leaves[in.n-1])
	return cursor{t, l, int(l.n) - 1}
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
			l := t.leaf(in.leaves[lo])
			i := 0
			for i < int(l.n) && l.keys[i].score > max {
				i++
			}
			r += i
			if i == int(l.n) {
				return t.leafCursor(l.next, 0), r
			}
			return cursor{t, l, i}, r
		}
		in = in.inners[lo]
	}
}
