package rank

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// naive is a leaderboard as a sorted slice: the semantics of the package
// doc, written the obvious way, to check the tree against.
type naive struct {
	byUID   bool
	max     int
	seq     uint64
	members []naiveMember // best first
}

type naiveMember struct {
	uid   string
	score float64
	seq   uint64
}

func (m *naive) before(a, b naiveMember) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if m.byUID {
		return a.uid > b.uid
	}
	return a.seq < b.seq
}

func (m *naive) sort() {
	slices.SortFunc(m.members, func(a, b naiveMember) int {
		if m.before(a, b) {
			return -1
		}
		return 1
	})
}

func (m *naive) find(uid string) int {
	return slices.IndexFunc(m.members, func(x naiveMember) bool { return x.uid == uid })
}

func (m *naive) set(uid string, score float64, mode Mode) {
	if i := m.find(uid); i >= 0 {
		old := m.members[i].score
		if score == old || mode == ModeMax && score < old || mode == ModeMin && score > old {
			return
		}
		m.seq++
		x := m.members[i]
		x.score, x.seq = score, m.seq
		m.members = slices.Delete(m.members, i, i+1)
		m.insert(x)
		return
	}
	k := naiveMember{uid, score, m.seq + 1}
	if m.max > 0 && len(m.members) >= m.max && !m.before(k, m.members[len(m.members)-1]) {
		return
	}
	m.seq++
	m.insert(k)
	if m.max > 0 && len(m.members) > m.max {
		m.members = m.members[:m.max]
	}
}

// insert puts x at its place in the sorted members.
func (m *naive) insert(x naiveMember) {
	i, _ := slices.BinarySearchFunc(m.members, x, func(a, b naiveMember) int {
		if m.before(a, b) {
			return -1
		}
		return 1
	})
	m.members = slices.Insert(m.members, i, x)
}

func (m *naive) swap(a, b string) {
	i, j := m.find(a), m.find(b)
	if i < 0 || j < 0 {
		return
	}
	if m.byUID {
		m.members[i].score, m.members[j].score = m.members[j].score, m.members[i].score
		m.sort()
		return
	}
	m.members[i].uid, m.members[j].uid = b, a
}

func (m *naive) entries() []Entry {
	out := []Entry{}
	for i, x := range m.members {
		out = append(out, Entry{x.uid, x.score, i + 1})
	}
	return out
}

// checkAgainstNaive runs the operations encoded in ops on a memory board
// and on the naive model, comparing every query after every operation.
func checkAgainstNaive(t *testing.T, ops []byte) {
	if len(ops) < 2 {
		return
	}
	o := Options{MaxMembers: int(ops[0] % 12), Ties: Ties(ops[1] % 2)}
	bd := board(t, NewMemory(nil), "f", o)
	m := &naive{byUID: o.Ties == TiesUID, max: o.MaxMembers}
	space := byte(16) // small boards, or ones that split leaves
	if ops[1]&2 != 0 {
		space = 250
	}
	uid := func(b byte) string { return string(rune('a' + b%space)) }
	score := func(b byte) float64 { return float64(int(b%8) - 2) }
	for ops = ops[2:]; len(ops) >= 3; ops = ops[3:] {
		a, x := ops[1], ops[2]
		switch ops[0] % 8 {
		case 0, 1, 2:
			mode := Mode(x>>4) % 3
			do(t, bd.Update(uid(a), score(x), mode))
			m.set(uid(a), score(x), mode)
		case 3:
			s := do(t, bd.Score(uid(a)))
			do(t, bd.Incr(uid(a), score(x)))
			m.set(uid(a), s.Score+score(x), ModeSet)
		case 4:
			_, _ = bd.Swap(uid(a), uid(x), nil).Do(t.Context())
			if uid(a) != uid(x) {
				m.swap(uid(a), uid(x))
			}
		case 5:
			do(t, bd.Remove(uid(a)))
			if i := m.find(uid(a)); i >= 0 {
				m.members = slices.Delete(m.members, i, i+1)
			}
		case 6:
			scores := map[string]float64{uid(a): score(x), uid(a + 1): score(x), uid(x): score(a)}
			do(t, bd.MUpdate(scores))
			keys := []string{uid(a), uid(a + 1), uid(x)}
			slices.Sort(keys)
			for _, k := range slices.Compact(keys) {
				m.set(k, scores[k], ModeSet)
			}
		case 7:
			if x%8 == 0 {
				do(t, bd.Clear())
				m.members = nil
			}
		}
		checkTree(t, bd.(*memHandle).b.list)
		want := m.entries()
		wantEntries(t, "Top", do(t, bd.Top(100)), want...)
		for i, w := range want {
			if p := do(t, bd.Position(w.UID)); p != i+1 {
				t.Fatalf("Position(%s) = %d; want %d", w.UID, p, i+1)
			}
			ar := do(t, bd.Around(w.UID, 2))
			wantEntries(t, "Around.Above", ar.Above, want[max(0, i-2):i]...)
			wantEntries(t, "Around.Below", ar.Below, want[i+1:min(len(want), i+3)]...)
		}
		lo, hi := score(a), score(a)+float64(x%4)
		var inRange []Entry
		for _, w := range want {
			if w.Score >= lo && w.Score <= hi && len(inRange) < o.rangeLimit() {
				inRange = append(inRange, w)
			}
		}
		wantEntries(t, "RangeByScore", do(t, bd.RangeByScore(lo, hi)), inRange...)
		if len(want) > 0 {
			r := 1 + int(a)%len(want)
			wantEntries(t, "Range", do(t, bd.Range(r, r+int(x%5))), want[r-1:min(len(want), r+int(x%5))]...)
		}
	}
}

func FuzzMemoryAgainstNaive(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 0, 2, 2, 4, 1, 2})
	f.Add([]byte{3, 1, 0, 1, 2, 0, 2, 2, 0, 3, 2, 4, 1, 3, 6, 4, 5})
	f.Fuzz(checkAgainstNaive)
}

// Random operation sequences, both tie policies, with and without a cap.
func TestMemoryAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		ops := make([]byte, 2+3*rng.IntN(120))
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		checkAgainstNaive(t, ops)
	}
}

// bound is a separator of the tree: a key and its uid.
type bound struct {
	k   key
	uid string
}

// checkTree verifies every invariant of the B+tree: counts, separator
// bounds, parent links and indexes, member records, the leaf chain, fill
// levels, the index's size.
func checkTree(t *testing.T, tr *tree) {
	t.Helper()
	var leaves []uint32
	var walk func(in *inner, depth int, lo, hi *bound) int
	depth := -1
	walk = func(in *inner, d int, lo, hi *bound) int {
		if in.n < 1 || in.n >= fan || (in != tr.root && in.n < minFill) {
			t.Fatalf("inner node with %d children (root %v)", in.n, in == tr.root)
		}
		if tr.inners[in.id] != in {
			t.Fatal("inner node id")
		}
		total := 0
		for i := range in.n {
			clo, chi := lo, hi
			if i > 0 {
				clo = &bound{in.sep[i-1], in.sepUID[i-1]}
			}
			if i < in.n-1 {
				chi = &bound{in.sep[i], in.sepUID[i]}
			}
			var n int
			if in.leafKids {
				lid := in.leaves[i]
				l := tr.leaf(lid)
				if tr.inners[l.parent] != in || int(l.pidx) != i || in.inners[i] != nil {
					t.Fatal("leaf parent link or index")
				}
				if depth < 0 {
					depth = d
				} else if depth != d {
					t.Fatal("leaves at different depths")
				}
				if l.n >= fan || (tr.length > 0 && l.n == 0) || (!(in == tr.root && in.n == 1) && l.n < minFill) {
					t.Fatalf("leaf with %d entries", l.n)
				}
				for j := range int(l.n) {
					id, k := l.ids[j], l.keys[j]
					uid := tr.uidOf(id)
					if m := tr.member(id); m.leaf != lid || m.score != k.score {
						t.Fatal("member leaf link or score copy")
					}
					if got, ok := tr.find(uid); !ok || got != id {
						t.Fatalf("index: %q is %d (%v); want %d", uid, got, ok, id)
					}
					if clo != nil && !tr.before(clo.k, clo.uid, k, uid) {
						t.Fatalf("entry %v does not rank after its lower bound %v", k, *clo)
					}
					if chi != nil && tr.before(chi.k, chi.uid, k, uid) {
						t.Fatalf("entry %v ranks after its upper bound %v", k, *chi)
					}
					if j > 0 && !tr.before(l.keys[j-1], tr.uidOf(l.ids[j-1]), k, uid) {
						t.Fatal("leaf out of order")
					}
				}
				leaves = append(leaves, lid)
				n = int(l.n)
			} else {
				c := in.inners[i]
				if c.parent != in || c.pidx != i || in.leaves[i] != 0 {
					t.Fatal("inner parent pointer or index")
				}
				n = walk(c, d+1, clo, chi)
			}
			if int(in.count[i]) != n {
				t.Fatalf("count %d; the child holds %d", in.count[i], n)
			}
			total += n
		}
		return total
	}
	if tr.root.parent != nil {
		t.Fatal("root has a parent")
	}
	if n := walk(tr.root, 0, nil, nil); n != tr.length || tr.index.n != n {
		t.Fatalf("tree holds %d; length %d, index %d", n, tr.length, tr.index.n)
	}
	slots := 0
	for _, s := range tr.index.slots {
		if s != 0 {
			slots++
		}
	}
	if slots != tr.length {
		t.Fatalf("index slots %d length %d", slots, tr.length)
	}
	if int(tr.members.next)-len(tr.members.free) != tr.length {
		t.Fatalf("members next %d free %d length %d", tr.members.next, len(tr.members.free), tr.length)
	}
	seen := map[uint32]bool{}
	for _, id := range tr.members.free {
		if seen[id] {
			t.Fatalf("member %d freed twice", id)
		}
		seen[id] = true
	}
	long := 0
	for id := range tr.members.next {
		if !seen[id] && tr.member(id).ulen > inlineUID {
			long++
		}
	}
	if long != len(tr.long) {
		t.Fatalf("long map %d, long members %d", len(tr.long), long)
	}
	for i, lid := range leaves {
		l := tr.leaf(lid)
		if (i > 0 && l.prev != leaves[i-1]) || (i == 0 && l.prev != noLeaf) ||
			(i < len(leaves)-1 && l.next != leaves[i+1]) || (i == len(leaves)-1 && l.next != noLeaf) {
			t.Fatal("leaf chain")
		}
	}
}

// entry is an entry of the tree in the model of TestTreeInvariants.
type entry struct {
	id  uint32
	k   key
	uid string
}

// checkModel compares the tree with ms sorted: rank, at and the cursor
// walks both ways (the neighbours Around reads) give the model's order.
func checkModel(t *testing.T, tr *tree, ms []*entry) {
	t.Helper()
	sorted := slices.Clone(ms)
	slices.SortFunc(sorted, func(a, b *entry) int {
		if tr.before(a.k, a.uid, b.k, b.uid) {
			return -1
		}
		return 1
	})
	if tr.length != len(sorted) {
		t.Fatalf("length %d; want %d", tr.length, len(sorted))
	}
	want := func(c cursor, r int) {
		t.Helper()
		m := sorted[r-1]
		if !c.valid() || c.id() != m.id || c.t.run(c, r, 1, math.Inf(-1), 1)[0] != (Entry{m.uid, m.k.score, r}) || c.l.keys[c.i] != m.k {
			t.Fatalf("rank %d: not %v", r, *m)
		}
	}
	for r, m := range sorted {
		if got := tr.rank(m.id); got != r+1 {
			t.Fatalf("rank() %d; want %d", got, r+1)
		}
		want(tr.at(r+1), r+1)
		want(tr.cursorOf(m.id), r+1)
	}
	var c cursor // an empty tree has no rank 1
	if len(sorted) > 0 {
		c = tr.at(1)
	}
	for r := 1; r <= len(sorted); r, c = r+1, c.next() {
		want(c, r)
	}
	if c.valid() {
		t.Fatal("next past the last entry")
	}
	c = tr.last()
	for r := len(sorted); r >= 1; r, c = r-1, c.prev() {
		want(c, r)
	}
	if c.valid() {
		t.Fatal("prev before the first entry")
	}
}

// Random inserts, moves (in place and across leaves) and removals, in and
// out of order, at sizes that split and merge every level; the invariants
// and the sorted model hold throughout.
func TestTreeInvariants(t *testing.T) {
	for _, byUID := range []bool{false, true} {
		tr := newTree(byUID)
		rng := rand.New(rand.NewPCG(3, 4))
		var ms []*entry
		seq := uint64(0)
		add := func(uid uint32, score float64) {
			seq++
			m := &entry{k: key{score, seq}, uid: string(binary.BigEndian.AppendUint32(nil, uid))}
			if uid%7 == 0 { // a uid too long to live inline
				m.uid += strings.Repeat("x", inlineUID)
			}
			m.id = tr.add(m.uid, m.k)
			ms = append(ms, m)
		}
		removeAt := func(j int) {
			tr.delete(ms[j].id)
			ms[j] = ms[len(ms)-1]
			ms = ms[:len(ms)-1]
		}
		for i := range 60000 {
			grow := i < 30000 || i > 50000
			switch r := rng.IntN(10); {
			case len(ms) == 0 || (grow && r < 6) || (!grow && r < 2):
				add(uint32(i), float64(rng.IntN(300)))
			case r < 7:
				seq++
				m := ms[rng.IntN(len(ms))]
				m.k = key{float64(rng.IntN(300)), seq}
				tr.move(m.id, m.k)
			default:
				removeAt(rng.IntN(len(ms)))
			}
			if i%5000 == 0 || i == 59999 {
				checkTree(t, tr)
			}
			if i%20000 == 0 || i == 59999 {
				checkModel(t, tr, ms)
			}
		}
		// Grow to four levels, then shrink from one end (borrowing and
		// merging inner nodes), then randomly.
		for i := range 150000 {
			add(uint32(100000+i), float64(i))
		}
		checkTree(t, tr)
		checkModel(t, tr, ms)
		slices.SortFunc(ms, func(a, b *entry) int { return tr.rank(a.id) - tr.rank(b.id) })
		for i, m := range ms[:60000] {
			tr.delete(m.id)
			if i%10000 == 0 {
				checkTree(t, tr)
			}
		}
		ms = ms[60000:]
		checkModel(t, tr, ms)
		rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		for i := 0; len(ms) > 100; i++ {
			removeAt(len(ms) - 1)
			if i%10000 == 0 {
				checkTree(t, tr)
			}
		}
		checkTree(t, tr)
		checkModel(t, tr, ms)
		// Empty it completely, then reuse it.
		for len(ms) > 0 {
			removeAt(0)
		}
		checkTree(t, tr)
		checkModel(t, tr, ms)
		add(1, 1)
		checkTree(t, tr)
		checkModel(t, tr, ms)
	}
}

func FuzzDecodeArchive(f *testing.F) {
	f.Add([]byte(`[{"uid":"p3","score":1100,"rank":1}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"uid":1}]`))
	f.Add([]byte(encodeArchive([]Entry{{"a\x00\"", 0.1, 1}, {"й", -9007199254740992, 2}})))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := decodeArchive("fuzz", data)
		if err != nil {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		again, err := decodeArchive("fuzz", []byte(encodeArchive(entries)))
		if err != nil {
			t.Fatalf("re-encoded archive does not decode: %v", err)
		}
		for i := range entries {
			if again[i] != entries[i] && (again[i].Score == again[i].Score || entries[i].Score == entries[i].Score) {
				t.Fatalf("entry %d: %+v re-decoded as %+v", i, entries[i], again[i])
			}
		}
	})
}

// The archive text is exact for every float64 and escapes what JSON needs.
func TestArchiveFormat(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{{0, "0"}, {1000, "1000"}, {-5, "-5"}, {1 << 53, "9007199254740992"}, {-(1 << 53), "-9007199254740992"},
		{0.1, "0.1"}, {1.0 / 3, "0.3333333333333333"}, {1e300, "1e+300"}, {1 << 60, "1.152921504606847e+18"}, {5e-324, "4.94065645841247e-324"}} {
		if got := formatNumber(c.x); got != c.want {
			t.Errorf("formatNumber(%v) = %s; want %s", c.x, got, c.want)
		}
	}
	got := encodeArchive([]Entry{{"a\"b\\c\n\x7f/é", 1, 1}})
	if want := `[{"uid":"a\"b\\c\u000a\u007f/é","score":1,"rank":1}]`; got != want {
		t.Fatalf("encodeArchive = %s; want %s", got, want)
	}
}

// The memory board's archive expiry follows the injected clock exactly;
// expired archives do not block a new reset of their date.
func TestMemoryArchiveExpiryFreesTheDate(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMemory(func() time.Time { return now })
	bd := board(t, m, "x", Options{})
	do(t, bd.Update("a", 1, ModeSet))
	do(t, bd.ArchiveAndClear("20250101", 5, time.Second))
	now = now.Add(time.Second)
	if a := do(t, bd.Archive("20250101")); a.Found {
		t.Fatal("archive outlived its TTL")
	}
	// The meta reset date still refuses a second reset of that date.
	do(t, bd.Update("b", 1, ModeSet))
	if r := do(t, bd.ArchiveAndClear("20250101", 5, time.Second)); r.Done {
		t.Fatalf("a repeated reset ran after its archive expired: %+v", r)
	}
}

// Updates (findPlace, then moveTo or addAt, then eviction), swaps and
// removals on a board of thousands of members, a third of their uids too
// long to live inline, under both tie policies, with and without a cap:
// the tree's invariants and the naive model's order hold throughout.
func TestMemoryLargeBoardAgainstNaive(t *testing.T) {
	for _, ties := range []Ties{TiesReach, TiesUID} {
		for _, max := range []int{0, 3000} {
			m := NewMemory(nil)
			bd := board(t, m, "b", Options{Ties: ties, MaxMembers: max})
			nv := &naive{byUID: ties == TiesUID, max: max}
			rng := rand.New(rand.NewPCG(7, uint64(max)))
			uid := func(i int) string {
				s := fmt.Sprintf("u%05d", i)
				if i%3 == 0 {
					s += strings.Repeat("y", 50)
				}
				return s
			}
			for i := range 20000 {
				u := uid(rng.IntN(4000))
				switch r := rng.IntN(10); {
				case r < 7:
					s := float64(rng.IntN(50))
					do(t, bd.Update(u, s, ModeSet))
					nv.set(u, s, ModeSet)
				case r < 8:
					v := uid(rng.IntN(4000))
					if v != u {
						_, _ = bd.Swap(u, v, nil).Do(t.Context())
						nv.swap(u, v)
					}
				default:
					do(t, bd.Remove(u))
					if j := nv.find(u); j >= 0 {
						nv.members = append(nv.members[:j], nv.members[j+1:]...)
					}
				}
				if i%4000 == 0 || i == 19999 {
					checkTree(t, bd.(*memHandle).b.list)
					want := nv.entries()
					wantEntries(t, "Top", do(t, bd.Top(len(want)+1)), want...)
				}
			}
		}
	}
}

// Entries a read returned own their uids: they stay intact after the board
// is cleared (its mapped memory given back) and refilled.
func TestEntriesOutliveTheBoardsMemory(t *testing.T) {
	m := NewMemory(nil)
	bd := board(t, m, "big", Options{Ties: TiesUID})
	scores := map[string]float64{}
	for i := range 100_000 {
		scores[fmt.Sprintf("p%07d", i)] = float64(i % 1000)
	}
	do(t, bd.MUpdate(scores))
	top := do(t, bd.Top(1000))
	ar := do(t, bd.Around("p0000999", 5))
	save := fmt.Sprint(top, ar)
	do(t, bd.Clear())
	for i := range 100_000 {
		scores[fmt.Sprintf("q%07d", i)] = float64(i % 7)
	}
	do(t, bd.MUpdate(scores))
	if fmt.Sprint(top, ar) != save {
		t.Fatal("returned entries changed")
	}
}

// The index alone against a map, with hashes forced into a few homes near
// the table's end so that runs of slots wrap around; every id stays
// reachable from its home after each add and removal.
func TestIndexRunsThatWrap(t *testing.T) {
	rs := &regions{}
	rng := rand.New(rand.NewPCG(9, 9))
	for round := range 200 {
		x := newIndex(rs)
		model := map[uint32]uint32{} // id -> hash
		for step := range 2000 {
			if len(model) < 40 && (rng.IntN(3) > 0 || len(model) == 0) {
				id := uint32(round*10000 + step)
				h := uint32(len(x.slots) - 1 - rng.IntN(3)) // homes at the end
				if rng.IntN(4) == 0 {
					h = uint32(rng.Uint32())
				}
				x.add(rs, h, id)
				model[id] = h
			} else {
				for id, h := range model {
					x.remove(h, id)
					delete(model, id)
					break
				}
			}
			// every member reachable from its home without crossing an empty slot
			mask := uint32(len(x.slots) - 1)
			n := 0
			for _, s := range x.slots {
				if s != 0 {
					n++
				}
			}
			if n != len(model) || x.n != n {
				t.Fatalf("slots %d n %d model %d", n, x.n, len(model))
			}
			for id, h := range model {
				i := h & mask
				for x.slots[i] != slotOf(h, id) {
					if x.slots[i] == 0 {
						t.Fatalf("id %d unreachable", id)
					}
					i = (i + 1) & mask
				}
			}
		}
	}
}

// mappedBytes is the size of a memory board's mapped arrays (0 where the
// OS maps none).
func mappedBytes(bd Board) int {
	b := bd.(*memHandle).b
	b.mu.RLock()
	defer b.mu.RUnlock()
	rs := b.list.mem
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := 0
	for _, m := range rs.mapped {
		n += len(m)
	}
	return n
}

// A game keeps many small boards (a guild's, an event's): one of five
// members costs less than 8 KB of heap (the first chunks of its arrays are
// small; it was 13 KB with chunks sized for large boards).
func TestSmallBoardsStaySmall(t *testing.T) {
	const boards = 2000
	m := NewMemory(nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range boards {
		bd := board(t, m, fmt.Sprintf("guild:%d", i), Options{})
		for j := range 5 {
			do(t, bd.Update(fmt.Sprintf("player:%d", j), float64(j), ModeSet))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / boards; per > 8<<10 {
		t.Fatalf("%d bytes of heap per board of five members", per)
	}
	runtime.KeepAlive(m)
}
