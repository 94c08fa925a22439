package bindings

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/rank"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// shield.rank: leaderboards on core/rank (docs/rank.md). This file checks
// arguments and converts values; rank.Resets holds the periodic resets.

const rankType = "shield.rank"

// Ranks backs shield.rank: the leaderboard backend, the rank config and the
// reset tasks this process registered. One per Module, shared by its
// runtimes.
type Ranks struct {
	Backend rank.Backend
	// MaxMembers is the default of the max_members option (rank.max_members).
	MaxMembers int
	// Archive is the default of the archive option of a reset
	// (rank.reset.enabled).
	Archive bool
	// ArchiveTTL is how long a reset's archive is kept (rank.reset.archive_ttl).
	ArchiveTTL time.Duration
	// Scheduler registers periodic resets; nil makes shield.rank refuse the
	// reset option.
	Scheduler RankScheduler
	// Log gets one line per reset run (slog.Default when nil).
	Log *slog.Logger

	mu     sync.Mutex
	resets rankResets            // the periodic resets, built at the first
	opened map[string]rank.Board // every board a runtime opened, by name (first open wins)
}

// RankStats are the ops facts of the leaderboards this process opened.
type RankStats struct {
	Boards  int // boards opened (through any runtime)
	Members int // members of those boards, summed
}

// remember records an opened board for Stats.
func (r *Ranks) remember(name string, b rank.Board) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opened == nil {
		r.opened = map[string]rank.Board{}
	}
	if _, ok := r.opened[name]; !ok {
		r.opened[name] = b
	}
}

// Stats counts the boards this process opened and their members: on Redis
// one pipeline of ZCARDs. A board whose count failed is left out of
// Members and its error joined into the returned error.
func (r *Ranks) Stats(ctx context.Context) (RankStats, error) {
	r.mu.Lock()
	ops := make([]*store.Op[int], 0, len(r.opened))
	for _, b := range r.opened {
		ops = append(ops, b.Count())
	}
	r.mu.Unlock()
	counts, failed := store.DoAll(ctx, ops)
	st := RankStats{Boards: len(ops)}
	var errs error
	for i, n := range counts {
		if failed[i] != nil {
			errs = errors.Join(errs, failed[i])
			continue
		}
		st.Members += n
	}
	return st, errs
}

func (r *Ranks) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default()
}

// installRanks registers shield.rank(name [, opts]).
func installRanks(rt *runtime.Runtime, lib *lua.LTable, r *Ranks) {
	L := rt.L
	b := &rankBinding{rt: rt, r: r}
	mt := L.NewTypeMetatable(rankType)
	mt.RawSetString("__name", lua.LString(rankType))
	methods := L.NewTable()
	for _, m := range []struct {
		name string
		fn   lua.LGFunction
	}{
		{"update", b.update}, {"mupdate", b.mupdate}, {"incr", b.incr},
		{"remove", b.remove}, {"clear", b.clear}, {"swap", b.swap},
		{"position", b.position}, {"score", b.score},
		{"top", b.top}, {"range", b.rangeByRank}, {"range_by_score", b.rangeByScore},
		{"around", b.around}, {"count", b.count}, {"version", b.version},
		{"snapshot", b.snapshot}, {"archive", b.archive},
	} {
		methods.RawSetString(m.name, rt.Blocking(m.fn))
	}
	runtime.SetMethods(L, mt, methods)
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		bd := runtime.SelfAs[rank.Board](runtime.ArgsOf(L, rankType, "__tostring"), 1, rankType)
		L.Push(lua.LString(fmt.Sprintf("%s(%q)", rankType, bd.Name())))
		return 1
	}))
	lib.RawSetString("rank", rt.Blocking(b.open))
}

type rankBinding struct {
	rt *runtime.Runtime
	r  *Ranks
}

// ---- shield.rank(name [, opts])

var (
	rankOptions = runtime.NewOptSpec(
		runtime.Opt{Name: "max_members", Kind: runtime.OptWhole, Min: 1, Max: math.MaxInt32},
		runtime.Opt{Name: "ties", Kind: runtime.OptString},
		runtime.Opt{Name: "reset", Kind: runtime.OptString},
		runtime.Opt{Name: "reset_time", Kind: runtime.OptString},
		runtime.Opt{Name: "archive", Kind: runtime.OptBoolean},
		runtime.Opt{Name: "distributed", Kind: runtime.OptBoolean},
	)
	updateOptions = runtime.NewOptSpec(runtime.Opt{Name: "mode", Kind: runtime.OptString})
	swapOptions   = runtime.NewOptSpec(runtime.Opt{Name: "expect", Kind: runtime.OptTable})
)

// maxRankCount bounds every count and rank argument: large enough for any
// board, small enough to stay exact as a Lua number and an int.
const maxRankCount = 1 << 40

func (b *rankBinding) open(L *lua.LState) int {
	a := runtime.ArgsOf(L, "shield", "rank")
	name := a.Name(1, "board name")
	if name[0] == '}' {
		a.Bad(1, "board name must not start with '}'")
	}
	o := rank.Options{MaxMembers: b.r.MaxMembers}
	plan := rank.ResetPlan{Archive: b.r.Archive, Distributed: true}
	var resetOnly []string // reset options given without reset
	a.Options(2, rankOptions, func(key string, v lua.LValue) {
		switch key {
		case "max_members":
			o.MaxMembers = int(v.(lua.LNumber))
		case "ties":
			t, err := rank.ParseTies(v.String())
			if err != nil {
				a.BadOption(2, key, `must be "reach" or "uid", got %q`, v.String())
			}
			o.Ties = t
		case "reset":
			p, ok := rank.ParsePeriod(v.String())
			if !ok {
				a.BadOption(2, key, `must be "daily", "weekly" or "monthly", got %q`, v.String())
			}
			plan.Period = p
		case "reset_time":
			h, m, ok := rank.ParseResetTime(v.String())
			if !ok {
				a.BadOption(2, key, `must be "HH:MM" (UTC, 00:00 to 23:59), got %q`, v.String())
			}
			plan.Hour, plan.Minute = h, m
			resetOnly = append(resetOnly, key)
		case "archive":
			plan.Archive = v == lua.LTrue
			resetOnly = append(resetOnly, key)
		case "distributed":
			plan.Distributed = v == lua.LTrue
			resetOnly = append(resetOnly, key)
		}
	})
	if plan.Period == "" && len(resetOnly) > 0 {
		a.Bad(2, fmt.Sprintf("option %s needs the reset option", strings.Join(resetOnly, ", ")))
	}
	board, err := b.r.Backend.Board(name, o)
	if err != nil {
		a.Bad(1, err.Error())
	}
	b.r.remember(name, board)
	handle := func(L *lua.LState) []lua.LValue {
		ud := L.NewUserData()
		ud.Value = board
		ud.Metatable = L.GetTypeMetatable(rankType)
		return []lua.LValue{ud}
	}
	if plan.Period == "" {
		return runtime.PushAll(L, handle(L))
	}
	// The reset task is registered before shield.rank returns (a blocking
	// call on Redis: one round trip), or shield.rank raises.
	plan.Top = o.MaxMembers
	reg, err := b.r.resetsOf().Begin(board, plan)
	if err != nil {
		runtime.Raise(L, "%s: %s", rankType, err.Error())
	}
	if reg == nil {
		return runtime.PushAll(L, handle(L))
	}
	return runtime.RunOutcome(b.rt, L, rankType, reg, func(L *lua.LState, _ scheduler.Info, err error) ([]lua.LValue, error) {
		b.r.resetsOf().End(name, err == nil)
		if err != nil {
			return nil, fmt.Errorf("registering the reset of %q: %w", name, err)
		}
		return handle(L), nil
	})
}

// describe renders a Lua value for an error message: strings quoted,
// numbers as Lua prints them, other values by type.
func describe(v lua.LValue) string {
	switch v := v.(type) {
	case lua.LString:
		return fmt.Sprintf("%q", string(v))
	case lua.LNumber:
		return v.String()
	}
	return v.Type().String()
}

// ---- argument checks

func (b *rankBinding) self(L *lua.LState, fn string) (rank.Board, runtime.Args) {
	a := runtime.ArgsOf(L, rankType, fn)
	return runtime.SelfAs[rank.Board](a, 1, rankType), a
}

func rankCall(fn string) string { return rankType + ":" + fn }

// uid is a non-empty string.
func uidArg(a runtime.Args, n int) string { return a.Name(n, "uid") }

// scoreArg is a finite number (NaN and ±inf are refused).
func scoreArg(a runtime.Args, n int, what string) float64 {
	x := a.Num(n)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		a.Bad(n, fmt.Sprintf("%s must be a finite number, got %s", what, lua.LNumber(x).String()))
	}
	return x
}

// intArg is an integer >= min. One above maxRankCount (math.huge
// included) reads as maxRankCount, which no board reaches: top(math.huge)
// and range(1, 2^50) mean "to the end".
func intArg(a runtime.Args, n int, what string, min int) int {
	x := a.Num(n)
	if x > maxRankCount {
		return maxRankCount
	}
	if x != math.Trunc(x) || x < float64(min) {
		a.Bad(n, fmt.Sprintf("%s must be an integer >= %d, got %s", what, min, lua.LNumber(x).String()))
	}
	return int(x)
}

// rangeArgs are 1-based inclusive ranks start <= stop at n, n+1.
func rangeArgs(a runtime.Args, n int) (int, int) {
	start, stop := intArg(a, n, "start", 1), intArg(a, n+1, "stop", 1)
	if start > stop {
		a.Bad(n+1, fmt.Sprintf("stop %d is before start %d", stop, start))
	}
	return start, stop
}

// dateArg is a day: "YYYYMMDD", the number YYYYMMDD (19700101..99991231,
// a calendar date) or Unix milliseconds (the UTC date of that
// instant, as shield.now_ms() gives).
func dateArg(a runtime.Args, n int) string {
	switch v := a.L.Get(n).(type) {
	case lua.LString:
		s := string(v)
		if len(s) == 8 && strings.Trim(s, "0123456789") == "" {
			if _, err := time.Parse("20060102", s); err == nil {
				return s
			}
		}
		a.Bad(n, fmt.Sprintf(`date must be "YYYYMMDD" (a calendar date) or Unix milliseconds, got %q`, s))
	case lua.LNumber:
		ms := float64(v)
		// A number that reads as YYYYMMDD is a date, not 5 to 115 days of
		// 1970 in milliseconds: archive(20240101) is what a caller means.
		if ms >= 19700101 && ms <= 99991231 {
			d := fmt.Sprintf("%d", int64(ms))
			if t, err := time.Parse("20060102", d); err == nil && float64(int64(ms)) == ms && t.Format("20060102") == d {
				return d
			}
			a.Bad(n, fmt.Sprintf(`date %s is a number from 19700101 to 99991231 but not a calendar date YYYYMMDD`, strconv.FormatFloat(ms, 'f', -1, 64)))
		}
		if ms >= 0 && ms <= maxDateMillis {
			return time.UnixMilli(int64(ms)).UTC().Format("20060102")
		}
		a.Bad(n, fmt.Sprintf(`date must be "YYYYMMDD" or Unix milliseconds from 0 to %d, got %s`, int64(maxDateMillis), v.String()))
	}
	a.TypeError(n, "string or number")
	return ""
}

// maxDateMillis is the last millisecond of 9999-12-31 UTC.
const maxDateMillis = 253402300799999

// ---- results

func entryTable(L *lua.LState, e rank.Entry) *lua.LTable {
	t := L.CreateTable(0, 3)
	t.RawSetString("uid", lua.LString(e.UID))
	t.RawSetString("score", lua.LNumber(e.Score))
	t.RawSetString("rank", lua.LNumber(e.Rank))
	return t
}

func entryList(L *lua.LState, es []rank.Entry) *lua.LTable {
	t := L.CreateTable(len(es), 0)
	for i, e := range es {
		t.RawSetInt(i+1, entryTable(L, e))
	}
	return t
}

func pushEntries(L *lua.LState, es []rank.Entry) []lua.LValue {
	return []lua.LValue{entryList(L, es)}
}

// scoreOrNil is the score of a member, or nil when it is not on the board.
func scoreOrNil(on bool, score float64) lua.LValue {
	if !on {
		return lua.LNil
	}
	return lua.LNumber(score)
}

func notFound() []lua.LValue { return []lua.LValue{lua.LNil, lua.LString("not_found")} }

// ---- writes: every write returns the board version last

// rank:update(uid, score [, {mode = "set"|"max"|"min"}]) -> score, changed, version.
// score is uid's score after the call, nil when uid was new and not admitted
// to a full board; changed says whether the board changed.
func (b *rankBinding) update(L *lua.LState) int {
	bd, a := b.self(L, "update")
	uid := uidArg(a, 2)
	score := scoreArg(a, 3, "score")
	mode := rank.ModeSet
	a.Options(4, updateOptions, func(key string, v lua.LValue) {
		m, err := rank.ParseMode(v.String())
		if err != nil {
			a.BadOption(4, key, `must be "set", "max" or "min", got %q`, v.String())
		}
		mode = m
	})
	return runtime.Run(b.rt, L, rankCall("update"), bd.Update(uid, score, mode), pushUpdated(true))
}

// pushUpdated converts an Updated: score[, changed], version.
func pushUpdated(withChanged bool) func(*lua.LState, rank.Updated) []lua.LValue {
	return func(_ *lua.LState, u rank.Updated) []lua.LValue {
		if withChanged {
			return []lua.LValue{scoreOrNil(u.Ranked, u.Score), lua.LBool(u.Changed), lua.LNumber(u.Version)}
		}
		return []lua.LValue{scoreOrNil(u.Ranked, u.Score), lua.LNumber(u.Version)}
	}
}

// rank:mupdate({uid = score, ...}) -> changed, version: one atomic step.
func (b *rankBinding) mupdate(L *lua.LState) int {
	bd, a := b.self(L, "mupdate")
	t := a.Table(2)
	scores := map[string]float64{}
	t.ForEach(func(k, v lua.LValue) {
		uid, ok := k.(lua.LString)
		if !ok || uid == "" {
			a.Bad(2, fmt.Sprintf("keys must be non-empty uid strings, got %s", describe(k)))
		}
		x, ok := v.(lua.LNumber)
		if !ok || math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			a.Bad(2, fmt.Sprintf("score of %q must be a finite number, got %s", string(uid), describe(v)))
		}
		scores[string(uid)] = float64(x)
	})
	return runtime.Run(b.rt, L, rankCall("mupdate"), bd.MUpdate(scores), pushWritten(false))
}

// pushWritten converts a Written: changed (a count, or a boolean), version.
func pushWritten(boolean bool) func(*lua.LState, rank.Written) []lua.LValue {
	return func(_ *lua.LState, w rank.Written) []lua.LValue {
		var changed lua.LValue = lua.LNumber(w.Changed)
		if boolean {
			changed = lua.LBool(w.Changed > 0)
		}
		return []lua.LValue{changed, lua.LNumber(w.Version)}
	}
}

// rank:incr(uid, delta) -> score, version (score nil: not admitted to a
// full board).
func (b *rankBinding) incr(L *lua.LState) int {
	bd, a := b.self(L, "incr")
	uid := uidArg(a, 2)
	delta := scoreArg(a, 3, "delta")
	return runtime.Run(b.rt, L, rankCall("incr"), bd.Incr(uid, delta), pushUpdated(false))
}

// rank:remove(uid) -> removed, version.
func (b *rankBinding) remove(L *lua.LState) int {
	bd, a := b.self(L, "remove")
	return runtime.Run(b.rt, L, rankCall("remove"), bd.Remove(uidArg(a, 2)), pushWritten(true))
}

// rank:clear() -> removed (count), version.
func (b *rankBinding) clear(L *lua.LState) int {
	bd, _ := b.self(L, "clear")
	return runtime.Run(b.rt, L, rankCall("clear"), bd.Clear(), pushWritten(false))
}

// rank:swap(a, b [, {expect = {[a] = score_a, [b] = score_b}}]) -> new score
// of a, new score of b, version; nil, "not_found" when either is absent;
// nil, "version_conflict" when a score is not the expected one.
func (b *rankBinding) swap(L *lua.LState) int {
	bd, a := b.self(L, "swap")
	ua, ub := uidArg(a, 2), uidArg(a, 3)
	if ua == ub {
		a.Bad(3, fmt.Sprintf("the two uids must differ, got %q twice", ua))
	}
	var expect *rank.Expect
	a.Options(4, swapOptions, func(_ string, v lua.LValue) {
		expect = expectArg(a, 4, v.(*lua.LTable), ua, ub)
	})
	return runtime.RunOutcome(b.rt, L, rankCall("swap"), bd.Swap(ua, ub, expect), func(_ *lua.LState, s rank.Swapped, err error) ([]lua.LValue, error) {
		switch {
		case errors.Is(err, rank.ErrNotFound):
			return notFound(), nil
		case errors.Is(err, rank.ErrVersionConflict):
			return []lua.LValue{lua.LNil, lua.LString("version_conflict")}, nil
		case err != nil:
			return nil, err
		}
		return []lua.LValue{lua.LNumber(s.ScoreA), lua.LNumber(s.ScoreB), lua.LNumber(s.Version)}, nil
	})
}

// expectArg reads {[a] = score_a, [b] = score_b}: exactly the two uids.
func expectArg(a runtime.Args, n int, t *lua.LTable, ua, ub string) *rank.Expect {
	var e rank.Expect
	seen := 0
	t.ForEach(func(k, v lua.LValue) {
		uid, ok := k.(lua.LString)
		if !ok || (string(uid) != ua && string(uid) != ub) {
			a.Bad(n, fmt.Sprintf("expect: key %s is neither %q nor %q", describe(k), ua, ub))
		}
		x, ok := v.(lua.LNumber)
		if !ok || math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			a.Bad(n, fmt.Sprintf("expect: score of %q must be a finite number, got %s", string(uid), describe(v)))
		}
		if string(uid) == ua {
			e.A = float64(x)
		} else {
			e.B = float64(x)
		}
		seen++
	})
	if seen != 2 {
		a.Bad(n, fmt.Sprintf("expect must give the scores of both %q and %q", ua, ub))
	}
	return &e
}

// ---- reads

// rank:position(uid) -> rank (1 = best), or nil.
func (b *rankBinding) position(L *lua.LState) int {
	bd, a := b.self(L, "position")
	return runtime.Run(b.rt, L, rankCall("position"), bd.Position(uidArg(a, 2)), func(_ *lua.LState, r int) []lua.LValue {
		if r == 0 {
			return []lua.LValue{lua.LNil}
		}
		return []lua.LValue{lua.LNumber(r)}
	})
}

// rank:score(uid) -> score, or nil.
func (b *rankBinding) score(L *lua.LState) int {
	bd, a := b.self(L, "score")
	return runtime.Run(b.rt, L, rankCall("score"), bd.Score(uidArg(a, 2)), func(_ *lua.LState, s rank.Scored) []lua.LValue {
		return []lua.LValue{scoreOrNil(s.Found, s.Score)}
	})
}

// rank:top(n) -> { {uid, score, rank}, ... } best first.
func (b *rankBinding) top(L *lua.LState) int {
	bd, a := b.self(L, "top")
	return runtime.Run(b.rt, L, rankCall("top"), bd.Top(intArg(a, 2, "n", 1)), pushEntries)
}

// rank:range(start, stop) -> entries ranked start..stop (1-based, inclusive).
func (b *rankBinding) rangeByRank(L *lua.LState) int {
	bd, a := b.self(L, "range")
	start, stop := rangeArgs(a, 2)
	return runtime.Run(b.rt, L, rankCall("range"), bd.Range(start, stop), pushEntries)
}

// rank:range_by_score(min, max) -> entries with min <= score <= max, best
// first, at most max_members of them. Bounds may be ±math.huge.
func (b *rankBinding) rangeByScore(L *lua.LState) int {
	bd, a := b.self(L, "range_by_score")
	lo, hi := a.Num(2), a.Num(3)
	if math.IsNaN(lo) {
		a.Bad(2, "min must not be NaN")
	}
	if math.IsNaN(hi) {
		a.Bad(3, "max must not be NaN")
	}
	if lo > hi {
		a.Bad(3, fmt.Sprintf("max %s is below min %s", lua.LNumber(hi).String(), lua.LNumber(lo).String()))
	}
	return runtime.Run(b.rt, L, rankCall("range_by_score"), bd.RangeByScore(lo, hi), pushEntries)
}

// rank:around(uid, n) -> {above = {...}, target = {...}, below = {...}}, or
// nil, "not_found".
func (b *rankBinding) around(L *lua.LState) int {
	bd, a := b.self(L, "around")
	uid := uidArg(a, 2)
	n := intArg(a, 3, "n", 1)
	return runtime.Run(b.rt, L, rankCall("around"), bd.Around(uid, n), func(L *lua.LState, r rank.Around) []lua.LValue {
		if !r.Found {
			return notFound()
		}
		t := L.CreateTable(0, 3)
		t.RawSetString("above", entryList(L, r.Above))
		t.RawSetString("target", entryTable(L, r.Target))
		t.RawSetString("below", entryList(L, r.Below))
		return []lua.LValue{t}
	})
}

// rank:count() -> members.
func (b *rankBinding) count(L *lua.LState) int {
	bd, _ := b.self(L, "count")
	return runtime.Run(b.rt, L, rankCall("count"), bd.Count(), func(_ *lua.LState, n int) []lua.LValue {
		return []lua.LValue{lua.LNumber(n)}
	})
}

// rank:version() -> the board version.
func (b *rankBinding) version(L *lua.LState) int {
	bd, _ := b.self(L, "version")
	return runtime.Run(b.rt, L, rankCall("version"), bd.Version(), func(_ *lua.LState, v int64) []lua.LValue {
		return []lua.LValue{lua.LNumber(v)}
	})
}

// rank:snapshot(start, stop) -> {entries = {...}, count = n, version = v},
// read in one atomic step.
func (b *rankBinding) snapshot(L *lua.LState) int {
	bd, a := b.self(L, "snapshot")
	start, stop := rangeArgs(a, 2)
	return runtime.Run(b.rt, L, rankCall("snapshot"), bd.Snapshot(start, stop), func(L *lua.LState, s rank.Snapshot) []lua.LValue {
		t := L.CreateTable(0, 3)
		t.RawSetString("entries", entryList(L, s.Entries))
		t.RawSetString("count", lua.LNumber(s.Count))
		t.RawSetString("version", lua.LNumber(s.Version))
		return []lua.LValue{t}
	})
}

// rank:archive(date) -> the entries archived by the reset of date, or nil,
// "not_found". date is "YYYYMMDD" or Unix milliseconds.
func (b *rankBinding) archive(L *lua.LState) int {
	bd, a := b.self(L, "archive")
	return runtime.Run(b.rt, L, rankCall("archive"), bd.Archive(dateArg(a, 2)), func(L *lua.LState, r rank.Archived) []lua.LValue {
		if !r.Found {
			return notFound()
		}
		return pushEntries(L, r.Entries)
	})
}
