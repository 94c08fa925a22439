package rank

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// naive is a leaderboard as a sorted slice: the semantics of the package
// doc, written the obvious way, to check the skip list against.
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
		m.members[i].score, m.members[i].seq = score, m.seq
		m.sort()
		return
	}
	k := naiveMember{uid, score, m.seq + 1}
	if m.max > 0 && len(m.members) >= m.max && !m.before(k, m.members[len(m.members)-1]) {
		return
	}
	m.seq++
	m.members = append(m.members, k)
	m.sort()
	if m.max > 0 && len(m.members) > m.max {
		m.members = m.members[:m.max]
	}
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
	uid := func(b byte) string { return string(rune('a' + b%16)) }
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

// The skip list keeps its spans right through many inserts, moves and
// removals (rank and at agree with the level-0 order).
func TestSkiplistSpans(t *testing.T) {
	s := newSkiplist(false)
	rng := rand.New(rand.NewPCG(3, 4))
	var nodes []*node
	seq := uint64(0)
	for i := range 5000 {
		switch r := rng.IntN(10); {
		case r < 5 || len(nodes) == 0:
			seq++
			n := s.newNode(string(binary.BigEndian.AppendUint32(nil, uint32(i))), float64(rng.IntN(100)), seq)
			s.insert(n)
			nodes = append(nodes, n)
		case r < 8:
			seq++
			s.move(nodes[rng.IntN(len(nodes))], float64(rng.IntN(100)), seq)
		default:
			j := rng.IntN(len(nodes))
			s.remove(nodes[j])
			nodes = slices.Delete(nodes, j, j+1)
		}
	}
	r := 0
	for n := s.head.level[0].next; n != nil; n = n.level[0].next {
		r++
		if s.rank(n) != r || s.at(r) != n {
			t.Fatalf("rank %d: rank() %d, at() %p want %p", r, s.rank(n), s.at(r), n)
		}
		if n.prev != nil && !s.before(n.prev, n) {
			t.Fatalf("rank %d out of order", r)
		}
	}
	if r != s.length || r != len(nodes) {
		t.Fatalf("walked %d nodes; length %d; want %d", r, s.length, len(nodes))
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
