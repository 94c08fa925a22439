package local

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testclock"
)

// Snapshot names each held lock with its holds (kind, mode, since,
// expiry), readers apart from the writer, its waiters and their kinds, and
// changes nothing.
func TestSnapshotNamesHeldLocks(t *testing.T) {
	clk := testclock.New()
	m := NewManager(clk.Now)
	const mutex, rw, gate Kind = 1, 2, 3
	a := x("a", "A")
	a.Kind, a.TTL = mutex, time.Minute
	mustTry(t, m, a)
	start := clk.Now()
	clk.Advance(time.Second)
	w := x("b", "W")
	w.Kind = rw
	for _, r := range []string{"R1", "R2"} {
		q := sh("b", r)
		q.Kind = rw
		mustTry(t, m, q)
		clk.Advance(time.Second)
	}
	mustQueue(t, m, w, nil) // the writer waits for the readers
	g := x("\x00dist\x00c", "G")
	g.Kind = gate
	mustTry(t, m, g)
	mq := x("a", "B")
	mq.Kind = rw // the write side of an rwlock "a" waits for the mutex "a"
	mustQueue(t, m, mq, nil)
	before := m.Stats()

	s := m.Snapshot(10, 10)
	if s.Total != 3 || len(s.Locks) != 3 {
		t.Fatalf("Snapshot = %+v, want 3 locks", s)
	}
	if got := []string{s.Locks[0].Name, s.Locks[1].Name, s.Locks[2].Name}; !slices.Equal(got, []string{"\x00dist\x00c", "a", "b"}) {
		t.Fatalf("names %q, want sorted by name", got)
	}
	la, lb := s.Locks[1], s.Locks[2]
	wantA := OwnerHold{Owner: "A", Mode: Exclusive, Count: 1, AcquiredAt: start, ExpiresAt: start.Add(time.Minute), Kind: mutex}
	if la.Holders != 1 || la.Readers != 0 || la.Waiting != 1 || len(la.Owners) != 1 || la.Owners[0] != wantA ||
		!slices.Equal(la.Kinds, []Kind{mutex, rw}) {
		t.Fatalf("lock a = %+v", la)
	}
	if lb.Holders != 2 || lb.Readers != 2 || lb.Waiting != 1 || len(lb.Owners) != 2 ||
		lb.Owners[0].Owner != "R1" || lb.Owners[1].Owner != "R2" || lb.Owners[0].Mode != Shared ||
		!slices.Equal(lb.Kinds, []Kind{rw}) {
		t.Fatalf("lock b = %+v", lb)
	}
	if s.Locks[0].Owners[0].Kind != gate {
		t.Fatalf("gate = %+v", s.Locks[0])
	}
	if after := m.Stats(); after != before {
		t.Fatalf("Stats %+v after Snapshot, %+v before", after, before)
	}

	// A hold that is due is not listed (Snapshot does not expire it).
	clk.Advance(time.Minute)
	s = m.Snapshot(10, 10)
	if la := s.Locks[1]; la.Name != "a" || la.Holders != 0 || la.Waiting != 1 || len(la.Owners) != 0 {
		t.Fatalf("lock a after its ttl = %+v", la)
	}
	m.ReleaseAll("")
	if s := m.Snapshot(10, 10); s.Total != 0 || len(s.Locks) != 0 {
		t.Fatalf("Snapshot of nothing = %+v", s)
	}
}

// The listing is bounded: the first limit names of many, and the first
// maxOwners holds of a lock with many readers; the total counts them all.
func TestSnapshotIsBounded(t *testing.T) {
	m := NewManager(nil)
	for i := range 1000 {
		if i != 3 {
			mustTry(t, m, x(fmt.Sprintf("n%04d", i), "A"))
		}
	}
	for i := range 50 {
		mustTry(t, m, sh("n0003", fmt.Sprintf("R%02d", i)))
	}
	s := m.Snapshot(200, 5)
	if s.Total != 1000 || len(s.Locks) != 200 {
		t.Fatalf("Total %d, %d locks; want 1000, 200", s.Total, len(s.Locks))
	}
	for i, l := range s.Locks {
		if want := fmt.Sprintf("n%04d", i); l.Name != want {
			t.Fatalf("lock %d is %q, want %q", i, l.Name, want)
		}
	}
	if l := s.Locks[3]; l.Holders != 50 || l.Readers != 50 || len(l.Owners) != 5 {
		t.Fatalf("n0003: %d holders, %d readers, %d owners listed; want 50, 50, 5", l.Holders, l.Readers, len(l.Owners))
	}
	if s := m.Snapshot(0, 0); len(s.Locks) != 1 || s.Locks[0].Name != "n0000" || len(s.Locks[0].Owners) != 1 {
		t.Fatalf("Snapshot(0, 0) = %+v, want the first lock and its first hold", s.Locks)
	}
	m.ReleaseAll("")
	assertEmpty(t, m)
}
