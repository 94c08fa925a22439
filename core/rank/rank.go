// Package rank is the leaderboard core behind shield.rank: a Backend that
// opens Boards, with two implementations — Redis (standalone, Sentinel or
// Cluster, see NewRedis) and an in-process Memory backend with the same
// semantics (see NewMemory). Every Board method returns a *store.Op: one
// Redis round trip (one command or one Lua script), or in-process work for
// Memory.
//
// # Order
//
// Higher scores rank first; rank 1 is the best. Scores are float64: every
// integer in [-2^53, 2^53] and every other finite float64 is kept exactly
// (the sorted-set score in Redis is the score itself, never a packed
// value). NaN and ±Inf are refused with ErrInvalid.
//
// Equal scores are ordered by the board's Ties policy, a contract:
//
//   - TiesReach (the default): the member who reached the score first ranks
//     first. Every change of a member's score (Update, MUpdate, Incr) gives
//     it a new reach sequence number from a per-board counter, so it ranks
//     after every member that already had that score. A write that leaves
//     the score as it was (a "max" update that does not raise it, Update to
//     the same score, Incr by 0) keeps the member's place. One MUpdate
//     applies its members in ascending byte order of uid, so equal scores
//     given in one MUpdate rank in uid order. Swap exchanges the two
//     members' places exactly (score and place among equals): see Swap.
//   - TiesUID: equal scores rank by uid in descending byte order ("b" before
//     "a"), which is plain Redis ZREVRANGE order; the sorted-set members are
//     the uids themselves, so other services may read and write the set
//     with plain ZADD/ZREVRANK/ZREVRANGE. It costs the fair tie order.
//
// # Redis layout
//
// With k = store.Keys{Prefix: prefix} (global.redis.prefix, default
// "shield:"), board name uses these keys, all with the hash tag {name}:
//
//	k.Rank(name)         zset  <prefix>rank:{name}          score = the score; member = tie key + uid (TiesReach) or uid (TiesUID)
//	k.RankMembers(name)  hash  <prefix>rank:members:{name}  uid -> its zset member (TiesReach only)
//	k.RankMeta(name)     hash  <prefix>rank:meta:{name}     version, seq, ties, reset (last reset date); survives Clear
//	k.RankArchive(name, date) hash <prefix>rank:archive:{name}:YYYYMMDD  field data = JSON of the archived top; PEXPIRE = archive TTL
//
// Under TiesReach a member is 15 decimal digits, 999999999999999 - seq,
// followed by the uid bytes: ZREVRANGE lists equal scores in descending
// member order, so the smallest seq (the earliest reach) comes first. Other
// services read the board with ZREVRANGE <zset> start stop WITHSCORES and
// strip the first 15 bytes of each member; a uid's rank is ZREVRANK <zset>
// (HGET <members> uid) + 1 and its score ZSCORE <zset> (HGET <members>
// uid). They must not write the set: a writer must also maintain the
// members hash and the counters (use the module).
//
// # Versions
//
// Each board has a version, an integer that starts at 0 and grows by one
// with every write that changes the board (its members, scores or order) —
// never otherwise, and never reset, not even by Clear or ArchiveAndClear.
// Every write returns the version after it; Version and Snapshot read it.
// A reader that caches a Snapshot can poll Version and refetch only when it
// moved. Because every change takes the next version in the same atomic
// step, the versions returned by changing writes order them totally.
//
// # MaxMembers
//
// A board opened with MaxMembers > 0 holds at most that many members. The
// bound is applied when a write adds a member (Update, MUpdate, Incr of a
// uid not on the board): on a full board the newcomer is admitted only if
// it ranks before the current last member — a strictly higher score under
// TiesReach (a newcomer reaching an existing score ranks after the members
// already there, so it would be last) — and the last member is then
// evicted. A newcomer that is not admitted leaves the board unchanged
// (Updated.Ranked == false, version not moved). Members already on the
// board are never evicted by their own score changes. A board that holds
// more than MaxMembers (opened earlier with a larger bound) is cut down to
// MaxMembers, from the bottom, by the next write that adds a member.
package rank

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/argerr"
)

// Errors returned (wrapped) by Board operations and Backend.Board.
var (
	// ErrNotFound is returned by Swap when either member is not on the
	// board (nothing is changed, nobody is inserted).
	ErrNotFound = errors.New("rank: not found")
	// ErrVersionConflict is returned by a Swap with an Expect when either
	// member's score is not the expected one any more (nothing is changed).
	ErrVersionConflict = errors.New("rank: version conflict")
	// ErrInvalid is wrapped by every operation given an invalid argument
	// (an empty or '}'-leading board name, an empty uid, a NaN or infinite
	// score, n <= 0, start < 1 or start > stop, an unknown Mode or Ties, a
	// malformed date, ...), by Incr when the new score would be infinite,
	// and by writes through a handle whose Ties differs from the one the
	// non-empty board was written with.
	ErrInvalid = errors.New("rank: invalid argument")
)

// Backend opens boards. Implementations are safe for concurrent use.
type Backend interface {
	// Board returns a handle on the board name with options o. Handles
	// with the same name share one board; each applies its own
	// MaxMembers. It does no I/O. Errors: ErrInvalid.
	Board(name string, o Options) (Board, error)
}

// Options configure a board handle.
type Options struct {
	// MaxMembers caps the board (rank.max_members; see the package doc for
	// when members are dropped); 0 means unlimited. It also bounds
	// RangeByScore. Must be >= 0.
	MaxMembers int
	// Ties orders equal scores (TiesReach when zero). Every handle of one
	// board must use the same policy.
	Ties Ties
}

// DefaultRangeLimit bounds RangeByScore on a board without MaxMembers.
const DefaultRangeLimit = 10000

// rangeLimit is the most entries RangeByScore returns.
func (o Options) rangeLimit() int {
	if o.MaxMembers > 0 {
		return o.MaxMembers
	}
	return DefaultRangeLimit
}

// Ties is a tie-order policy.
type Ties uint8

// The tie policies.
const (
	// TiesReach ranks the member who reached a score first before later
	// ones (the default).
	TiesReach Ties = iota
	// TiesUID ranks equal scores by uid, descending bytes (plain Redis
	// order; members are plain uids).
	TiesUID
)

// String returns "reach", "uid" or "Ties(n)"; the names are also the
// values of the ties field of the board's meta hash.
func (t Ties) String() string {
	switch t {
	case TiesReach:
		return "reach"
	case TiesUID:
		return "uid"
	}
	return fmt.Sprintf("Ties(%d)", uint8(t))
}

// ParseTies returns the policy named s ("reach" or "uid"). Errors:
// ErrInvalid.
func ParseTies(s string) (Ties, error) {
	switch s {
	case "reach":
		return TiesReach, nil
	case "uid":
		return TiesUID, nil
	}
	return 0, fmt.Errorf("%w: unknown ties %q (want \"reach\" or \"uid\")", ErrInvalid, s)
}

// Mode says how Update treats a member that is already on the board. A
// uid not on the board is always inserted with the given score.
type Mode uint8

// The update modes.
const (
	// ModeSet sets the score.
	ModeSet Mode = iota
	// ModeMax sets the score only when it is higher than the current one.
	ModeMax
	// ModeMin sets the score only when it is lower than the current one.
	ModeMin
)

// String returns "set", "max", "min" or "Mode(n)".
func (m Mode) String() string {
	switch m {
	case ModeSet:
		return "set"
	case ModeMax:
		return "max"
	case ModeMin:
		return "min"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode returns the mode named s ("set", "max" or "min"). Errors:
// ErrInvalid.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "set":
		return ModeSet, nil
	case "max":
		return ModeMax, nil
	case "min":
		return ModeMin, nil
	}
	return 0, fmt.Errorf("%w: unknown mode %q (want \"set\", \"max\" or \"min\")", ErrInvalid, s)
}

// Entry is one member of a board.
type Entry struct {
	UID   string
	Score float64
	// Rank is the 1-based position (1 = best).
	Rank int
}

// Updated is the outcome of Update and Incr.
type Updated struct {
	// Changed is true when the write changed the board: uid was added, or
	// its score changed.
	Changed bool
	// Ranked is true when uid is on the board after the call; false only
	// when uid was new and not admitted to a full board.
	Ranked bool
	// Score is uid's score after the call (0 when !Ranked).
	Score float64
	// Existed is true when uid was on the board before the call, with
	// score Previous.
	Existed  bool
	Previous float64
	// Version is the board version after the call.
	Version int64
}

// Written is the outcome of MUpdate, Remove and Clear.
type Written struct {
	// Changed counts the members changed (MUpdate: added or given a new
	// score, newcomers not admitted excluded), removed (Remove: 0 or 1) or
	// cleared (Clear).
	Changed int
	// Version is the board version after the call.
	Version int64
}

// Scored is the outcome of Score.
type Scored struct {
	Score float64
	// Found is false when the uid is not on the board.
	Found bool
}

// Around is the outcome of Around.
type Around struct {
	// Above holds up to n better-ranked members, best first; Below up to n
	// worse-ranked ones, best first.
	Above  []Entry
	Target Entry
	Below  []Entry
	// Found is false when the uid is not on the board (then the rest is
	// empty).
	Found bool
}

// Expect makes a Swap conditional: it applies only if a's score is still A
// and b's score is still B (the values the caller read), compared exactly.
type Expect struct {
	A, B float64
}

// Swapped is the outcome of a Swap.
type Swapped struct {
	// ScoreA and ScoreB are the new scores of a and b (b's and a's old
	// ones).
	ScoreA, ScoreB float64
	// Changed is false only under TiesUID when both scores were equal
	// (nothing to exchange).
	Changed bool
	// Version is the board version after the call.
	Version int64
}

// Snapshot is a consistent read of a range of ranks and the version it
// belongs to.
type Snapshot struct {
	Entries []Entry
	// Count is the number of members on the board.
	Count int
	// Version is the board version the entries belong to.
	Version int64
}

// Reset is the outcome of ArchiveAndClear.
type Reset struct {
	// Done is false when the board was already reset for this date or a
	// later one, or an archive for the date exists: then nothing was
	// touched.
	Done bool
	// Archived is the number of entries written to the archive.
	Archived int
	// Cleared is the number of members removed from the board.
	Cleared int
	// Version is the board version after the call.
	Version int64
}

// Archived is the outcome of Archive.
type Archived struct {
	// Entries are the archived entries, best first.
	Entries []Entry
	// Found is false when there is no archive for the date (never written,
	// or expired).
	Found bool
}

// Board is a handle on one leaderboard. Its methods build operations and
// do nothing until the operation runs (op.Do or a store.Batch); on Redis
// each is one round trip. Invalid arguments give an operation that fails
// with ErrInvalid without I/O. Other errors come from the backend and name
// the operation and board: `rank: update "daily": dial tcp ...`.
type Board interface {
	// Name returns the board name.
	Name() string
	// Options returns the handle's options, resolved.
	Options() Options

	// Update sets uid's score according to mode (see Mode). Errors:
	// ErrInvalid.
	Update(uid string, score float64, mode Mode) *store.Op[Updated]
	// MUpdate sets the score of every uid in scores in one atomic step (one
	// version), as successive ModeSet updates in ascending byte order of
	// uid (which orders equal scores; newcomers are admitted one by one
	// under MaxMembers). An empty map changes nothing. Errors: ErrInvalid.
	MUpdate(scores map[string]float64) *store.Op[Written]
	// Incr adds delta to uid's score (a uid not on the board starts at 0)
	// and returns the new score. Errors: ErrInvalid (also when the result
	// would be infinite; nothing is changed then).
	Incr(uid string, delta float64) *store.Op[Updated]
	// Remove deletes uid. Errors: ErrInvalid.
	Remove(uid string) *store.Op[Written]
	// Clear deletes every member; the version (and the reach counter) go
	// on. Errors: none but the backend's.
	Clear() *store.Op[Written]
	// Swap exchanges the places of a and b atomically: a takes b's score
	// and b takes a's. Under TiesReach they also exchange their places
	// among equal scores, so a lands exactly at b's old rank and b at a's,
	// and no other member moves. With expect non-nil it applies only if
	// the scores are still expect.A and expect.B. Errors: ErrNotFound
	// (either is absent), ErrVersionConflict, ErrInvalid (also a == b).
	Swap(a, b string, expect *Expect) *store.Op[Swapped]

	// Position returns uid's rank (1-based), 0 when uid is not on the
	// board. Errors: ErrInvalid.
	Position(uid string) *store.Op[int]
	// Score returns uid's score. Errors: ErrInvalid.
	Score(uid string) *store.Op[Scored]
	// Top returns the first n entries (fewer when the board is smaller).
	// Errors: ErrInvalid (n <= 0).
	Top(n int) *store.Op[[]Entry]
	// Range returns the entries ranked start..stop (1-based, inclusive).
	// Errors: ErrInvalid (start < 1 or stop < start).
	Range(start, stop int) *store.Op[[]Entry]
	// RangeByScore returns the entries with min <= score <= max, highest
	// first, at most MaxMembers of them (DefaultRangeLimit without
	// MaxMembers): the best ones when there are more. Bounds may be ±Inf.
	// Errors: ErrInvalid (NaN, min > max).
	RangeByScore(min, max float64) *store.Op[[]Entry]
	// Around returns uid's entry with up to n entries on each side.
	// Errors: ErrInvalid (n <= 0).
	Around(uid string, n int) *store.Op[Around]
	// Count returns the number of members.
	Count() *store.Op[int]
	// Version returns the board version (0 for a board never written).
	Version() *store.Op[int64]
	// Snapshot returns the entries ranked start..stop with the member
	// count and the version they belong to, read in one atomic step.
	// Errors: ErrInvalid (start < 1 or stop < start).
	Snapshot(start, stop int) *store.Op[Snapshot]

	// ArchiveAndClear resets the board for date (YYYYMMDD) in one atomic
	// step: it writes the best top entries as JSON (an array of
	// {"uid":..,"score":..,"rank":..}) to the archive hash of the date,
	// field "data", expiring after ttl, and clears the board. top == 0
	// clears without archiving. It is idempotent: when the board was
	// already reset for date or a later date, or the date's archive
	// exists, it changes nothing and returns Done == false, so a retried
	// reset never archives an emptied board over the real archive nor
	// clears the new period's scores. Errors: ErrInvalid (bad date, top <
	// 0, ttl < 1ms with top > 0).
	ArchiveAndClear(date string, top int, ttl time.Duration) *store.Op[Reset]
	// Archive reads back the archive of date. Errors: ErrInvalid (bad
	// date), and an error wrapping store.ErrReply when the stored data is
	// not an archive.
	Archive(date string) *store.Op[Archived]
}

// resolve validates a board name and options.
func resolve(name string, o Options) (Options, error) {
	if name == "" || name[0] == '}' {
		return o, argerr.New(ErrInvalid, "rank", "board", name, "a board name must be non-empty and must not start with '}'")
	}
	if o.MaxMembers < 0 {
		return o, argerr.New(ErrInvalid, "rank", "board", name, fmt.Sprintf("max_members %d must be >= 0", o.MaxMembers))
	}
	if o.Ties != TiesReach && o.Ties != TiesUID {
		return o, argerr.New(ErrInvalid, "rank", "board", name, fmt.Sprintf("unknown %v", o.Ties))
	}
	return o, nil
}

// opErr wraps a backend error with the operation and board name.
func opErr(op, name string, err error) error {
	return fmt.Errorf("rank: %s %q: %w", op, name, err)
}

// invalid returns an ErrInvalid error naming the operation and board.
func invalid(op, name, format string, args ...any) error {
	return argerr.New(ErrInvalid, "rank", op, name, fmt.Sprintf(format, args...))
}

// failed is an operation refused before any I/O.
func failed[T any](op, name, format string, args ...any) *store.Op[T] {
	return store.Failed[T](invalid(op, name, format, args...))
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// checkUID reports an empty uid.
func checkUID(op, name, what, uid string) error {
	if uid == "" {
		return invalid(op, name, "empty %s", what)
	}
	return nil
}

// checkScore reports a NaN or infinite score.
func checkScore(op, name, what string, x float64) error {
	if !finite(x) {
		return invalid(op, name, "%s %v is not a finite number", what, x)
	}
	return nil
}

// normZero turns -0 into 0, so both backends store and print one zero.
func normZero(x float64) float64 {
	if x == 0 {
		return 0
	}
	return x
}

// checkRange validates 1-based inclusive ranks.
func checkRange(op, name string, start, stop int) error {
	if start < 1 {
		return invalid(op, name, "start %d must be >= 1", start)
	}
	if stop < start {
		return invalid(op, name, "start %d is after stop %d", start, stop)
	}
	return nil
}

// checkN validates a count.
func checkN(op, name string, n int) error {
	if n <= 0 {
		return invalid(op, name, "n %d must be > 0", n)
	}
	return nil
}

// checkDate validates a YYYYMMDD date.
func checkDate(op, name, date string) error {
	if len(date) != 8 || strings.Trim(date, "0123456789") != "" {
		return invalid(op, name, "date %q must be YYYYMMDD", date)
	}
	if _, err := time.Parse("20060102", date); err != nil {
		return invalid(op, name, "date %q is not a calendar date", date)
	}
	return nil
}

// checkReset validates ArchiveAndClear's arguments.
func checkReset(op, name, date string, top int, ttl time.Duration) error {
	if err := checkDate(op, name, date); err != nil {
		return err
	}
	if top < 0 {
		return invalid(op, name, "top %d must be >= 0", top)
	}
	if top > 0 && ttl < time.Millisecond {
		return invalid(op, name, "archive ttl %v must be >= 1ms", ttl)
	}
	return nil
}

// checkSwap validates Swap's arguments.
func checkSwap(name, a, b string, e *Expect) error {
	if err := checkUID("swap", name, "uid a", a); err != nil {
		return err
	}
	if err := checkUID("swap", name, "uid b", b); err != nil {
		return err
	}
	if a == b {
		return invalid("swap", name, "a and b are the same uid %q", a)
	}
	if e != nil {
		if err := checkScore("swap", name, "expected score of a", e.A); err != nil {
			return err
		}
		if err := checkScore("swap", name, "expected score of b", e.B); err != nil {
			return err
		}
	}
	return nil
}

// checkScoreRange validates RangeByScore's bounds.
func checkScoreRange(name string, min, max float64) error {
	if math.IsNaN(min) || math.IsNaN(max) {
		return invalid("range_by_score", name, "bounds %v, %v must not be NaN", min, max)
	}
	if min > max {
		return invalid("range_by_score", name, "min %v is above max %v", min, max)
	}
	return nil
}

// checkUpdate validates Update's arguments.
func checkUpdate(name, uid string, score float64, mode Mode) error {
	if err := checkUID("update", name, "uid", uid); err != nil {
		return err
	}
	if err := checkScore("update", name, "score", score); err != nil {
		return err
	}
	if mode > ModeMin {
		return invalid("update", name, "unknown %v", mode)
	}
	return nil
}

// checkIncr validates Incr's arguments.
func checkIncr(name, uid string, delta float64) error {
	if err := checkUID("incr", name, "uid", uid); err != nil {
		return err
	}
	return checkScore("incr", name, "delta", delta)
}

// checkMUpdate validates MUpdate's scores and returns the uids in
// ascending byte order, the order they are applied in.
func checkMUpdate(name string, scores map[string]float64) ([]string, error) {
	uids := make([]string, 0, len(scores))
	for uid, score := range scores {
		if err := checkUID("mupdate", name, "uid", uid); err != nil {
			return nil, err
		}
		if err := checkScore("mupdate", name, fmt.Sprintf("score of %q", uid), score); err != nil {
			return nil, err
		}
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	return uids, nil
}
