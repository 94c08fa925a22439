package lock

import (
	_ "embed"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/core/store"
)

// The scripts; each file's header lists its KEYS, ARGV and replies.
var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/release_exclusive.lua
	releaseExclSrc string
	//go:embed scripts/release_shared.lua
	releaseShrdSrc string
	//go:embed scripts/extend.lua
	extendSrc string
	//go:embed scripts/info.lua
	infoSrc string
	//go:embed scripts/leave.lua
	leaveSrc string

	acquireScript     = store.NewScript("lock/acquire.lua", acquireSrc)
	releaseExclScript = store.NewScript("lock/release_exclusive.lua", releaseExclSrc)
	releaseShrdScript = store.NewScript("lock/release_shared.lua", releaseShrdSrc)
	extendScript      = store.NewScript("lock/extend.lua", extendSrc)
	infoScript        = store.NewScript("lock/info.lua", infoSrc)
	leaveScript       = store.NewScript("lock/leave.lua", leaveSrc)
)

// Script status codes, shared by both backends and mapped to errors by
// statusErr.
const (
	stGranted   = 1
	stRefused   = 0
	stNotHeld   = -1
	stUpgrade   = -2
	modeExclArg = "x"
	modeShrdArg = "s"
)

// statusErr maps a script (or Memory) status code to the error an operation
// returns: nil for success codes, ErrNotHeld, ErrUpgrade, or an
// unexpected-reply error.
func statusErr(op, name string, code int64) error {
	switch code {
	case stGranted, stRefused:
		return nil
	case stNotHeld:
		return fmt.Errorf("lock: %s %q: %w", op, name, ErrNotHeld)
	case stUpgrade:
		return fmt.Errorf("lock: %s %q: %w", op, name, ErrUpgrade)
	}
	return fmt.Errorf("lock: %s %q: %w: script status %d", op, name, store.ErrReply, code)
}

// Redis is a Backend on Redis, standalone, Sentinel or Cluster. Every
// operation is one Lua script (scripts/*.lua, run with EVALSHA), so each is
// atomic, one round trip, and uses the server's clock (TIME) for leases,
// acquired_at and queue order.
//
// Keys of lock name, with k = store.Keys{Prefix: prefix} (all share the hash
// tag {name}, so every script runs in one Cluster slot):
//
//	k.Lock(name)            hash   the exclusive hold: owner, count, token, acquired_at (ms); PEXPIRE = lease
//	k.RWLock(name)          hash   the shared holds: owner -> "count:token:acquired_at_ms"
//	k.RWLockDeadlines(name) zset   owner -> lease deadline (ms) of its shared hold
//	k.LockQueue(name)       zset   fair waiters: owner -> enqueue time (ms, strictly increasing)
//	k.LockWaiters(name)     zset   fair waiters: owner -> liveness deadline (ms)
//	k.LockToken(name)       string fencing-token counter; never expires (one small key per name ever locked)
//	k.RWLockWriters(name)   zset   waiting writers (not fair): owner -> liveness deadline (ms)
//
// The hashes and sorted sets expire by themselves when their last lease or
// waiter deadline passes, so an abandoned lock leaves only its token.
//
// Wake-ups: the release, fair-queue and leave paths PUBLISH (inside the
// script) on the server channel k.LockReleased(name). Watch subscribes to it
// through the bus given to NewRedis, a bus that takes full channel names
// (created without a prefix: pubsub.NewRedis(c, "", ev)); one subscription
// per lock and process serves every watcher and lingers a while after the
// last one leaves. Expiry is not published.
//
// Errors of a reply name the operation and lock, e.g. `lock: release "boss":
// ...`; a failed connection comes as go-redis reports it (the Session adds
// the operation and lock).
type Redis struct {
	c         redis.UniversalClient
	keys      store.Keys
	layoutErr error
	watch     *watcher
	seed      maphash.Seed
	recent    [keyCacheSize]atomic.Pointer[lockKeySet] // the keys of recently used names
	durable   store.Durability
	service   any // acquire.lua's ARGV[7], boxed once (WithServiceName)
}

// RedisOption configures NewRedis.
type RedisOption func(*Redis)

// WithDurability makes grants (TryAcquire) and renewals (Extend) wait for
// d's replicas (see store.Durability): a grant or renewal a failover could
// lose would let a second holder in. Their error is then a
// *store.NotDurableError when the replicas did not confirm in time; the
// master has applied the grant, which stands there until its ttl lapses or
// the owner releases it.
func WithDurability(d store.Durability) RedisOption {
	return func(r *Redis) { r.durable = d }
}

// WithServiceName stores name (global.service_name) with every hold this
// backend grants, so Info in any process reports the holder's service name
// (Holder.ServiceName), as the spec's lock info shows it.
func WithServiceName(name string) RedisOption {
	return func(r *Redis) { r.service = name }
}

// lockKeySet is the keys and channel of one lock name.
type lockKeySet struct {
	name    string
	boxed   [7]any // the keys, boxed once as script arguments
	channel any    // the wake-up channel, boxed once as a script argument
}

// keyCacheSize is the number of names whose keys are kept (a direct-mapped
// cache: a lock used again does not build its eight names again). With 256
// locks in use, 1 024 slots missed on ~12 % of calls (two names sharing a
// slot evict each other, 16 allocations per rebuild); 8 192 (64 KB) miss on
// ~1.5 %.
const keyCacheSize = 8192

var _ Backend = (*Redis)(nil)

// NewRedis returns a Backend on c with keys under prefix, using bus for
// Watch (see Redis for the bus it needs). It does no I/O and never fails; c
// and bus stay owned by the caller. With a nil bus, Watch fails (waiters
// then retry at their retry interval).
func NewRedis(c redis.UniversalClient, prefix string, bus pubsub.Bus, opts ...RedisOption) *Redis {
	k := store.Keys{Prefix: prefix}
	r := &Redis{c: c, keys: k, layoutErr: checkLayout(k), watch: newWatcher(bus), seed: maphash.MakeSeed(), service: ""}
	for _, o := range opts {
		o(r)
	}
	return r
}

// lockKeys returns the KEYS every script gets and the wake-up channel.
// Errors: ErrInvalid for a bad name, or for a prefix that would split a
// lock's keys across hash slots (an unbalanced '{').
func (r *Redis) lockKeys(op, name string) ([]any, any, error) {
	if err := checkName(op, name); err != nil {
		return nil, nil, err
	}
	if r.layoutErr != nil {
		return nil, nil, fmt.Errorf("lock: %s %q: %w", op, name, r.layoutErr)
	}
	slot := &r.recent[maphash.String(r.seed, name)&(keyCacheSize-1)]
	set := slot.Load()
	if set == nil || set.name != name {
		keys, channel := r.keys.LockKeys(name)
		set = &lockKeySet{name: name, channel: channel}
		for i, k := range keys {
			set.boxed[i] = k
		}
		slot.Store(set)
	}
	return set.boxed[:], set.channel, nil
}

// checkLayout reports a prefix under which the keys of one lock would not
// share a hash slot. That depends on the prefix only (lock names cannot
// start with '}').
func checkLayout(k store.Keys) error {
	keys, _ := k.LockKeys("x")
	tag := store.HashTag(keys[0])
	for _, key := range keys[1:] {
		if store.HashTag(key) != tag {
			return fmt.Errorf("%w: keys %q and %q would not share a hash slot (check the prefix %q)", ErrInvalid, keys[0], key, k.Prefix)
		}
	}
	return nil
}

// Script arguments that are the same for every call, boxed once (an
// argument is an `any`: boxing a string per call allocates).
var (
	argExcl, argShrd any = modeExclArg, modeShrdArg
	argZero          any = "0"
)

func modeArg(m Mode) any {
	if m == Shared {
		return argShrd
	}
	return argExcl
}

// acquireFlagArgs are acquire.lua's ARGV[2] values, boxed once, indexed
// by mode (0 exclusive, 8 shared) | reentrant 4 | fair 2 | waiting 1.
var acquireFlagArgs = func() (f [16]any) {
	for i := range f {
		b := []byte("x000")
		if i&8 != 0 {
			b[0] = 's'
		}
		for bit, pos := 4, 1; bit >= 1; bit, pos = bit/2, pos+1 {
			if i&bit != 0 {
				b[pos] = '1'
			}
		}
		f[i] = string(b)
	}
	return f
}()

func acquireFlags(mode Mode, o Options) any {
	i := 0
	if mode == Shared {
		i |= 8
	}
	if o.Reentrant {
		i |= 4
	}
	if o.Fair {
		i |= 2
	}
	if o.Waiting {
		i |= 1
	}
	return acquireFlagArgs[i]
}

// tokenArg is a token as a script argument; "0" (no hold), the common
// case, is boxed once.
func tokenArg(token int64) any {
	if token == 0 {
		return argZero
	}
	return token
}

// TryAcquire runs scripts/acquire.lua. Errors: ErrNotHeld, ErrUpgrade,
// ErrInvalid, the Redis error.
func (r *Redis) TryAcquire(name, owner string, mode Mode, o Options) *store.Op[Attempt] {
	const op = "acquire"
	if err := checkArgs(op, name, owner, mode); err != nil {
		return store.Failed[Attempt](err)
	}
	if err := checkTTL(op, name, o.TTL); err != nil {
		return store.Failed[Attempt](err)
	}
	keys, channel, err := r.lockKeys(op, name)
	if err != nil {
		return store.Failed[Attempt](err)
	}
	cmd := acquireScript.CmdBoxed(keys, owner, acquireFlags(mode, o), ttlMillis(o.TTL), waiterTTL(o), channel, tokenArg(o.Token), r.service)
	return store.Commands(r.c, func() (Attempt, error) {
		rep := store.ReadReply("lock: "+op, cmd.Cmd)
		switch status := rep.Int(); {
		case rep.Err() != nil:
		case status == stGranted:
			g := Grant{Token: rep.Int(), Count: int(rep.Int()), AcquiredAt: time.UnixMilli(rep.Int()), TTL: time.Duration(rep.Int()) * time.Millisecond}
			if err := rep.End(); err != nil {
				return Attempt{}, err
			}
			return Attempt{Granted: true, Grant: g}, nil
		case status == stRefused:
			retry := rep.Int()
			if err := rep.End(); err != nil {
				return Attempt{}, err
			}
			return Attempt{RetryIn: time.Duration(max(retry, 1)) * time.Millisecond}, nil
		default:
			if err := rep.End(); err != nil {
				return Attempt{}, err
			}
			return Attempt{}, statusErr(op, name, status)
		}
		return Attempt{}, rep.Err()
	}, cmd).Durable(r.durable)
}

// Release runs scripts/release_exclusive.lua or release_shared.lua.
// Errors: ErrNotHeld, ErrInvalid, the Redis error.
func (r *Redis) Release(name, owner string, mode Mode, token int64, keep int) *store.Op[None] {
	const op = "release"
	if err := checkRelease(op, name, owner, mode, keep); err != nil {
		return store.Failed[None](err)
	}
	keys, channel, err := r.lockKeys(op, name)
	if err != nil {
		return store.Failed[None](err)
	}
	keepArg := argZero
	if keep > 0 {
		keepArg = keep
	}
	var cmd *store.ScriptCmd
	if mode == Exclusive {
		cmd = releaseExclScript.CmdBoxed(keys[:1], owner, channel, keepArg, token)
	} else {
		cmd = releaseShrdScript.CmdBoxed(keys, owner, channel, keepArg, token)
	}
	return store.Commands(r.c, func() (None, error) { return statusReply(op, name, cmd.Cmd) }, cmd)
}

// statusReply reads a {status} reply: nil for stGranted, else the status's
// error.
func statusReply(op, name string, cmd *redis.Cmd) (None, error) {
	rep := store.ReadReply("lock: "+op, cmd)
	status := rep.Int()
	if err := rep.End(); err != nil {
		return None{}, err
	}
	if status == stGranted {
		return None{}, nil
	}
	return None{}, statusErr(op, name, status)
}

// Extend runs scripts/extend.lua. Errors: ErrNotHeld, ErrInvalid, the Redis
// error.
func (r *Redis) Extend(name, owner string, mode Mode, token int64, ttl time.Duration) *store.Op[None] {
	const op = "extend"
	if err := checkArgs(op, name, owner, mode); err != nil {
		return store.Failed[None](err)
	}
	if err := checkTTL(op, name, ttl); err != nil {
		return store.Failed[None](err)
	}
	keys, _, err := r.lockKeys(op, name)
	if err != nil {
		return store.Failed[None](err)
	}
	cmd := extendScript.CmdBoxed(keys, owner, modeArg(mode), ttlMillis(ttl), token)
	return store.Commands(r.c, func() (None, error) { return statusReply(op, name, cmd.Cmd) }, cmd).Durable(r.durable)
}

// Info runs scripts/info.lua (read-only). Errors: ErrInvalid, the Redis
// error.
func (r *Redis) Info(name string) *store.Op[Info] {
	const op = "info"
	keys, _, err := r.lockKeys(op, name)
	if err != nil {
		return store.Failed[Info](err)
	}
	cmd := infoScript.CmdBoxed(keys)
	return store.Commands(r.c, func() (Info, error) {
		rep := store.ReadReply("lock: "+op, cmd.Cmd)
		mode := rep.Str()
		ttl, acquired, token, waiting := rep.Int(), rep.Int(), rep.Int(), rep.Int()
		info := Info{Waiting: int(waiting)}
		if mode != "" {
			info.Held = true
			info.TTL = time.Duration(ttl) * time.Millisecond
			info.AcquiredAt = time.UnixMilli(acquired)
			info.Token = token
			if mode == modeShrdArg {
				info.Mode = Shared
			}
			for rep.Len() > 0 {
				o, count := rep.Str(), rep.Int()
				info.Owners = append(info.Owners, Holder{Owner: o, Count: int(count), ServiceName: rep.Str()})
			}
		}
		if err := rep.End(); err != nil {
			return Info{}, err
		}
		slices.SortFunc(info.Owners, func(a, b Holder) int { return strings.Compare(a.Owner, b.Owner) })
		return info, nil
	}, cmd)
}

// LeaveQueue runs scripts/leave.lua. Errors: ErrInvalid, the Redis error.
func (r *Redis) LeaveQueue(name, owner string) *store.Op[None] {
	const op = "leave queue"
	if err := checkArgs(op, name, owner, Exclusive); err != nil {
		return store.Failed[None](err)
	}
	keys, channel, err := r.lockKeys(op, name)
	if err != nil {
		return store.Failed[None](err)
	}
	cmd := leaveScript.CmdBoxed(keys, owner, channel)
	return store.Commands(r.c, func() (None, error) {
		if err := cmd.Err(); err != nil {
			return None{}, opErr(op, name, err)
		}
		return None{}, nil
	}, cmd)
}

// Watch subscribes fn to name's wake-up channel through the bus (see
// Redis). ready fails with ErrInvalid, an error when the backend has no bus,
// or the bus's Subscribe error (pubsub.ErrClosed, Redis errors, a timeout),
// wrapped as `lock: watch "name": ...`.
func (r *Redis) Watch(name string, fn func(), ready func(error)) func() {
	const op = "watch"
	if _, _, err := r.lockKeys(op, name); err != nil {
		ready(err)
		return func() {}
	}
	return r.watch.add(name, r.keys.LockReleased(name), fn, ready)
}
