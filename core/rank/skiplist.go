package rank

// An order-statistic skip list (Redis's zskiplist design): nodes in rank
// order, every link carrying its span (how many nodes it jumps), so the
// rank of a node and the node at a rank are found in O(log n) expected
// steps. Not safe for concurrent use; memBoard guards it.

const (
	maxLevel = 32
	// A node has level k+1 with probability (1/4)^k, as in Redis.
	levelBits = 2
)

type node struct {
	uid   string
	score float64
	seq   uint64 // reach order (TiesReach)
	prev  *node  // the node ranked just before; nil for the first
	level []link
}

type link struct {
	next *node
	span int // nodes from this one to next (to the end when next is nil)
}

type skiplist struct {
	head   *node
	tail   *node
	length int
	level  int
	byUID  bool // TiesUID: equal scores by uid, descending
	rnd    uint64
}

func newSkiplist(byUID bool) *skiplist {
	return &skiplist{
		head:  &node{level: make([]link, maxLevel)},
		level: 1,
		byUID: byUID,
		rnd:   0x9e3779b97f4a7c15,
	}
}

// before reports whether a ranks before b. Keys are unique: under
// TiesReach every node has its own seq, under TiesUID its own uid.
func (s *skiplist) before(a, b *node) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if s.byUID {
		return a.uid > b.uid
	}
	return a.seq < b.seq
}

func (s *skiplist) randomLevel() int {
	// xorshift64
	x := s.rnd
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	s.rnd = x
	lvl := 1
	for lvl < maxLevel && x&(1<<levelBits-1) == 0 {
		lvl++
		x >>= levelBits
	}
	return lvl
}

// newNode returns an unlinked node with a random level.
func (s *skiplist) newNode(uid string, score float64, seq uint64) *node {
	return &node{uid: uid, score: score, seq: seq, level: make([]link, s.randomLevel())}
}

// insert links n (unlinked, with its level set) at its place.
func (s *skiplist) insert(n *node) {
	var update [maxLevel]*node
	var rank [maxLevel]int
	x := s.head
	for i := s.level - 1; i >= 0; i-- {
		if i < s.level-1 {
			rank[i] = rank[i+1]
		}
		for x.level[i].next != nil && s.before(x.level[i].next, n) {
			rank[i] += x.level[i].span
			x = x.level[i].next
		}
		update[i] = x
	}
	lvl := len(n.level)
	if lvl > s.level {
		for i := s.level; i < lvl; i++ {
			rank[i] = 0
			update[i] = s.head
			s.head.level[i].span = s.length
		}
		s.level = lvl
	}
	for i := 0; i < lvl; i++ {
		n.level[i].next = update[i].level[i].next
		update[i].level[i].next = n
		n.level[i].span = update[i].level[i].span - (rank[0] - rank[i])
		update[i].level[i].span = rank[0] - rank[i] + 1
	}
	for i := lvl; i < s.level; i++ {
		update[i].level[i].span++
	}
	if update[0] != s.head {
		n.prev = update[0]
	} else {
		n.prev = nil
	}
	if n.level[0].next != nil {
		n.level[0].next.prev = n
	} else {
		s.tail = n
	}
	s.length++
}

// remove unlinks n, which must be in the list.
func (s *skiplist) remove(n *node) {
	var update [maxLevel]*node
	x := s.head
	for i := s.level - 1; i >= 0; i-- {
		for x.level[i].next != nil && s.before(x.level[i].next, n) {
			x = x.level[i].next
		}
		update[i] = x
	}
	for i := 0; i < s.level; i++ {
		if update[i].level[i].next == n {
			update[i].level[i].span += n.level[i].span - 1
			update[i].level[i].next = n.level[i].next
		} else {
			update[i].level[i].span--
		}
	}
	if next := n.level[0].next; next != nil {
		next.prev = n.prev
	} else {
		s.tail = n.prev
	}
	for s.level > 1 && s.head.level[s.level-1].next == nil {
		s.level--
	}
	s.length--
	for i := range n.level {
		n.level[i] = link{}
	}
	n.prev = nil
}

// move gives n (in the list) a new key, in place when it keeps its rank.
func (s *skiplist) move(n *node, score float64, seq uint64) {
	k := node{uid: n.uid, score: score, seq: seq}
	next := n.level[0].next
	if (n.prev == nil || s.before(n.prev, &k)) && (next == nil || s.before(&k, next)) {
		n.score, n.seq = score, seq
		return
	}
	s.remove(n)
	n.score, n.seq = score, seq
	s.insert(n)
}

// exchangeScores gives a b's score and b a's (TiesUID: the uid stays part
// of the key, so both are re-placed).
func (s *skiplist) exchangeScores(a, b *node) {
	s.remove(a)
	s.remove(b)
	a.score, b.score = b.score, a.score
	s.insert(a)
	s.insert(b)
}

// rank returns n's 1-based rank; n must be in the list.
func (s *skiplist) rank(n *node) int {
	r := 0
	x := s.head
	for i := s.level - 1; i >= 0; i-- {
		for x.level[i].next != nil && (x.level[i].next == n || s.before(x.level[i].next, n)) {
			r += x.level[i].span
			x = x.level[i].next
		}
		if x == n {
			return r
		}
	}
	return 0
}

// at returns the node ranked r (1-based), nil when out of range.
func (s *skiplist) at(r int) *node {
	if r < 1 || r > s.length {
		return nil
	}
	seen := 0
	x := s.head
	for i := s.level - 1; i >= 0; i-- {
		for x.level[i].next != nil && seen+x.level[i].span <= r {
			seen += x.level[i].span
			x = x.level[i].next
		}
		if seen == r {
			return x
		}
	}
	return nil
}

// firstAtMost returns the best-ranked node with score <= max and its
// rank, or nil.
func (s *skiplist) firstAtMost(max float64) (*node, int) {
	r := 0
	x := s.head
	for i := s.level - 1; i >= 0; i-- {
		for x.level[i].next != nil && x.level[i].next.score > max {
			r += x.level[i].span
			x = x.level[i].next
		}
	}
	return x.level[0].next, r + 1
}

// collect appends the entries from n (ranked r) onwards while keep says so
// and fewer than limit are collected.
func collect(out []Entry, n *node, r, limit int, keep func(*node) bool) []Entry {
	for ; n != nil && limit > 0 && (keep == nil || keep(n)); n, r, limit = n.level[0].next, r+1, limit-1 {
		out = append(out, Entry{UID: n.uid, Score: n.score, Rank: r})
	}
	return out
}
