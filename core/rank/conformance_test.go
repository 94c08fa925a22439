package rank

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/testclock"
)

// harness is what the conformance suite needs from a backend under test.
type harness struct {
	// backend returns a backend with its own empty key space.
	backend func(t *testing.T) Backend
	// archiveTTL returns the remaining time to live of the archive of
	// board name for date (Redis: PTTL of its key).
	archiveTTL func(t *testing.T, b Backend, name, date string) time.Duration
	// advance lets time pass for archive TTLs: the memory clock; nil on
	// Redis, where the suite only reads the TTL (it does not sleep).
	advance func(d time.Duration)
}

// do runs op and fails the test on an error.
func do[T any](t *testing.T, op *store.Op[T]) T {
	t.Helper()
	v, err := op.Do(t.Context())
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	return v
}

// fails runs op and checks it fails with target.
func fails[T any](t *testing.T, op *store.Op[T], target error) error {
	t.Helper()
	v, err := op.Do(t.Context())
	if !errors.Is(err, target) {
		t.Fatalf("got %+v, %v; want an error wrapping %v", v, err, target)
	}
	return err
}

func board(t *testing.T, b Backend, name string, o Options) Board {
	t.Helper()
	bd, err := b.Board(name, o)
	if err != nil {
		t.Fatalf("Board(%q, %+v): %v", name, o, err)
	}
	return bd
}

// e builds an entry.
func e(uid string, score float64, rank int) Entry { return Entry{UID: uid, Score: score, Rank: rank} }

func wantEntries(t *testing.T, what string, got []Entry, want ...Entry) {
	t.Helper()
	if want == nil {
		want = []Entry{}
	}
	if got == nil || !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
	}
}

// wantBoard checks the whole board, its count and every member's position,
// score and Around(uid, 1) against want (best first).
func wantBoard(t *testing.T, bd Board, want ...Entry) {
	t.Helper()
	wantEntries(t, "Top(1000)", do(t, bd.Top(1000)), want...)
	if n := do(t, bd.Count()); n != len(want) {
		t.Fatalf("Count() = %d; want %d", n, len(want))
	}
	for i, w := range want {
		if p := do(t, bd.Position(w.UID)); p != w.Rank {
			t.Fatalf("Position(%q) = %d; want %d", w.UID, p, w.Rank)
		}
		if s := do(t, bd.Score(w.UID)); !s.Found || s.Score != w.Score {
			t.Fatalf("Score(%q) = %+v; want %v", w.UID, s, w.Score)
		}
		a := do(t, bd.Around(w.UID, 1))
		wantEntries(t, "Around.Above", a.Above, want[max(0, i-1):i]...)
		wantEntries(t, "Around.Below", a.Below, want[i+1:min(len(want), i+2)]...)
		if !a.Found || a.Target != w {
			t.Fatalf("Around(%q).Target = %+v found %v; want %+v", w.UID, a.Target, a.Found, w)
		}
	}
}

// wantReads checks every read of bd against want (best first): wantBoard,
// and the range, score-range and snapshot reads.
func wantReads(t *testing.T, bd Board, want ...Entry) {
	t.Helper()
	wantBoard(t, bd, want...)
	wantEntries(t, "Range(1, 1000)", do(t, bd.Range(1, 1000)), want...)
	wantEntries(t, "RangeByScore(-inf, +inf)", do(t, bd.RangeByScore(math.Inf(-1), math.Inf(1))), want...)
	wantEntries(t, "Snapshot(1, 1000)", do(t, bd.Snapshot(1, 1000)).Entries, want...)
}

// version returns the board version.
func version(t *testing.T, bd Board) int64 { t.Helper(); return do(t, bd.Version()) }

// runConformance checks that a Backend implements the Board contract. Every
// backend must pass it unchanged.
func runConformance(t *testing.T, h harness) {
	open := func(t *testing.T, o Options) Board {
		return board(t, h.backend(t), "board", o)
	}

	t.Run("Empty", func(t *testing.T) {
		bd := open(t, Options{})
		wantBoard(t, bd)
		if v := version(t, bd); v != 0 {
			t.Fatalf("Version() = %d; want 0", v)
		}
		wantEntries(t, "Range", do(t, bd.Range(1, 10)))
		wantEntries(t, "RangeByScore", do(t, bd.RangeByScore(math.Inf(-1), math.Inf(1))))
		if p := do(t, bd.Position("x")); p != 0 {
			t.Fatalf("Position(absent) = %d", p)
		}
		if s := do(t, bd.Score("x")); s.Found {
			t.Fatalf("Score(absent) = %+v", s)
		}
		if a := do(t, bd.Around("x", 5)); a.Found || len(a.Above)+len(a.Below) != 0 {
			t.Fatalf("Around(absent) = %+v", a)
		}
		if s := do(t, bd.Snapshot(1, 10)); s.Count != 0 || s.Version != 0 || len(s.Entries) != 0 {
			t.Fatalf("Snapshot = %+v", s)
		}
		if w := do(t, bd.Clear()); w != (Written{}) {
			t.Fatalf("Clear(empty) = %+v; want no change at version 0", w)
		}
		if w := do(t, bd.Remove("x")); w != (Written{}) {
			t.Fatalf("Remove(absent) = %+v", w)
		}
	})

	t.Run("OrderAndQueries", func(t *testing.T) {
		bd := open(t, Options{})
		for i, u := range []struct {
			uid   string
			score float64
		}{{"p1", 1000}, {"p2", 950}, {"p3", 1100}, {"p4", -5}, {"p5", 0.5}} {
			got := do(t, bd.Update(u.uid, u.score, ModeSet))
			want := Updated{Changed: true, Ranked: true, Score: u.score, Version: int64(i + 1)}
			if got != want {
				t.Fatalf("Update(%s) = %+v; want %+v", u.uid, got, want)
			}
		}
		all := []Entry{e("p3", 1100, 1), e("p1", 1000, 2), e("p2", 950, 3), e("p5", 0.5, 4), e("p4", -5, 5)}
		wantBoard(t, bd, all...)
		wantEntries(t, "Top(2)", do(t, bd.Top(2)), all[:2]...)
		wantEntries(t, "Range(2,4)", do(t, bd.Range(2, 4)), all[1:4]...)
		wantEntries(t, "Range(4,99)", do(t, bd.Range(4, 99)), all[3:]...)
		wantEntries(t, "Range(6,9)", do(t, bd.Range(6, 9)))
		wantEntries(t, "RangeByScore(900,1100)", do(t, bd.RangeByScore(900, 1100)), all[:3]...)
		wantEntries(t, "RangeByScore(950,999)", do(t, bd.RangeByScore(950, 999)), all[2])
		wantEntries(t, "RangeByScore(-inf,0.5)", do(t, bd.RangeByScore(math.Inf(-1), 0.5)), all[3:]...)
		wantEntries(t, "RangeByScore(1,2)", do(t, bd.RangeByScore(1, 2)))
		wantEntries(t, "RangeByScore(1100,+inf)", do(t, bd.RangeByScore(1100, math.Inf(1))), all[0])
		a := do(t, bd.Around("p2", 5))
		if !a.Found || a.Target != all[2] {
			t.Fatalf("Around(p2) = %+v", a)
		}
		wantEntries(t, "Around(p2,5).Above", a.Above, all[:2]...)
		wantEntries(t, "Around(p2,5).Below", a.Below, all[3:]...)
		a = do(t, bd.Around("p3", 2))
		wantEntries(t, "Around(top).Above", a.Above)
		wantEntries(t, "Around(top).Below", a.Below, all[1:3]...)
		a = do(t, bd.Around("p4", 2))
		wantEntries(t, "Around(bottom).Above", a.Above, all[2:4]...)
		wantEntries(t, "Around(bottom).Below", a.Below)
		s := do(t, bd.Snapshot(2, 3))
		if s.Version != 5 || s.Count != 5 {
			t.Fatalf("Snapshot = %+v", s)
		}
		wantEntries(t, "Snapshot(2,3)", s.Entries, all[1:3]...)

		// Remove, then Clear: versions go on.
		if w := do(t, bd.Remove("p1")); w != (Written{Changed: 1, Version: 6}) {
			t.Fatalf("Remove = %+v", w)
		}
		if w := do(t, bd.Remove("p1")); w != (Written{Changed: 0, Version: 6}) {
			t.Fatalf("Remove again = %+v", w)
		}
		wantBoard(t, bd, e("p3", 1100, 1), e("p2", 950, 2), e("p5", 0.5, 3), e("p4", -5, 4))
		if w := do(t, bd.Clear()); w != (Written{Changed: 4, Version: 7}) {
			t.Fatalf("Clear = %+v", w)
		}
		wantBoard(t, bd)
		if v := version(t, bd); v != 7 {
			t.Fatalf("Version after Clear = %d; want 7", v)
		}
		if u := do(t, bd.Update("p1", 1, ModeSet)); u.Version != 8 {
			t.Fatalf("Update after Clear = %+v; want version 8", u)
		}
	})

	t.Run("HandlesShareBoards", func(t *testing.T) {
		b := h.backend(t)
		x, y, other := board(t, b, "shared", Options{}), board(t, b, "shared", Options{MaxMembers: 5}), board(t, b, "other", Options{})
		do(t, x.Update("a", 1, ModeSet))
		wantBoard(t, y, e("a", 1, 1))
		wantBoard(t, other)
		if x.Name() != "shared" || y.Options().MaxMembers != 5 {
			t.Fatalf("Name %q Options %+v", x.Name(), y.Options())
		}
	})

	t.Run("TiesByReach", func(t *testing.T) {
		bd := open(t, Options{})
		for _, uid := range []string{"c", "a", "b"} {
			do(t, bd.Update(uid, 100, ModeSet))
		}
		do(t, bd.Update("z", 200, ModeSet))
		wantBoard(t, bd, e("z", 200, 1), e("c", 100, 2), e("a", 100, 3), e("b", 100, 4))

		// The same score again is no change: c keeps its place.
		v := version(t, bd)
		if u := do(t, bd.Update("c", 100, ModeSet)); u.Changed || u.Version != v {
			t.Fatalf("Update to the same score = %+v; want no change at %d", u, v)
		}
		// Leaving the score and coming back is a new reach.
		do(t, bd.Update("c", 101, ModeSet))
		do(t, bd.Update("c", 100, ModeSet))
		wantBoard(t, bd, e("z", 200, 1), e("a", 100, 2), e("b", 100, 3), e("c", 100, 4))
		// z falls to 100 last; Incr to 100 is a reach too.
		do(t, bd.Update("z", 100, ModeSet))
		do(t, bd.Incr("y", 100))
		wantBoard(t, bd, e("a", 100, 1), e("b", 100, 2), e("c", 100, 3), e("z", 100, 4), e("y", 100, 5))
		// A max update that does not raise keeps the place.
		do(t, bd.Update("a", 50, ModeMax))
		do(t, bd.Incr("a", 0))
		wantBoard(t, bd, e("a", 100, 1), e("b", 100, 2), e("c", 100, 3), e("z", 100, 4), e("y", 100, 5))

		// One MUpdate applies in uid byte order.
		bd2 := board(t, h.backend(t), "m", Options{})
		w := do(t, bd2.MUpdate(map[string]float64{"d": 7, "b": 7, "c": 7, "a": 8, "B": 7}))
		if w != (Written{Changed: 5, Version: 1}) {
			t.Fatalf("MUpdate = %+v; want 5 changes, version 1", w)
		}
		wantBoard(t, bd2, e("a", 8, 1), e("B", 7, 2), e("b", 7, 3), e("c", 7, 4), e("d", 7, 5))
	})

	t.Run("TiesByUID", func(t *testing.T) {
		bd := open(t, Options{Ties: TiesUID})
		for _, uid := range []string{"b", "c", "a", "ab"} {
			do(t, bd.Update(uid, 100, ModeSet))
		}
		do(t, bd.Update("z", 50, ModeSet))
		wantBoard(t, bd, e("c", 100, 1), e("b", 100, 2), e("ab", 100, 3), e("a", 100, 4), e("z", 50, 5))
		// Swapping equal scores changes nothing; otherwise scores move.
		v := version(t, bd)
		if s := do(t, bd.Swap("a", "c", nil)); s.Changed || s.Version != v || s.ScoreA != 100 {
			t.Fatalf("Swap of equal scores under TiesUID = %+v", s)
		}
		if s := do(t, bd.Swap("a", "z", nil)); !s.Changed || s.ScoreA != 50 || s.ScoreB != 100 || s.Version != v+1 {
			t.Fatalf("Swap = %+v", s)
		}
		wantBoard(t, bd, e("z", 100, 1), e("c", 100, 2), e("b", 100, 3), e("ab", 100, 4), e("a", 50, 5))
	})

	t.Run("TiesPolicyOfABoard", func(t *testing.T) {
		b := h.backend(t)
		reach, byUID := board(t, b, "p", Options{}), board(t, b, "p", Options{Ties: TiesUID})
		do(t, reach.Update("a", 1, ModeSet))
		fails(t, byUID.Update("b", 1, ModeSet), ErrInvalid)
		fails(t, byUID.Swap("a", "b", nil), ErrInvalid)
		fails(t, byUID.Remove("a"), ErrInvalid)
		wantBoard(t, reach, e("a", 1, 1))
		// Reads follow the board's policy, whichever handle reads.
		do(t, reach.Update("b", 1, ModeSet))
		do(t, reach.Update("c", 3, ModeSet))
		wantReads(t, byUID, e("c", 3, 1), e("a", 1, 2), e("b", 1, 3))
		do(t, reach.Remove("b"))
		do(t, reach.Remove("c"))
		// An empty board takes the policy of its next writer.
		do(t, reach.Clear())
		do(t, byUID.MUpdate(map[string]float64{"a": 1, "b": 1}))
		wantBoard(t, byUID, e("b", 1, 1), e("a", 1, 2))
		fails(t, reach.Incr("a", 1), ErrInvalid)
		wantReads(t, reach, e("b", 1, 1), e("a", 1, 2))
	})

	t.Run("Modes", func(t *testing.T) {
		bd := open(t, Options{})
		want := func(got, want Updated) {
			t.Helper()
			if got != want {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		}
		want(do(t, bd.Update("d", 10, ModeMax)), Updated{Changed: true, Ranked: true, Score: 10, Version: 1})
		want(do(t, bd.Update("d", 5, ModeMax)), Updated{Ranked: true, Score: 10, Existed: true, Previous: 10, Version: 1})
		want(do(t, bd.Update("d", 10, ModeMax)), Updated{Ranked: true, Score: 10, Existed: true, Previous: 10, Version: 1})
		want(do(t, bd.Update("d", 12, ModeMax)), Updated{Changed: true, Ranked: true, Score: 12, Existed: true, Previous: 10, Version: 2})
		want(do(t, bd.Update("d", 20, ModeMin)), Updated{Ranked: true, Score: 12, Existed: true, Previous: 12, Version: 2})
		want(do(t, bd.Update("d", 3, ModeMin)), Updated{Changed: true, Ranked: true, Score: 3, Existed: true, Previous: 12, Version: 3})
		want(do(t, bd.Update("n", 7, ModeMin)), Updated{Changed: true, Ranked: true, Score: 7, Version: 4})
		want(do(t, bd.Update("d", 9, ModeSet)), Updated{Changed: true, Ranked: true, Score: 9, Existed: true, Previous: 3, Version: 5})
		want(do(t, bd.Update("d", 1, ModeSet)), Updated{Changed: true, Ranked: true, Score: 1, Existed: true, Previous: 9, Version: 6})
		wantBoard(t, bd, e("n", 7, 1), e("d", 1, 2))
	})

	t.Run("Incr", func(t *testing.T) {
		bd := open(t, Options{})
		if u := do(t, bd.Incr("a", 5)); u != (Updated{Changed: true, Ranked: true, Score: 5, Version: 1}) {
			t.Fatalf("Incr(new) = %+v", u)
		}
		if u := do(t, bd.Incr("a", -7.5)); u != (Updated{Changed: true, Ranked: true, Score: -2.5, Existed: true, Previous: 5, Version: 2}) {
			t.Fatalf("Incr = %+v", u)
		}
		if u := do(t, bd.Incr("a", 0)); u.Changed || u.Score != -2.5 || u.Version != 2 {
			t.Fatalf("Incr(0) = %+v", u)
		}
		if u := do(t, bd.Incr("z", 0)); !u.Changed || u.Score != 0 || u.Version != 3 {
			t.Fatalf("Incr(new, 0) = %+v; want added at 0", u)
		}
		do(t, bd.Update("big", math.MaxFloat64, ModeSet))
		fails(t, bd.Incr("big", math.MaxFloat64), ErrInvalid)
		if s := do(t, bd.Score("big")); s.Score != math.MaxFloat64 {
			t.Fatalf("an overflowing Incr changed the score to %v", s.Score)
		}
		v := version(t, bd)
		do(t, bd.Incr("big", -math.MaxFloat64))
		if s := do(t, bd.Score("big")); s.Score != 0 || version(t, bd) != v+1 {
			t.Fatalf("Score = %+v", s)
		}
		wantBoard(t, bd, e("z", 0, 1), e("big", 0, 2), e("a", -2.5, 3))
	})

	t.Run("ExactScores", func(t *testing.T) {
		bd := open(t, Options{})
		const p53 = 1 << 53
		scores := map[string]float64{
			"max": p53, "max-1": p53 - 1, "max-2": p53 - 2,
			"min": -p53, "min+1": -p53 + 1,
			"tenth": 0.1, "third": 1.0 / 3, "tiny": 5e-324, "huge": math.MaxFloat64, "neg": -math.MaxFloat64,
			"zero": math.Copysign(0, -1),
		}
		do(t, bd.MUpdate(scores))
		scores["zero"] = 0
		want := []Entry{
			e("huge", math.MaxFloat64, 1), e("max", p53, 2), e("max-1", p53-1, 3), e("max-2", p53-2, 4),
			e("third", 1.0/3, 5), e("tenth", 0.1, 6), e("tiny", 5e-324, 7), e("zero", 0, 8),
			e("min+1", -p53+1, 9), e("min", -p53, 10), e("neg", -math.MaxFloat64, 11),
		}
		wantBoard(t, bd, want...)
		if s := do(t, bd.Score("zero")); math.Signbit(s.Score) {
			t.Fatal("-0 stored as -0; want 0")
		}
		wantEntries(t, "RangeByScore(2^53-1, 2^53)", do(t, bd.RangeByScore(p53-1, p53)), want[1:3]...)
		do(t, bd.Incr("max-1", 1))
		do(t, bd.Incr("min+1", -1))
		if s := do(t, bd.Score("max-1")); s.Score != p53 {
			t.Fatalf("2^53-1 + 1 = %v", s.Score)
		}
		if s := do(t, bd.Score("min+1")); s.Score != -p53 {
			t.Fatalf("-2^53+1 - 1 = %v", s.Score)
		}
		// Reached 2^53 later than max: ranks after it.
		wantEntries(t, "Range(2,3)", do(t, bd.Range(2, 3)), e("max", p53, 2), e("max-1", p53, 3))
		do(t, bd.ArchiveAndClear("20250101", 100, time.Hour))
		got := do(t, bd.Archive("20250101"))
		if !got.Found || len(got.Entries) != 11 || got.Entries[1] != e("max", p53, 2) || got.Entries[5] != e("tenth", 0.1, 6) {
			t.Fatalf("Archive = %+v", got)
		}
	})

	t.Run("Swap", func(t *testing.T) {
		bd := open(t, Options{})
		do(t, bd.MUpdate(map[string]float64{"a": 300, "b": 200, "c": 200, "d": 200, "e": 100}))
		// b c d tie at 200 in uid order. Swap a and d: a lands exactly at
		// d's rank 4 (after b and c), d at a's rank 1.
		s := do(t, bd.Swap("a", "d", nil))
		if s != (Swapped{ScoreA: 200, ScoreB: 300, Changed: true, Version: 2}) {
			t.Fatalf("Swap = %+v", s)
		}
		wantBoard(t, bd, e("d", 300, 1), e("b", 200, 2), e("c", 200, 3), e("a", 200, 4), e("e", 100, 5))
		// Among ties a swap exchanges places.
		do(t, bd.Swap("b", "a", nil))
		wantBoard(t, bd, e("d", 300, 1), e("a", 200, 2), e("c", 200, 3), e("b", 200, 4), e("e", 100, 5))
		// A swapped member's tie place is the one it took: a later update
		// to the same score keeps it, a new reach moves it.
		do(t, bd.Update("e", 200, ModeSet))
		wantBoard(t, bd, e("d", 300, 1), e("a", 200, 2), e("c", 200, 3), e("b", 200, 4), e("e", 200, 5))
		do(t, bd.Swap("e", "d", nil))
		wantBoard(t, bd, e("e", 300, 1), e("a", 200, 2), e("c", 200, 3), e("b", 200, 4), e("d", 200, 5))

		// Absent members: not_found, nobody inserted, no version.
		v := version(t, bd)
		fails(t, bd.Swap("a", "ghost", nil), ErrNotFound)
		fails(t, bd.Swap("ghost", "a", nil), ErrNotFound)
		fails(t, bd.Swap("ghost", "ghost2", &Expect{A: 1, B: 2}), ErrNotFound)
		if do(t, bd.Position("ghost")) != 0 || version(t, bd) != v {
			t.Fatal("a failed swap inserted a member or moved the version")
		}

		// Versioned: applies when the scores are the ones read.
		s = do(t, bd.Swap("a", "e", &Expect{A: 200, B: 300}))
		if s != (Swapped{ScoreA: 300, ScoreB: 200, Changed: true, Version: v + 1}) {
			t.Fatalf("versioned Swap = %+v", s)
		}
		// Refused after a change of either member; the board is untouched.
		do(t, bd.Update("e", 250, ModeSet))
		before := do(t, bd.Top(10))
		v = version(t, bd)
		fails(t, bd.Swap("a", "e", &Expect{A: 300, B: 200}), ErrVersionConflict)
		fails(t, bd.Swap("e", "a", &Expect{A: 200, B: 300}), ErrVersionConflict)
		fails(t, bd.Swap("a", "e", &Expect{A: 299, B: 250}), ErrVersionConflict)
		if version(t, bd) != v {
			t.Fatal("a refused swap moved the version")
		}
		wantBoard(t, bd, before...)
		do(t, bd.Swap("a", "e", &Expect{A: 300, B: 250}))
		if s := do(t, bd.Score("a")); s.Score != 250 {
			t.Fatalf("Score(a) = %v", s.Score)
		}
	})

	t.Run("Versions", func(t *testing.T) {
		bd := open(t, Options{MaxMembers: 3})
		last := int64(0)
		step := func(what string, got int64, changed bool) {
			t.Helper()
			want := last
			if changed {
				want++
			}
			if got != want {
				t.Fatalf("%s: version %d; want %d", what, got, want)
			}
			if v := version(t, bd); v != got {
				t.Fatalf("%s: Version() = %d; the write returned %d", what, v, got)
			}
			last = got
		}
		step("update", do(t, bd.Update("a", 1, ModeSet)).Version, true)
		step("same", do(t, bd.Update("a", 1, ModeSet)).Version, false)
		step("mupdate", do(t, bd.MUpdate(map[string]float64{"b": 2, "c": 3})).Version, true)
		step("mupdate same", do(t, bd.MUpdate(map[string]float64{"b": 2, "c": 3})).Version, false)
		step("mupdate empty", do(t, bd.MUpdate(nil)).Version, false)
		step("not admitted", do(t, bd.Update("z", 0, ModeSet)).Version, false)
		step("admitted", do(t, bd.Update("y", 5, ModeSet)).Version, true)
		step("incr", do(t, bd.Incr("y", 1)).Version, true)
		step("incr 0", do(t, bd.Incr("y", 0)).Version, false)
		step("swap", do(t, bd.Swap("y", "b", nil)).Version, true)
		step("remove", do(t, bd.Remove("y")).Version, true)
		step("remove absent", do(t, bd.Remove("y")).Version, false)
		step("clear", do(t, bd.Clear()).Version, true)
		step("clear empty", do(t, bd.Clear()).Version, false)
		do(t, bd.Update("a", 1, ModeSet))
		last++
		step("reset", do(t, bd.ArchiveAndClear("20250102", 10, time.Hour)).Version, true)
		step("reset again", do(t, bd.ArchiveAndClear("20250102", 10, time.Hour)).Version, false)
		step("reset empty", do(t, bd.ArchiveAndClear("20250103", 10, time.Hour)).Version, false)
		if s := do(t, bd.Snapshot(1, 1)); s.Version != last {
			t.Fatalf("Snapshot.Version = %d; want %d", s.Version, last)
		}
	})

	t.Run("MaxMembers", func(t *testing.T) {
		bd := open(t, Options{MaxMembers: 3})
		do(t, bd.MUpdate(map[string]float64{"a": 30, "b": 20, "c": 10}))
		v := version(t, bd)
		// Below or equal to the last: not admitted, nothing changes.
		for _, s := range []float64{5, 10} {
			if u := do(t, bd.Update("n", s, ModeSet)); u != (Updated{Version: v}) {
				t.Fatalf("Update(n, %v) on a full board = %+v; want not admitted", s, u)
			}
		}
		if u := do(t, bd.Incr("n", 10)); u.Ranked || u.Changed {
			t.Fatalf("Incr(new) below the last = %+v", u)
		}
		wantBoard(t, bd, e("a", 30, 1), e("b", 20, 2), e("c", 10, 3))
		// Above the last: admitted, the last evicted.
		if u := do(t, bd.Update("n", 15, ModeMax)); u != (Updated{Changed: true, Ranked: true, Score: 15, Version: v + 1}) {
			t.Fatalf("Update(n, 15) = %+v", u)
		}
		wantBoard(t, bd, e("a", 30, 1), e("b", 20, 2), e("n", 15, 3))
		if s := do(t, bd.Score("c")); s.Found {
			t.Fatal("the evicted member still has a score")
		}
		// Members on the board are never evicted by their own changes.
		do(t, bd.Update("a", -100, ModeSet))
		wantBoard(t, bd, e("b", 20, 1), e("n", 15, 2), e("a", -100, 3))
		// Ties at the cut: the later reach is last and goes first.
		do(t, bd.MUpdate(map[string]float64{"a": 15}))
		wantBoard(t, bd, e("b", 20, 1), e("n", 15, 2), e("a", 15, 3))
		do(t, bd.Update("m", 16, ModeSet))
		wantBoard(t, bd, e("b", 20, 1), e("m", 16, 2), e("n", 15, 3))
		// MUpdate admits one by one, in uid order.
		w := do(t, bd.MUpdate(map[string]float64{"x": 17, "y": 18, "z": 1, "b": 21}))
		if w.Changed != 3 {
			t.Fatalf("MUpdate = %+v; want 3 changed (z not admitted)", w)
		}
		wantBoard(t, bd, e("b", 21, 1), e("y", 18, 2), e("x", 17, 3))
	})

	// A board over the bound (a handle with a larger one wrote it) is cut
	// by the next newcomer.
	t.Run("MaxMembersCut", func(t *testing.T) {
		b := h.backend(t)
		big, small := board(t, b, "cut", Options{MaxMembers: 10}), board(t, b, "cut", Options{MaxMembers: 2})
		do(t, big.MUpdate(map[string]float64{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}))
		do(t, small.Update("a", 6, ModeSet)) // not a newcomer: no cut
		wantBoard(t, big, e("a", 6, 1), e("e", 5, 2), e("d", 4, 3), e("c", 3, 4), e("b", 2, 5))
		do(t, small.Update("f", 4.5, ModeSet))
		wantBoard(t, big, e("a", 6, 1), e("e", 5, 2))
		wantEntries(t, "RangeByScore limited to MaxMembers", do(t, small.RangeByScore(0, 10)), e("a", 6, 1), e("e", 5, 2))
		do(t, big.MUpdate(map[string]float64{"x": 1, "y": 2}))
		wantEntries(t, "RangeByScore", do(t, small.RangeByScore(0, 10)), e("a", 6, 1), e("e", 5, 2))
		wantEntries(t, "RangeByScore", do(t, big.RangeByScore(0, 10)), e("a", 6, 1), e("e", 5, 2), e("y", 2, 3), e("x", 1, 4))
	})

	t.Run("MaxMembersByUID", func(t *testing.T) {
		bd := open(t, Options{MaxMembers: 2, Ties: TiesUID})
		do(t, bd.MUpdate(map[string]float64{"m": 10, "k": 5}))
		if u := do(t, bd.Update("a", 5, ModeSet)); u.Ranked {
			t.Fatalf("a (5) ranks after k (5) by uid: must not be admitted: %+v", u)
		}
		if u := do(t, bd.Update("z", 5, ModeSet)); !u.Ranked {
			t.Fatalf("z (5) ranks before k (5) by uid: must be admitted: %+v", u)
		}
		wantBoard(t, bd, e("m", 10, 1), e("z", 5, 2))
	})

	t.Run("ArchiveAndClear", func(t *testing.T) {
		b := h.backend(t)
		bd := board(t, b, "daily", Options{})
		do(t, bd.MUpdate(map[string]float64{"p1": 1000, "p2": 950, "p3": 1100, `q"\` + "\n\x00": 1, "й": 0.1}))
		v := version(t, bd)
		r := do(t, bd.ArchiveAndClear("20250301", 3, time.Hour))
		if r != (Reset{Done: true, Archived: 3, Cleared: 5, Version: v + 1}) {
			t.Fatalf("ArchiveAndClear = %+v", r)
		}
		wantBoard(t, bd)
		a := do(t, bd.Archive("20250301"))
		if !a.Found {
			t.Fatal("archive not found")
		}
		wantEntries(t, "Archive", a.Entries, e("p3", 1100, 1), e("p1", 1000, 2), e("p2", 950, 3))
		if a := do(t, bd.Archive("20250302")); a.Found {
			t.Fatalf("Archive(other date) = %+v", a)
		}
		// A retry (same date) and a stale one (an earlier date) change
		// nothing: the new period's scores and the archive stay.
		do(t, bd.Update("new", 5, ModeSet))
		v = version(t, bd)
		for _, d := range []string{"20250301", "20250228"} {
			if r := do(t, bd.ArchiveAndClear(d, 3, time.Hour)); r != (Reset{Version: v}) {
				t.Fatalf("ArchiveAndClear(%s) again = %+v; want not done", d, r)
			}
		}
		wantBoard(t, bd, e("new", 5, 1))
		wantEntries(t, "Archive after retry", do(t, bd.Archive("20250301")).Entries, e("p3", 1100, 1), e("p1", 1000, 2), e("p2", 950, 3))
		if a := do(t, bd.Archive("20250228")); a.Found {
			t.Fatal("a refused reset wrote an archive")
		}

		// Every byte of a uid survives; the JSON is the documented format.
		do(t, bd.MUpdate(map[string]float64{`q"\` + "\n\x00": 1, "й": 0.1, "x": -2.5}))
		do(t, bd.ArchiveAndClear("20250302", 10, time.Hour))
		wantEntries(t, "Archive", do(t, bd.Archive("20250302")).Entries,
			e("new", 5, 1), e(`q"\`+"\n\x00", 1, 2), e("й", 0.1, 3), e("x", -2.5, 4))

		// top == 0: clear without an archive, once per date.
		do(t, bd.Update("p", 1, ModeSet))
		if r := do(t, bd.ArchiveAndClear("20250303", 0, 0)); !r.Done || r.Archived != 0 || r.Cleared != 1 {
			t.Fatalf("ArchiveAndClear(top 0) = %+v", r)
		}
		if a := do(t, bd.Archive("20250303")); a.Found {
			t.Fatal("top 0 wrote an archive")
		}
		do(t, bd.Update("p", 1, ModeSet))
		if r := do(t, bd.ArchiveAndClear("20250303", 0, 0)); r.Done {
			t.Fatalf("ArchiveAndClear(top 0) again = %+v", r)
		}
		// An empty board archives [] (and still counts as reset).
		bd2 := board(t, b, "empty", Options{})
		if r := do(t, bd2.ArchiveAndClear("20250301", 10, time.Hour)); r != (Reset{Done: true}) {
			t.Fatalf("ArchiveAndClear(empty) = %+v", r)
		}
		if a := do(t, bd2.Archive("20250301")); !a.Found || len(a.Entries) != 0 {
			t.Fatalf("Archive(empty) = %+v", a)
		}
	})

	t.Run("ArchiveExpires", func(t *testing.T) {
		b := h.backend(t)
		bd := board(t, b, "ttl", Options{})
		do(t, bd.Update("a", 1, ModeSet))
		do(t, bd.ArchiveAndClear("20250101", 10, time.Minute))
		if ttl := h.archiveTTL(t, b, "ttl", "20250101"); ttl <= 50*time.Second || ttl > time.Minute {
			t.Fatalf("archive TTL %v; want about 1m", ttl)
		}
		if h.advance == nil {
			return
		}
		h.advance(time.Minute - time.Millisecond)
		if a := do(t, bd.Archive("20250101")); !a.Found {
			t.Fatal("archive expired early")
		}
		h.advance(time.Millisecond)
		if a := do(t, bd.Archive("20250101")); a.Found {
			t.Fatal("archive did not expire")
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		b := h.backend(t)
		for _, c := range []struct {
			name string
			o    Options
		}{{"", Options{}}, {"}x", Options{}}, {"x", Options{MaxMembers: -1}}, {"x", Options{Ties: 7}}} {
			if _, err := b.Board(c.name, c.o); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Board(%q, %+v) = %v; want ErrInvalid", c.name, c.o, err)
			}
		}
		bd := board(t, b, "bad", Options{})
		do(t, bd.Update("a", 1, ModeSet))
		nan, inf := math.NaN(), math.Inf(1)
		for _, x := range []float64{nan, inf, -inf} {
			fails(t, bd.Update("a", x, ModeSet), ErrInvalid)
			fails(t, bd.MUpdate(map[string]float64{"a": 1, "b": x}), ErrInvalid)
			fails(t, bd.Incr("a", x), ErrInvalid)
			fails(t, bd.Swap("a", "b", &Expect{A: x, B: 1}), ErrInvalid)
			fails(t, bd.Swap("a", "b", &Expect{A: 1, B: x}), ErrInvalid)
		}
		fails(t, bd.Update("a", 1, Mode(9)), ErrInvalid)
		fails(t, bd.Update("", 1, ModeSet), ErrInvalid)
		fails(t, bd.MUpdate(map[string]float64{"": 1}), ErrInvalid)
		fails(t, bd.Incr("", 1), ErrInvalid)
		fails(t, bd.Remove(""), ErrInvalid)
		fails(t, bd.Position(""), ErrInvalid)
		fails(t, bd.Score(""), ErrInvalid)
		fails(t, bd.Around("", 1), ErrInvalid)
		fails(t, bd.Swap("", "a", nil), ErrInvalid)
		fails(t, bd.Swap("a", "", nil), ErrInvalid)
		fails(t, bd.Swap("a", "a", nil), ErrInvalid)
		for _, n := range []int{0, -1} {
			fails(t, bd.Top(n), ErrInvalid)
			fails(t, bd.Around("a", n), ErrInvalid)
		}
		for _, r := range [][2]int{{0, 1}, {-1, 3}, {3, 2}} {
			fails(t, bd.Range(r[0], r[1]), ErrInvalid)
			fails(t, bd.Snapshot(r[0], r[1]), ErrInvalid)
		}
		fails(t, bd.RangeByScore(2, 1), ErrInvalid)
		fails(t, bd.RangeByScore(nan, 1), ErrInvalid)
		fails(t, bd.RangeByScore(1, nan), ErrInvalid)
		for _, d := range []string{"", "2025011", "202501011", "2025-1-1", "20251301", "20250230", "abcdefgh"} {
			fails(t, bd.ArchiveAndClear(d, 1, time.Hour), ErrInvalid)
			fails(t, bd.Archive(d), ErrInvalid)
		}
		fails(t, bd.ArchiveAndClear("20250101", -1, time.Hour), ErrInvalid)
		fails(t, bd.ArchiveAndClear("20250101", 1, 0), ErrInvalid)
		fails(t, bd.ArchiveAndClear("20250101", 1, time.Microsecond), ErrInvalid)
		err := fails(t, bd.Update("a", nan, ModeSet), ErrInvalid)
		if !strings.Contains(err.Error(), `rank: update "bad"`) || !strings.Contains(err.Error(), "NaN") {
			t.Fatalf("error %q does not name the operation, board and value", err)
		}
		// Nothing above changed the board.
		wantBoard(t, bd, e("a", 1, 1))
		if v := version(t, bd); v != 1 {
			t.Fatalf("Version = %d after refused writes; want 1", v)
		}
	})

	t.Run("LargeRanges", func(t *testing.T) {
		bd := open(t, Options{})
		scores := make(map[string]float64)
		var want []Entry
		for i := range 300 {
			uid := fmt.Sprintf("u%03d", i)
			scores[uid] = float64(i / 3) // ties in threes, uid order
		}
		do(t, bd.MUpdate(scores))
		for i := range 300 {
			s := 99 - i/3
			want = append(want, e(fmt.Sprintf("u%03d", s*3+i%3), float64(s), i+1))
		}
		wantEntries(t, "Top(1000)", do(t, bd.Top(1000)), want...)
		wantEntries(t, "Range(100,200)", do(t, bd.Range(100, 200)), want[99:200]...)
		wantEntries(t, "RangeByScore(10,20)", do(t, bd.RangeByScore(10, 20)), want[237:270]...)
		a := do(t, bd.Around(want[150].UID, 10))
		wantEntries(t, "Around.Above", a.Above, want[140:150]...)
		wantEntries(t, "Around.Below", a.Below, want[151:161]...)
		if do(t, bd.Position(want[299].UID)) != 300 {
			t.Fatal("Position of the last")
		}
		// Huge counts and ranks are clipped to the board.
		wantEntries(t, "Top(MaxInt)", do(t, bd.Top(math.MaxInt)), want...)
		wantEntries(t, "Range(298, MaxInt)", do(t, bd.Range(298, math.MaxInt)), want[297:]...)
		wantEntries(t, "Range(MaxInt, MaxInt)", do(t, bd.Range(math.MaxInt, math.MaxInt)))
		if s := do(t, bd.Snapshot(math.MaxInt-1, math.MaxInt)); len(s.Entries) != 0 || s.Count != 300 {
			t.Fatalf("Snapshot past the end = %+v", s)
		}
		a = do(t, bd.Around(want[5].UID, math.MaxInt))
		wantEntries(t, "Around(MaxInt).Above", a.Above, want[:5]...)
		wantEntries(t, "Around(MaxInt).Below", a.Below, want[6:]...)
	})
}

// TestMemory runs the conformance suite on the memory backend.
func TestMemory(t *testing.T) {
	var clock *testclock.Clock
	runConformance(t, harness{
		backend: func(t *testing.T) Backend {
			clock = testclock.New()
			return NewMemory(clock.Now)
		},
		advance: func(d time.Duration) { clock.Advance(d) },
		archiveTTL: func(t *testing.T, b Backend, name, date string) time.Duration {
			bd := b.(*Memory).boards[name]
			bd.mu.RLock()
			defer bd.mu.RUnlock()
			return bd.archives[date].expires.Sub(clock.Now())
		},
	})
}
