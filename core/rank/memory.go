package rank

import (
	"math"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Memory is an in-process Backend with the same semantics as Redis (the
// conformance suite runs on both): the same tie contract, versions,
// MaxMembers rule, archive format and reset idempotence. Each board is an
// order-statistic B+tree with a uid index (btree.go: rank, rank lookups
// and updates in O(log n), reading a few cache lines per level), kept in
// pointer-free memory the collector does not scan (region.go), guarded by
// the board's read-write mutex, so operations on different boards never
// contend and reads of one board run in parallel. Its operations are
// store.Local: they run when the Op runs, on the caller's goroutine, and
// never wait on I/O. It starts no goroutine. Boards live as long as the
// Memory (an empty board keeps its version); their mapped memory goes back
// on Clear, on a reset, and when the Memory is collected. Archive expiry
// reads the injected clock.
type Memory struct {
	now func() time.Time

	mu     sync.Mutex
	boards map[string]*memBoard
}

var _ Backend = (*Memory)(nil)

// NewMemory returns an empty in-process backend that reads the time (for
// archive TTLs only) from now (time.Now when nil). It never fails.
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, boards: make(map[string]*memBoard)}
}

type memBoard struct {
	mu       sync.RWMutex
	list     *tree
	ties     Ties // the policy of the members on the board
	version  int64
	seq      uint64 // last reach sequence number given
	reset    string // date of the last ArchiveAndClear ("" never)
	archives map[string]memArchive
}

type memArchive struct {
	data    string
	expires time.Time
}

// Board returns a handle on name; handles of one name share the board.
// Errors: ErrInvalid.
func (m *Memory) Board(name string, o Options) (Board, error) {
	o, err := resolve(name, o)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	b := m.boards[name]
	if b == nil {
		b = &memBoard{list: newTree(o.Ties == TiesUID), ties: o.Ties, archives: make(map[string]memArchive)}
		m.boards[name] = b
	}
	m.mu.Unlock()
	return &memHandle{m: m, b: b, name: name, o: o}, nil
}

type memHandle struct {
	m    *Memory
	b    *memBoard
	name string
	o    Options
}

func (h *memHandle) Name() string     { return h.name }
func (h *memHandle) Options() Options { return h.o }

// write returns an Op running fn(b, h, a) under the board's write lock
// after the tie-policy check. fn gets the operation's arguments as a
// instead of capturing them: with fn a func literal that captures nothing
// (a static function), building the Op is one allocation, the Op with its
// writeOp. Every byte allocated per call counts here: with the boards'
// large heap, each GC cycle marks all of it.
func write[T, A any](h *memHandle, op string, a A, fn func(*memBoard, *memHandle, A) (T, error)) *store.Op[T] {
	return store.LocalRun[T](writeOp[T, A]{h, op, a, fn})
}

type writeOp[T, A any] struct {
	h  *memHandle
	op string
	a  A
	fn func(*memBoard, *memHandle, A) (T, error)
}

func (w writeOp[T, A]) Run() (T, error) {
	b := w.h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.adopt(w.op, w.h.name, w.h.o.Ties); err != nil {
		var zero T
		return zero, err
	}
	return w.fn(b, w.h, w.a)
}

// read returns an Op running fn(b, a) under the board's read lock; a and
// fn as for write.
func read[T, A any](h *memHandle, a A, fn func(*memBoard, A) T) *store.Op[T] {
	return store.LocalRun[T](readOp[T, A]{h, a, fn})
}

type readOp[T, A any] struct {
	h  *memHandle
	a  A
	fn func(*memBoard, A) T
}

func (r readOp[T, A]) Run() (T, error) {
	b := r.h.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	return r.fn(b, r.a), nil
}

// adopt checks that a write through a handle with policy t may touch the
// board: an empty board takes the policy, a non-empty one must have it.
func (b *memBoard) adopt(op, name string, t Ties) error {
	if b.ties == t {
		return nil
	}
	if b.list.length > 0 {
		return invalid(op, name, "the board orders ties by %v, this handle by %v", b.ties, t)
	}
	b.ties = t
	b.list.release()
	b.list = newTree(t == TiesUID)
	return nil
}

// admit reports whether a newcomer with score ranks before the last
// member of a board full under max.
func (b *memBoard) admit(uid string, score float64, max int) bool {
	if max <= 0 || b.list.length < max {
		return true
	}
	last := b.list.last()
	return !b.list.entryBefore(last.l, last.i, key{score, b.seq + 1}, uid)
}

// set applies one update of uid and reports whether it changed the board.
// It finds the member and the new key's place in one step (findPlace); a
// changed score takes a new reach (under TiesReach).
func (b *memBoard) set(uid string, score float64, mode Mode, max int) (u Updated) {
	k := key{score, b.seq + 1}
	var p place
	if id, ok := b.list.findPlace(uid, &p, k); ok {
		old := b.list.member(id).score
		u = Updated{Ranked: true, Score: old, Existed: true, Previous: old}
		if score == old || mode == ModeMax && score < old || mode == ModeMin && score > old {
			return u
		}
		b.seq++
		b.list.moveTo(id, k, &p)
		u.Changed, u.Score = true, score
		return u
	}
	if !b.admit(uid, score, max) {
		return u
	}
	b.seq++
	b.list.addAt(uid, k, &p)
	// Evict from the bottom down to max.
	for max > 0 && b.list.length > max {
		b.list.delete(b.list.last().id())
	}
	return Updated{Changed: true, Ranked: true, Score: score}
}

func (b *memBoard) bump(changed bool) int64 {
	if changed {
		b.version++
	}
	return b.version
}

// Update sets uid's score according to mode. Errors: ErrInvalid.
func (h *memHandle) Update(uid string, score float64, mode Mode) *store.Op[Updated] {
	if err := checkUpdate(h.name, uid, score, mode); err != nil {
		return store.Failed[Updated](err)
	}
	a := updateArgs{uid, normZero(score), mode}
	return write(h, "update", a, func(b *memBoard, h *memHandle, a updateArgs) (Updated, error) {
		u := b.set(a.uid, a.score, a.mode, h.o.MaxMembers)
		u.Version = b.bump(u.Changed)
		return u, nil
	})
}

type updateArgs struct {
	uid   string
	score float64
	mode  Mode
}

// MUpdate sets every score in one step. Errors: ErrInvalid.
func (h *memHandle) MUpdate(scores map[string]float64) *store.Op[Written] {
	uids, err := checkMUpdate(h.name, scores)
	if err != nil {
		return store.Failed[Written](err)
	}
	a := mupdateArgs{uids, scores}
	return write(h, "mupdate", a, func(b *memBoard, h *memHandle, a mupdateArgs) (Written, error) {
		var w Written
		for _, uid := range a.uids {
			if b.set(uid, normZero(a.scores[uid]), ModeSet, h.o.MaxMembers).Changed {
				w.Changed++
			}
		}
		w.Version = b.bump(w.Changed > 0)
		return w, nil
	})
}

type mupdateArgs struct {
	uids   []string // sorted
	scores map[string]float64
}

// Incr adds delta to uid's score. Errors: ErrInvalid.
func (h *memHandle) Incr(uid string, delta float64) *store.Op[Updated] {
	if err := checkIncr(h.name, uid, delta); err != nil {
		return store.Failed[Updated](err)
	}
	a := incrArgs{uid, delta}
	return write(h, "incr", a, func(b *memBoard, h *memHandle, a incrArgs) (Updated, error) {
		var prev float64
		if id, ok := b.list.find(a.uid); ok {
			prev = b.list.member(id).score
		}
		score := normZero(prev + a.delta)
		if !finite(score) {
			return Updated{}, invalid("incr", h.name, "%v + %v overflows", prev, a.delta)
		}
		u := b.set(a.uid, score, ModeSet, h.o.MaxMembers)
		u.Version = b.bump(u.Changed)
		return u, nil
	})
}

type incrArgs struct {
	uid   string
	delta float64
}

// Remove deletes uid. Errors: ErrInvalid.
func (h *memHandle) Remove(uid string) *store.Op[Written] {
	if err := checkUID("remove", h.name, "uid", uid); err != nil {
		return store.Failed[Written](err)
	}
	return write(h, "remove", uid, func(b *memBoard, _ *memHandle, uid string) (Written, error) {
		var w Written
		if id, ok := b.list.find(uid); ok {
			b.list.delete(id)
			w.Changed = 1
		}
		w.Version = b.bump(w.Changed > 0)
		return w, nil
	})
}

// Clear deletes every member.
func (h *memHandle) Clear() *store.Op[Written] {
	return store.Local(func() (Written, error) {
		b := h.b
		b.mu.Lock()
		defer b.mu.Unlock()
		w := Written{Changed: b.clear()}
		w.Version = b.bump(w.Changed > 0)
		return w, nil
	})
}

// clear empties the board and returns how many members it had. A board
// emptied member by member still holds its peak memory (its arrays never
// shrink), so a grown tree is replaced even when it is empty.
func (b *memBoard) clear() int {
	n := b.list.length
	if n > 0 || b.list.grown() {
		b.list.release()
		b.list = newTree(b.ties == TiesUID)
	}
	return n
}

// Swap exchanges the places of a and b. Errors: ErrNotFound,
// ErrVersionConflict, ErrInvalid.
func (h *memHandle) Swap(a, b string, expect *Expect) *store.Op[Swapped] {
	if err := checkSwap(h.name, a, b, expect); err != nil {
		return store.Failed[Swapped](err)
	}
	args := swapArgs{a: a, b: b, expect: expect != nil}
	if expect != nil {
		args.e = *expect
	}
	return write(h, "swap", args, func(bd *memBoard, h *memHandle, x swapArgs) (Swapped, error) {
		t := bd.list
		ia, okA := t.find(x.a)
		ib, okB := t.find(x.b)
		if !okA || !okB {
			return Swapped{}, opErr("swap", h.name, ErrNotFound)
		}
		sa, sb := t.member(ia).score, t.member(ib).score
		if x.expect && (sa != x.e.A || sb != x.e.B) {
			return Swapped{}, opErr("swap", h.name, ErrVersionConflict)
		}
		s := Swapped{ScoreA: sb, ScoreB: sa, Changed: true}
		switch {
		case bd.ties == TiesReach:
			// The entries keep their places and keys; the members change
			// places.
			t.exchange(ia, ib)
		case sa == sb:
			s.Changed = false
		default:
			// Under TiesUID a key is the score with the uid: each takes
			// the other's score (distinct uids never collide).
			ka, kb := t.keyOf(ia), t.keyOf(ib)
			t.move(ia, key{kb.score, ka.seq})
			t.move(ib, key{ka.score, kb.seq})
		}
		s.Version = bd.bump(s.Changed)
		return s, nil
	})
}

type swapArgs struct {
	a, b   string
	expect bool // e holds the expected scores
	e      Expect
}

// Position returns uid's rank, 0 when absent. Errors: ErrInvalid.
func (h *memHandle) Position(uid string) *store.Op[int] {
	if err := checkUID("position", h.name, "uid", uid); err != nil {
		return store.Failed[int](err)
	}
	return read(h, uid, func(b *memBoard, uid string) int {
		if id, ok := b.list.find(uid); ok {
			return b.list.rank(id)
		}
		return 0
	})
}

// Score returns uid's score. Errors: ErrInvalid.
func (h *memHandle) Score(uid string) *store.Op[Scored] {
	if err := checkUID("score", h.name, "uid", uid); err != nil {
		return store.Failed[Scored](err)
	}
	return read(h, uid, func(b *memBoard, uid string) Scored {
		if id, ok := b.list.find(uid); ok {
			return Scored{Score: b.list.member(id).score, Found: true}
		}
		return Scored{}
	})
}

// Top returns the first n entries. Errors: ErrInvalid.
func (h *memHandle) Top(n int) *store.Op[[]Entry] {
	if err := checkN("top", h.name, n); err != nil {
		return store.Failed[[]Entry](err)
	}
	return read(h, span{1, n}, (*memBoard).rangeOf)
}

// Range returns the entries ranked start..stop. Errors: ErrInvalid.
func (h *memHandle) Range(start, stop int) *store.Op[[]Entry] {
	if err := checkRange("range", h.name, start, stop); err != nil {
		return store.Failed[[]Entry](err)
	}
	return read(h, span{start, stop}, (*memBoard).rangeOf)
}

// span is a range of ranks, both included.
type span struct{ start, stop int }

func (b *memBoard) rangeOf(s span) []Entry {
	start, stop := s.start, s.stop
	if start > b.list.length {
		return []Entry{}
	}
	n := min(stop, b.list.length) - start + 1
	return b.list.run(b.list.at(start), start, n, math.Inf(-1), n)
}

// RangeByScore returns the entries with min <= score <= max. Errors:
// ErrInvalid.
func (h *memHandle) RangeByScore(min, max float64) *store.Op[[]Entry] {
	if err := checkScoreRange(h.name, min, max); err != nil {
		return store.Failed[[]Entry](err)
	}
	a := scoreSpan{min, max, h.o.rangeLimit()}
	return read(h, a, func(b *memBoard, a scoreSpan) []Entry {
		c, r := b.list.firstAtMost(a.max)
		return b.list.run(c, r, a.limit, a.min, 0)
	})
}

type scoreSpan struct {
	min, max float64
	limit    int
}

// Around returns uid's entry and up to n on each side. Errors: ErrInvalid.
func (h *memHandle) Around(uid string, n int) *store.Op[Around] {
	if err := checkUID("around", h.name, "uid", uid); err != nil {
		return store.Failed[Around](err)
	}
	if err := checkN("around", h.name, n); err != nil {
		return store.Failed[Around](err)
	}
	return read(h, aroundArgs{uid, n}, (*memBoard).around)
}

type aroundArgs struct {
	uid string
	n   int
}

func (b *memBoard) around(x aroundArgs) Around {
	id, ok := b.list.find(x.uid)
	if !ok {
		return Around{}
	}
	c := b.list.cursorOf(id)
	r := b.list.rankAt(c.l, c.i)
	above, below := min(x.n, r-1), min(x.n, b.list.length-r)
	for range above {
		c = c.prev()
	}
	// One array for both sides and the target, Above capped at its length
	// so that an append to it cannot overwrite the target.
	n := above + 1 + below
	all := b.list.run(c, r-above, n, math.Inf(-1), n)
	return Around{Above: all[:above:above], Target: all[above], Below: all[above+1:], Found: true}
}

// Count returns the number of members.
func (h *memHandle) Count() *store.Op[int] {
	return read(h, struct{}{}, func(b *memBoard, _ struct{}) int { return b.list.length })
}

// Version returns the board version.
func (h *memHandle) Version() *store.Op[int64] {
	return read(h, struct{}{}, func(b *memBoard, _ struct{}) int64 { return b.version })
}

// Snapshot returns a range with the count and version. Errors: ErrInvalid.
func (h *memHandle) Snapshot(start, stop int) *store.Op[Snapshot] {
	if err := checkRange("snapshot", h.name, start, stop); err != nil {
		return store.Failed[Snapshot](err)
	}
	return read(h, span{start, stop}, func(b *memBoard, s span) Snapshot {
		return Snapshot{Entries: b.rangeOf(s), Count: b.list.length, Version: b.version}
	})
}

// ArchiveAndClear archives the top and clears the board in one step.
// Errors: ErrInvalid.
func (h *memHandle) ArchiveAndClear(date string, top int, ttl time.Duration) *store.Op[Reset] {
	if err := checkReset("archive_and_clear", h.name, date, top, ttl); err != nil {
		return store.Failed[Reset](err)
	}
	x := resetArgs{date, top, ttl}
	return write(h, "archive_and_clear", x, func(b *memBoard, h *memHandle, x resetArgs) (Reset, error) {
		now := h.m.now()
		for d, a := range b.archives {
			if !now.Before(a.expires) {
				delete(b.archives, d)
			}
		}
		if _, exists := b.archives[x.date]; exists || b.reset >= x.date {
			return Reset{Version: b.version}, nil
		}
		r := Reset{Done: true}
		if x.top > 0 {
			entries := b.rangeOf(span{1, x.top})
			b.archives[x.date] = memArchive{data: encodeArchive(entries), expires: now.Add(x.ttl.Truncate(time.Millisecond))}
			r.Archived = len(entries)
		}
		r.Cleared = b.clear()
		b.reset = x.date
		r.Version = b.bump(r.Cleared > 0)
		return r, nil
	})
}

type resetArgs struct {
	date string
	top  int
	ttl  time.Duration
}

// Archive reads the archive of date. Errors: ErrInvalid, store.ErrReply.
func (h *memHandle) Archive(date string) *store.Op[Archived] {
	if err := checkDate("archive", h.name, date); err != nil {
		return store.Failed[Archived](err)
	}
	return store.Local(func() (Archived, error) {
		b := h.b
		b.mu.RLock()
		a, ok := b.archives[date]
		b.mu.RUnlock()
		if !ok || !h.m.now().Before(a.expires) {
			return Archived{}, nil
		}
		entries, err := decodeArchive(`rank: archive "`+h.name+`"`, []byte(a.data))
		return Archived{Entries: entries, Found: true}, err
	})
}
