package rank

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// A write a worker made, with what it returned.
type logged struct {
	kind    string // "swap", "vswap" (versioned) or "max" (a ModeMax update)
	a, b    string // the members (a only for "max")
	score   float64
	expect  *Expect
	readAt  int64 // vswap: the version of the snapshot the expectation came from
	refused bool  // vswap: ErrVersionConflict
	upd     Updated
	swp     Swapped
}

func (l *logged) version() int64 {
	if l.kind == "max" {
		return l.upd.Version
	}
	return l.swp.Version
}

func (l *logged) changed() bool {
	if l.kind == "max" {
		return l.upd.Changed
	}
	return !l.refused && l.swp.Changed
}

func (l *logged) touches(uid string) bool { return l.a == uid || l.b == uid }

// runConcurrent has workers swap random pairs (plain and versioned) and
// apply ModeMax updates while a reader takes snapshots, then checks the run
// against a sequential replay. Every change takes the next version, so the
// versions order the writes: replayed in that order on a fresh memory board
// (and on a plain multiset of scores) they must give the same results, and
// every snapshot must equal the replay at its version. That proves:
// swaps never insert, remove or alter a score (the multiset changes only by
// the updates), no two members ever share a position, and a versioned swap
// applied only where the replay finds the expected scores (never over a
// concurrent change); a refused one was refused only after a write to one
// of its members.
func runConcurrent(t *testing.T, bd Board, workers, ops int) {
	const members = 40
	uids := make([]string, members)
	initial := make(map[string]float64)
	for i := range uids {
		uids[i] = fmt.Sprintf("m%02d", i)
		initial[uids[i]] = float64(i / 4) // ties in fours
	}
	start := do(t, bd.MUpdate(initial))
	if start.Version != 1 {
		t.Fatalf("initial MUpdate version %d; want 1 on a fresh board", start.Version)
	}

	ctx := t.Context()
	var (
		wg, rwg   sync.WaitGroup
		done      = make(chan struct{})
		snaps     []Snapshot
		readerErr error
		logs      = make([][]logged, workers)
		errs      = make([]error, workers)
	)
	rwg.Add(1)
	go func() { // the reader
		defer rwg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			s, err := bd.Snapshot(1, members+10).Do(ctx)
			if err != nil {
				readerErr = err
				return
			}
			snaps = append(snaps, s)
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			pair := func() (string, string) {
				i, j := rng.IntN(members), rng.IntN(members-1)
				if j >= i {
					j++
				}
				return uids[i], uids[j]
			}
			for i := range ops {
				var l logged
				var err error
				switch r := rng.IntN(10); {
				case r < 4:
					l.kind = "swap"
					l.a, l.b = pair()
					l.swp, err = bd.Swap(l.a, l.b, nil).Do(ctx)
				case r < 7:
					l.kind = "vswap"
					var s Snapshot
					if s, err = bd.Snapshot(1, members).Do(ctx); err != nil {
						break
					}
					x, y := rng.IntN(members), rng.IntN(members-1)
					if y >= x {
						y++
					}
					ea, eb := s.Entries[x], s.Entries[y]
					l.a, l.b, l.readAt = ea.UID, eb.UID, s.Version
					l.expect = &Expect{A: ea.Score, B: eb.Score}
					l.swp, err = bd.Swap(l.a, l.b, l.expect).Do(ctx)
					if errors.Is(err, ErrVersionConflict) {
						l.refused, err = true, nil
					}
				default:
					l.kind = "max"
					l.a = uids[rng.IntN(members)]
					l.score = float64(rng.IntN(5) + i/8)
					l.upd, err = bd.Update(l.a, l.score, ModeMax).Do(ctx)
				}
				if err != nil {
					errs[w] = fmt.Errorf("%s %s %s: %w", l.kind, l.a, l.b, err)
					return
				}
				logs[w] = append(logs[w], l)
			}
		}()
	}
	wg.Wait()
	close(done)
	rwg.Wait()
	if err := errors.Join(append(errs, readerErr)...); err != nil {
		t.Fatal(err)
	}
	final := do(t, bd.Snapshot(1, members+10))
	snaps = append(snaps, final)

	// Index the writes by version.
	var all []*logged
	for w := range logs {
		for i := range logs[w] {
			all = append(all, &logs[w][i])
		}
	}
	byVersion := map[int64]*logged{}
	unchanged := map[int64][]*logged{}
	applied, refusals := 0, 0
	for _, l := range all {
		switch {
		case l.refused:
			refusals++
		case l.changed():
			if prev := byVersion[l.version()]; prev != nil {
				t.Fatalf("two writes returned version %d: %+v and %+v", l.version(), *prev, *l)
			}
			byVersion[l.version()] = l
			if l.kind == "vswap" {
				applied++
			}
		default:
			unchanged[l.version()] = append(unchanged[l.version()], l)
		}
	}
	if int64(len(byVersion)) != final.Version-1 {
		t.Fatalf("%d changing writes but the version went from 1 to %d", len(byVersion), final.Version)
	}
	snapsAt := map[int64][]Snapshot{}
	for _, s := range snaps {
		checkSnapshot(t, s, members)
		snapsAt[s.Version] = append(snapsAt[s.Version], s)
	}

	// Replay.
	model := board(t, NewMemory(nil), "model", Options{})
	do(t, model.MUpdate(initial))
	multiset := map[float64]int{}
	for _, s := range initial {
		multiset[s]++
	}
	check := func(v int64) {
		t.Helper()
		want := do(t, model.Snapshot(1, members+10))
		for _, s := range snapsAt[v] {
			if !slices.Equal(s.Entries, want.Entries) {
				t.Fatalf("snapshot at version %d:\n got  %v\n want %v", v, s.Entries, want.Entries)
			}
			got := map[float64]int{}
			for _, e := range s.Entries {
				got[e.Score]++
			}
			if fmt.Sprint(got) != fmt.Sprint(multiset) {
				t.Fatalf("scores at version %d: %v; the updates so far give %v", v, got, multiset)
			}
		}
		for _, l := range unchanged[v] {
			if l.kind != "max" {
				t.Fatalf("an unchanged %s at version %d: %+v", l.kind, v, *l)
			}
			s := do(t, model.Score(l.a))
			if s.Score < l.score || l.upd.Score != s.Score || l.upd.Previous != s.Score {
				t.Fatalf("max update %+v returned no change at version %d, where %s has %v", *l, v, l.a, s.Score)
			}
		}
	}
	check(1)
	for v := int64(2); v <= final.Version; v++ {
		l := byVersion[v]
		if l == nil {
			t.Fatalf("no write returned version %d", v)
		}
		switch l.kind {
		case "swap", "vswap":
			// Checked here, not only by the model's Swap: the model is the
			// memory backend, which may be the backend under test.
			sa, sb := do(t, model.Score(l.a)), do(t, model.Score(l.b))
			if !sa.Found || !sb.Found || l.expect != nil && (sa.Score != l.expect.A || sb.Score != l.expect.B) {
				t.Fatalf("version %d: %s(%s, %s, %+v) applied where the scores were %v and %v", v, l.kind, l.a, l.b, l.expect, sa, sb)
			}
			if l.swp.ScoreA != sb.Score || l.swp.ScoreB != sa.Score {
				t.Fatalf("version %d: %s(%s, %s) returned %+v; the scores were %v and %v", v, l.kind, l.a, l.b, l.swp, sa.Score, sb.Score)
			}
			got, err := model.Swap(l.a, l.b, l.expect).Do(ctx)
			if err != nil {
				t.Fatalf("version %d: %s(%s, %s, %+v) applied, but the replay says %v", v, l.kind, l.a, l.b, l.expect, err)
			}
			if got != l.swp {
				t.Fatalf("version %d: %s returned %+v; the replay %+v", v, l.kind, l.swp, got)
			}
		case "max":
			got := do(t, model.Update(l.a, l.score, ModeMax))
			if got != l.upd {
				t.Fatalf("version %d: max update returned %+v; the replay %+v", v, l.upd, got)
			}
			multiset[l.upd.Previous]--
			if multiset[l.upd.Previous] == 0 {
				delete(multiset, l.upd.Previous)
			}
			multiset[l.upd.Score]++
		}
		check(v)
	}
	// A refusal needs a write to a or b after the expectation was read.
	for _, l := range all {
		if !l.refused {
			continue
		}
		legit := false
		for v := l.readAt + 1; v <= final.Version && !legit; v++ {
			legit = byVersion[v].touches(l.a) || byVersion[v].touches(l.b)
		}
		if !legit {
			t.Fatalf("versioned swap %+v refused, but nothing wrote %s or %s after version %d", *l, l.a, l.b, l.readAt)
		}
	}
	t.Logf("%d writes (%d versioned swaps applied, %d refused), %d snapshots, final version %d",
		len(all), applied, refusals, len(snaps), final.Version)
	if applied == 0 || len(snaps) < 2 {
		t.Fatalf("the run exercised too little: %d versioned swaps applied, %d snapshots", applied, len(snaps))
	}
}

// checkSnapshot checks that a snapshot is a ranking: all members, ranks
// 1..n each once, distinct uids, scores not increasing.
func checkSnapshot(t *testing.T, s Snapshot, members int) {
	t.Helper()
	if s.Count != members || len(s.Entries) != members {
		t.Fatalf("snapshot at version %d has count %d and %d entries; want %d", s.Version, s.Count, len(s.Entries), members)
	}
	seen := map[string]bool{}
	for i, e := range s.Entries {
		if e.Rank != i+1 || seen[e.UID] || (i > 0 && e.Score > s.Entries[i-1].Score) {
			t.Fatalf("snapshot at version %d is not a ranking at %d: %v", s.Version, i, s.Entries)
		}
		seen[e.UID] = true
	}
}

func TestConcurrentMemory(t *testing.T) {
	runConcurrent(t, board(t, NewMemory(nil), "c", Options{}), 8, 2000)
}

func TestConcurrentRedis(t *testing.T) {
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			runConcurrent(t, board(t, NewRedis(c, testredis.Prefix(t)), "c", Options{}), 6, 250)
		})
	}
}

// runResetRace has writers add members (each uid once) while the board is
// reset: every member written before the reset's version is in the
// archive with its score, every later one is on the board — no update is
// lost between the archive and the clear.
func runResetRace(t *testing.T, bd Board, writers, each int) {
	ctx := t.Context()
	type write struct {
		uid     string
		score   float64
		version int64
	}
	var (
		wg     sync.WaitGroup
		writes = make([][]write, writers)
		errs   = make([]error, writers)
		reset  Reset
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if w == 0 && i == each/2 { // the others keep writing
					var err error
					if reset, err = bd.ArchiveAndClear("20250101", writers*each, time.Hour).Do(ctx); err != nil {
						errs[w] = err
						return
					}
				}
				uid := fmt.Sprintf("w%d-%d", w, i)
				score := float64((w*each + i) % 97)
				u, err := bd.Update(uid, score, ModeSet).Do(ctx)
				if err != nil {
					errs[w] = err
					return
				}
				writes[w] = append(writes[w], write{uid, score, u.Version})
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if !reset.Done {
		t.Fatalf("reset = %+v", reset)
	}
	archived := map[string]float64{}
	for _, e := range do(t, bd.Archive("20250101")).Entries {
		archived[e.UID] = e.Score
	}
	board := map[string]float64{}
	for _, e := range do(t, bd.Top(writers*each)) {
		board[e.UID] = e.Score
	}
	before := 0
	for _, ws := range writes {
		for _, w := range ws {
			where, other := board, archived
			if w.version < reset.Version {
				where, other = archived, board
				before++
			}
			if s, ok := where[w.uid]; !ok || s != w.score {
				t.Fatalf("%s (version %d, reset at %d) missing or wrong: %v, %v", w.uid, w.version, reset.Version, s, ok)
			}
			if _, ok := other[w.uid]; ok {
				t.Fatalf("%s (version %d, reset at %d) on both sides", w.uid, w.version, reset.Version)
			}
		}
	}
	if len(archived) != before || reset.Archived != before || reset.Cleared != before || len(board)+before != writers*each {
		t.Fatalf("archive %d, board %d, %d writes before the reset; reset %+v", len(archived), len(board), before, reset)
	}
}

func TestResetRaceMemory(t *testing.T) {
	runResetRace(t, board(t, NewMemory(nil), "r", Options{}), 4, 2000)
}

func TestResetRaceRedis(t *testing.T) {
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			runResetRace(t, board(t, NewRedis(c, testredis.Prefix(t)), "r", Options{}), 4, 150)
		})
	}
}
