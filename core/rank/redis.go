package rank

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
)

// The scripts; each file's header lists its KEYS, ARGV and replies, and
// every one runs with scripts/lib.lua in front of it.
var (
	//go:embed scripts/lib.lua
	libSrc string
	//go:embed scripts/update.lua
	updateSrc string
	//go:embed scripts/mupdate.lua
	mupdateSrc string
	//go:embed scripts/incr.lua
	incrSrc string
	//go:embed scripts/remove.lua
	removeSrc string
	//go:embed scripts/clear.lua
	clearSrc string
	//go:embed scripts/swap.lua
	swapSrc string
	//go:embed scripts/lookup.lua
	lookupSrc string
	//go:embed scripts/around.lua
	aroundSrc string
	//go:embed scripts/byscore.lua
	byscoreSrc string
	//go:embed scripts/snapshot.lua
	snapshotSrc string
	//go:embed scripts/reset.lua
	resetSrc string

	updateScript   = newScript("update", updateSrc)
	mupdateScript  = newScript("mupdate", mupdateSrc)
	incrScript     = newScript("incr", incrSrc)
	removeScript   = newScript("remove", removeSrc)
	clearScript    = newScript("clear", clearSrc)
	swapScript     = newScript("swap", swapSrc)
	lookupScript   = newScript("lookup", lookupSrc)
	aroundScript   = newScript("around", aroundSrc)
	byscoreScript  = newScript("byscore", byscoreSrc)
	snapshotScript = newScript("snapshot", snapshotSrc)
	resetScript    = newScript("reset", resetSrc)
)

func newScript(name, src string) *store.Script {
	return store.NewScript("rank/"+name+".lua", libSrc+"\n"+src)
}

// Error prefixes of the scripts' error replies.
const (
	errTies     = "RANKTIES"
	errOverflow = "RANKOVERFLOW"
)

// seqWidth is the length of the reach prefix of a TiesReach member.
const seqWidth = 15

// Redis is a Backend on Redis: standalone, Sentinel or Cluster. The layout
// is in the package doc. Every write, and every read that needs more than
// one command (a uid's rank or score needs its member first), is one Lua
// script with the board's keys (one hash tag); Top, Range, Count, Version
// and Archive are single commands. Each operation is one round trip.
type Redis struct {
	c       redis.UniversalClient
	keys    store.Keys
	durable store.Durability
}

var _ Backend = (*Redis)(nil)

// NewRedis returns a Backend on c with keys under prefix. It does no I/O
// and never fails; c stays owned by the caller.
func NewRedis(c redis.UniversalClient, prefix string, opts ...RedisOption) *Redis {
	r := &Redis{c: c, keys: store.Keys{Prefix: prefix}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// RedisOption configures NewRedis.
type RedisOption func(*Redis)

// WithDurability makes every write (Update, MUpdate, Incr, Remove, Clear,
// Swap, ArchiveAndClear) wait for d's replicas (see store.Durability); its
// error is then a *store.NotDurableError when the replicas did not confirm
// it in time.
func WithDurability(d store.Durability) RedisOption {
	return func(r *Redis) { r.durable = d }
}

// Board returns a handle on name. Errors: ErrInvalid.
func (r *Redis) Board(name string, o Options) (Board, error) {
	o, err := resolve(name, o)
	if err != nil {
		return nil, err
	}
	return &redisBoard{
		r:    r,
		name: name,
		o:    o,
		keys: []string{r.keys.Rank(name), r.keys.RankMembers(name), r.keys.RankMeta(name)},
		ties: o.Ties.String(),
		max:  strconv.Itoa(o.MaxMembers),
	}, nil
}

type redisBoard struct {
	r    *Redis
	name string
	o    Options
	keys []string // zset, members, meta: KEYS[1..3] of every script
	ties string   // ARGV[1] of every script
	max  string
}

func (b *redisBoard) Name() string     { return b.name }
func (b *redisBoard) Options() Options { return b.o }

// run is an Op of one script with the board's keys (and extra keys after
// them); decode reads the reply.
func run[T any](b *redisBoard, op string, s *store.Script, extraKeys []string, decode func(r *store.Reply) (T, error), args ...any) *store.Op[T] {
	keys := b.keys
	if len(extraKeys) > 0 {
		keys = append(append([]string(nil), b.keys...), extraKeys...)
	}
	cmd := s.Cmd(keys, append([]any{b.ties}, args...)...)
	return store.Commands(b.r.c, func() (T, error) {
		if err := b.scriptErr(op, cmd.Err()); err != nil {
			var zero T
			return zero, err
		}
		return decode(store.ReadReply(b.what(op), cmd.Cmd))
	}, cmd)
}

// runWrite is run for a script that writes: it waits for the replicas the
// backend's Durability asks for.
func runWrite[T any](b *redisBoard, op string, s *store.Script, extraKeys []string, decode func(r *store.Reply) (T, error), args ...any) *store.Op[T] {
	return run(b, op, s, extraKeys, decode, args...).Durable(b.r.durable)
}

func (b *redisBoard) what(op string) string { return "rank: " + op + " " + strconv.Quote(b.name) }

// scriptErr maps the scripts' own error replies to the sentinels.
func (b *redisBoard) scriptErr(op string, err error) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "ERR ")
	for _, p := range [...]string{errTies, errOverflow} {
		if strings.HasPrefix(msg, p+" ") {
			return invalid(op, b.name, "%s", strings.TrimPrefix(msg, p+" "))
		}
	}
	return nil // other errors are reported by the reply reader
}

// num is a score as an exact script argument.
func num(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "+inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// uidOf returns the uid of a zset member of a board whose members were
// written under reach (true) or uid order.
func uidOf(member string, reach bool) string {
	if reach && len(member) >= seqWidth {
		return member[seqWidth:]
	}
	return member
}

// policyCmd reads the board's tie policy (meta "ties"). A read whose reply
// holds zset members sends it just before its own command, in the same
// round trip, and decodes the members by the board's policy rather than
// the handle's: a handle of the other policy reads right, as on memory
// (the read scripts follow the board's policy too: board_policy in
// lib.lua). Only a board emptied and refilled under the other policy
// between the two commands could be misread.
func (b *redisBoard) policyCmd() *redis.StringCmd {
	return redis.NewStringCmd(context.Background(), "hget", b.keys[2], "ties")
}

// reach reports whether the board's members are in reach order, by
// policyCmd's reply (the handle's policy when the board has none yet).
func (b *redisBoard) reach(policy *redis.StringCmd) bool {
	if t, err := policy.Result(); err == nil && t != "" {
		return t == TiesReach.String()
	}
	return b.o.Ties == TiesReach
}

// readRun is run for a read script whose reply holds zset members: decode
// gets the board's policy.
func readRun[T any](b *redisBoard, op string, s *store.Script, decode func(r *store.Reply, reach bool) (T, error), args ...any) *store.Op[T] {
	policy := b.policyCmd()
	cmd := s.Cmd(b.keys, append([]any{b.ties}, args...)...)
	return store.Commands(b.r.c, func() (T, error) {
		if err := b.scriptErr(op, cmd.Err()); err != nil {
			var zero T
			return zero, err
		}
		return decode(store.ReadReply(b.what(op), cmd.Cmd), b.reach(policy))
	}, policy, cmd)
}

// entries reads a flat {member, score, ...} array as entries ranked from
// first (1-based).
func (b *redisBoard) entries(op string, flat []any, first int, reach bool) ([]Entry, error) {
	fr := store.ReplyOf(b.what(op), flat)
	out := make([]Entry, 0, len(flat)/2)
	for fr.Len() > 0 {
		m, s := fr.Str(), fr.Float()
		out = append(out, Entry{UID: uidOf(m, reach), Score: s, Rank: first + len(out)})
	}
	return out, fr.End()
}

func decodeUpdated(r *store.Reply) (Updated, error) {
	u := Updated{Changed: r.Int() == 1, Ranked: r.Int() == 1, Score: r.Float(), Existed: r.Int() == 1, Previous: r.Float(), Version: r.Int()}
	return u, r.End()
}

// Update sets uid's score according to mode (update.lua). Errors:
// ErrInvalid.
func (b *redisBoard) Update(uid string, score float64, mode Mode) *store.Op[Updated] {
	if err := checkUpdate(b.name, uid, score, mode); err != nil {
		return store.Failed[Updated](err)
	}
	return runWrite(b, "update", updateScript, nil, decodeUpdated, b.max, mode.String(), uid, num(normZero(score)))
}

// MUpdate sets every score in one step (mupdate.lua). Errors: ErrInvalid.
func (b *redisBoard) MUpdate(scores map[string]float64) *store.Op[Written] {
	uids, err := checkMUpdate(b.name, scores)
	if err != nil {
		return store.Failed[Written](err)
	}
	args := make([]any, 0, 1+2*len(uids))
	args = append(args, b.max)
	for _, uid := range uids {
		args = append(args, uid, num(normZero(scores[uid])))
	}
	return runWrite(b, "mupdate", mupdateScript, nil, decodeWritten, args...)
}

func decodeWritten(r *store.Reply) (Written, error) {
	w := Written{Changed: int(r.Int()), Version: r.Int()}
	return w, r.End()
}

// Incr adds delta to uid's score (incr.lua). Errors: ErrInvalid.
func (b *redisBoard) Incr(uid string, delta float64) *store.Op[Updated] {
	if err := checkIncr(b.name, uid, delta); err != nil {
		return store.Failed[Updated](err)
	}
	return runWrite(b, "incr", incrScript, nil, decodeUpdated, b.max, uid, num(delta))
}

// Remove deletes uid (remove.lua). Errors: ErrInvalid.
func (b *redisBoard) Remove(uid string) *store.Op[Written] {
	if err := checkUID("remove", b.name, "uid", uid); err != nil {
		return store.Failed[Written](err)
	}
	return runWrite(b, "remove", removeScript, nil, decodeWritten, uid)
}

// Clear deletes every member (clear.lua).
func (b *redisBoard) Clear() *store.Op[Written] {
	return runWrite(b, "clear", clearScript, nil, decodeWritten)
}

// Swap exchanges the places of a and b (swap.lua). Errors: ErrNotFound,
// ErrVersionConflict, ErrInvalid.
func (b *redisBoard) Swap(a, c string, expect *Expect) *store.Op[Swapped] {
	if err := checkSwap(b.name, a, c, expect); err != nil {
		return store.Failed[Swapped](err)
	}
	args := []any{a, c, "0", "0", "0"}
	if expect != nil {
		args[2], args[3], args[4] = "1", num(expect.A), num(expect.B)
	}
	return runWrite(b, "swap", swapScript, nil, func(r *store.Reply) (Swapped, error) {
		switch st := r.Int(); {
		case r.Err() != nil:
			return Swapped{}, r.Err()
		case st == -1:
			return Swapped{}, opErr("swap", b.name, ErrNotFound)
		case st == -2:
			return Swapped{}, opErr("swap", b.name, ErrVersionConflict)
		}
		s := Swapped{ScoreA: r.Float(), ScoreB: r.Float(), Changed: r.Int() == 1, Version: r.Int()}
		return s, r.End()
	}, args...)
}

// Position returns uid's rank (lookup.lua). Errors: ErrInvalid.
func (b *redisBoard) Position(uid string) *store.Op[int] {
	if err := checkUID("position", b.name, "uid", uid); err != nil {
		return store.Failed[int](err)
	}
	return run(b, "position", lookupScript, nil, func(r *store.Reply) (int, error) {
		if r.Len() == 0 {
			return 0, r.End()
		}
		rank := int(r.Int()) + 1
		r.Float()
		return rank, r.End()
	}, uid)
}

// Score returns uid's score (lookup.lua). Errors: ErrInvalid.
func (b *redisBoard) Score(uid string) *store.Op[Scored] {
	if err := checkUID("score", b.name, "uid", uid); err != nil {
		return store.Failed[Scored](err)
	}
	return run(b, "score", lookupScript, nil, func(r *store.Reply) (Scored, error) {
		if r.Len() == 0 {
			return Scored{}, r.End()
		}
		r.Int()
		return Scored{Score: r.Float(), Found: true}, r.End()
	}, uid)
}

// Top returns the first n entries (ZREVRANGE). Errors: ErrInvalid.
func (b *redisBoard) Top(n int) *store.Op[[]Entry] {
	if err := checkN("top", b.name, n); err != nil {
		return store.Failed[[]Entry](err)
	}
	return b.zrevrange("top", 1, n)
}

// Range returns the entries ranked start..stop (ZREVRANGE). Errors:
// ErrInvalid.
func (b *redisBoard) Range(start, stop int) *store.Op[[]Entry] {
	if err := checkRange("range", b.name, start, stop); err != nil {
		return store.Failed[[]Entry](err)
	}
	return b.zrevrange("range", start, stop)
}

func (b *redisBoard) zrevrange(op string, start, stop int) *store.Op[[]Entry] {
	policy := b.policyCmd()
	cmd := redis.NewZSliceCmd(context.Background(), "zrevrange", b.keys[0], start-1, stop-1, "withscores")
	return store.Commands(b.r.c, func() ([]Entry, error) {
		zs, err := cmd.Result()
		if err != nil {
			return nil, opErr(op, b.name, err)
		}
		reach := b.reach(policy)
		out := make([]Entry, len(zs))
		for i, z := range zs {
			m, _ := z.Member.(string)
			out[i] = Entry{UID: uidOf(m, reach), Score: z.Score, Rank: start + i}
		}
		return out, nil
	}, policy, cmd)
}

// RangeByScore returns the entries with min <= score <= max (byscore.lua).
// Errors: ErrInvalid.
func (b *redisBoard) RangeByScore(min, max float64) *store.Op[[]Entry] {
	if err := checkScoreRange(b.name, min, max); err != nil {
		return store.Failed[[]Entry](err)
	}
	return readRun(b, "range_by_score", byscoreScript, func(r *store.Reply, reach bool) ([]Entry, error) {
		first, flat := int(r.Int()), r.Array()
		if err := r.End(); err != nil {
			return nil, err
		}
		return b.entries("range_by_score", flat, first+1, reach)
	}, num(min), num(max), b.o.rangeLimit())
}

// Around returns uid's entry and up to n on each side (around.lua).
// Errors: ErrInvalid.
func (b *redisBoard) Around(uid string, n int) *store.Op[Around] {
	if err := checkUID("around", b.name, "uid", uid); err != nil {
		return store.Failed[Around](err)
	}
	if err := checkN("around", b.name, n); err != nil {
		return store.Failed[Around](err)
	}
	return readRun(b, "around", aroundScript, func(r *store.Reply, reach bool) (Around, error) {
		if r.Len() == 0 {
			return Around{}, r.End()
		}
		first, target, flat := int(r.Int()), int(r.Int()), r.Array()
		if err := r.End(); err != nil {
			return Around{}, err
		}
		all, err := b.entries("around", flat, first+1, reach)
		if err != nil {
			return Around{}, err
		}
		i := target - first
		if i < 0 || i >= len(all) {
			return Around{}, fmt.Errorf("%s: %w: target rank %d outside the %d entries read from %d", b.what("around"), store.ErrReply, target, len(all), first)
		}
		return Around{Above: all[:i:i], Target: all[i], Below: all[i+1:], Found: true}, nil
	}, uid, min(n, 1<<40)) // Lua adds it to a rank as a double
}

// Count returns the number of members (ZCARD).
func (b *redisBoard) Count() *store.Op[int] {
	cmd := redis.NewIntCmd(context.Background(), "zcard", b.keys[0])
	return store.Commands(b.r.c, func() (int, error) {
		n, err := cmd.Result()
		if err != nil {
			return 0, opErr("count", b.name, err)
		}
		return int(n), nil
	}, cmd)
}

// Version returns the board version (HGET meta version).
func (b *redisBoard) Version() *store.Op[int64] {
	cmd := redis.NewStringCmd(context.Background(), "hget", b.keys[2], "version")
	return store.Commands(b.r.c, func() (int64, error) {
		v, err := cmd.Int64()
		switch {
		case errors.Is(err, redis.Nil):
			return 0, nil
		case err != nil:
			return 0, opErr("version", b.name, err)
		}
		return v, nil
	}, cmd)
}

// Snapshot returns a range with the count and version (snapshot.lua).
// Errors: ErrInvalid.
func (b *redisBoard) Snapshot(start, stop int) *store.Op[Snapshot] {
	if err := checkRange("snapshot", b.name, start, stop); err != nil {
		return store.Failed[Snapshot](err)
	}
	return readRun(b, "snapshot", snapshotScript, func(r *store.Reply, reach bool) (Snapshot, error) {
		s := Snapshot{Version: r.Int(), Count: int(r.Int())}
		flat := r.Array()
		if err := r.End(); err != nil {
			return Snapshot{}, err
		}
		var err error
		s.Entries, err = b.entries("snapshot", flat, start, reach)
		return s, err
	}, start-1, stop-1)
}

// ArchiveAndClear archives the top and clears the board in one step
// (reset.lua). Errors: ErrInvalid.
func (b *redisBoard) ArchiveAndClear(date string, top int, ttl time.Duration) *store.Op[Reset] {
	if err := checkReset("archive_and_clear", b.name, date, top, ttl); err != nil {
		return store.Failed[Reset](err)
	}
	extra := []string{b.r.keys.RankArchive(b.name, date)}
	return runWrite(b, "archive_and_clear", resetScript, extra, func(r *store.Reply) (Reset, error) {
		s := Reset{Done: r.Int() == 1, Archived: int(r.Int()), Cleared: int(r.Int()), Version: r.Int()}
		return s, r.End()
	}, date, top, max(ttl.Milliseconds(), 1))
}

// Archive reads the archive of date (HGET data). Errors: ErrInvalid,
// store.ErrReply.
func (b *redisBoard) Archive(date string) *store.Op[Archived] {
	if err := checkDate("archive", b.name, date); err != nil {
		return store.Failed[Archived](err)
	}
	cmd := redis.NewStringCmd(context.Background(), "hget", b.r.keys.RankArchive(b.name, date), "data")
	return store.Commands(b.r.c, func() (Archived, error) {
		data, err := cmd.Bytes()
		switch {
		case errors.Is(err, redis.Nil):
			return Archived{}, nil
		case err != nil:
			return Archived{}, opErr("archive", b.name, err)
		}
		entries, err := decodeArchive(b.what("archive"), data)
		return Archived{Entries: entries, Found: true}, err
	}, cmd)
}
