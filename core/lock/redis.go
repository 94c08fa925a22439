package lock

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/core/store"
)

// The scripts; each file's header lists its KEYS, ARGV and replies.
var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/extend.lua
	extendSrc string
	//go:embed scripts/info.lua
	infoSrc string
	//go:embed scripts/leave.lua
	leaveSrc string

	acquireScript = redis.NewScript(acquireSrc)
	releaseScript = redis.NewScript(releaseSrc)
	extendScript  = redis.NewScript(extendSrc)
	infoScript    = redis.NewScript(infoSrc)
	leaveScript   = redis.NewScript(leaveSrc)
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
	return fmt.Errorf("lock: %s %q: unexpected script status %d", op, name, code)
}

// Redis is a Backend on Redis, standalone or Cluster. Every operation is one
// Lua script (scripts/*.lua, run with EVALSHA), so each is atomic and uses
// the server's clock (TIME) for leases, acquired_at and queue order.
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
//
// The hashes and sorted sets expire by themselves when their last lease or
// waiter deadline passes, so an abandoned lock leaves only its token.
//
// Wake-ups: release and the fair-queue paths PUBLISH (inside the script) on
// the server channel k.LockReleased(name) = <prefix>lock:released:{name}.
// Watch subscribes to it through the bus given to NewRedis: a Redis bus on
// the same deployment created without a prefix — pubsub.NewRedis(c, "", ev)
// — so bus channels are the server's (it may be shared with other internal
// channels; user channels live under <prefix>pubsub:, so they cannot
// collide). Expiry is not published.
//
// Errors wrap the go-redis error with the operation and lock name, e.g.
// `lock: release "boss": dial tcp ...`; the sentinels are wrapped the same
// way.
type Redis struct {
	c    redis.UniversalClient
	keys store.Keys
	bus  pubsub.Bus

	mu      sync.Mutex
	watches map[string]*watch // by channel
	nextFn  uint64
}

// watch is one subscription to a lock's release channel, shared by every
// Watch of that lock in this process. It lingers a while after its last
// watcher leaves, so a contended lock does not pay a SUBSCRIBE round trip
// (and its confirmation) on every acquire.
type watch struct {
	sub   pubsub.Subscription
	fns   map[uint64]func()
	idle  *time.Timer
	ready bool // subscribed; until then other Watch calls wait on done
	done  chan struct{}
	err   error
}

// watchLinger is how long an unwatched release channel stays subscribed.
const watchLinger = 5 * time.Second

var _ Backend = (*Redis)(nil)

// NewRedis returns a Backend on c with keys under prefix, using bus for
// Watch (see Redis for the bus it needs). It does no I/O and never fails; c
// and bus stay owned by the caller. A nil bus makes Watch fail (Acquire then
// polls).
func NewRedis(c redis.UniversalClient, prefix string, bus pubsub.Bus) *Redis {
	return &Redis{c: c, keys: store.Keys{Prefix: prefix}, bus: bus}
}

// lockKeys returns the KEYS every script gets, after checking that they
// share one hash slot (ErrInvalid otherwise: a bad name, or a prefix with an
// unbalanced '{').
func (r *Redis) lockKeys(op, name string) ([]string, error) {
	if err := checkName(op, name); err != nil {
		return nil, err
	}
	k := r.keys
	keys := []string{k.Lock(name), k.RWLock(name), k.RWLockDeadlines(name),
		k.LockQueue(name), k.LockWaiters(name), k.LockToken(name)}
	tag := hashTag(keys[0])
	for _, key := range keys[1:] {
		if hashTag(key) != tag {
			return nil, fmt.Errorf("lock: %s %q: %w: keys %q and %q would not share a hash slot (check the prefix %q)",
				op, name, ErrInvalid, keys[0], key, k.Prefix)
		}
	}
	return keys, nil
}

func modeArg(m Mode) string {
	if m == Shared {
		return modeShrdArg
	}
	return modeExclArg
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// run runs s and returns its array reply.
func (r *Redis) run(ctx context.Context, s *redis.Script, op, name string, keys []string, args ...any) ([]any, error) {
	res, err := s.Run(ctx, r.c, keys, args...).Slice()
	if err != nil {
		return nil, opErr(op, name, err)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("lock: %s %q: empty script reply", op, name)
	}
	return res, nil
}

// ints converts an all-integer script reply.
func ints(op, name string, res []any) ([]int64, error) {
	out := make([]int64, len(res))
	for i, v := range res {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("lock: %s %q: unexpected script reply %v", op, name, res)
		}
		out[i] = n
	}
	return out, nil
}

// TryAcquire runs scripts/acquire.lua. Errors: ErrUpgrade, ErrInvalid, the
// Redis error (wrapped as `lock: acquire "name": ...`).
func (r *Redis) TryAcquire(ctx context.Context, name, owner string, mode Mode, o Options) (Grant, bool, time.Duration, error) {
	const op = "acquire"
	if err := checkArgs(op, name, owner, mode); err != nil {
		return Grant{}, false, 0, err
	}
	if err := checkTTL(op, name, o.TTL); err != nil {
		return Grant{}, false, 0, err
	}
	keys, err := r.lockKeys(op, name)
	if err != nil {
		return Grant{}, false, 0, err
	}
	wttl := o.WaiterTTL
	if wttl <= 0 {
		wttl = DefaultWaiterTTL(0)
	}
	res, err := r.run(ctx, acquireScript, op, name, keys,
		owner, modeArg(mode), ttlMillis(o.TTL), boolArg(o.Reentrant), boolArg(o.Fair),
		ttlMillis(wttl), r.keys.LockReleased(name))
	if err != nil {
		return Grant{}, false, 0, err
	}
	v, err := ints(op, name, res)
	if err != nil {
		return Grant{}, false, 0, err
	}
	switch {
	case v[0] == stGranted && len(v) == 5:
		return Grant{
			Token:      v[1],
			Count:      int(v[2]),
			AcquiredAt: time.UnixMilli(v[3]),
			TTL:        time.Duration(v[4]) * time.Millisecond,
		}, true, 0, nil
	case v[0] == stRefused && len(v) == 2:
		return Grant{}, false, time.Duration(max(v[1], 1)) * time.Millisecond, nil
	case v[0] < 0:
		return Grant{}, false, 0, statusErr(op, name, v[0])
	}
	return Grant{}, false, 0, fmt.Errorf("lock: %s %q: unexpected script reply %v", op, name, v)
}

// Release runs scripts/release.lua. Errors: ErrNotHeld, ErrInvalid, the
// Redis error.
func (r *Redis) Release(ctx context.Context, name, owner string, mode Mode) (int, error) {
	const op = "release"
	if err := checkArgs(op, name, owner, mode); err != nil {
		return 0, err
	}
	keys, err := r.lockKeys(op, name)
	if err != nil {
		return 0, err
	}
	res, err := r.run(ctx, releaseScript, op, name, keys, owner, modeArg(mode), r.keys.LockReleased(name))
	if err != nil {
		return 0, err
	}
	v, err := ints(op, name, res)
	if err != nil {
		return 0, err
	}
	if v[0] == stGranted && len(v) == 2 {
		return int(v[1]), nil
	}
	if err := statusErr(op, name, v[0]); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("lock: %s %q: unexpected script reply %v", op, name, v)
}

// Extend runs scripts/extend.lua. Errors: ErrNotHeld, ErrInvalid, the
// Redis error.
func (r *Redis) Extend(ctx context.Context, name, owner string, mode Mode, ttl time.Duration) error {
	const op = "extend"
	if err := checkArgs(op, name, owner, mode); err != nil {
		return err
	}
	if err := checkTTL(op, name, ttl); err != nil {
		return err
	}
	keys, err := r.lockKeys(op, name)
	if err != nil {
		return err
	}
	res, err := r.run(ctx, extendScript, op, name, keys, owner, modeArg(mode), ttlMillis(ttl))
	if err != nil {
		return err
	}
	v, err := ints(op, name, res)
	if err != nil {
		return err
	}
	if v[0] == stGranted {
		return nil
	}
	if err := statusErr(op, name, v[0]); err != nil {
		return err
	}
	return fmt.Errorf("lock: %s %q: unexpected script reply %v", op, name, v)
}

// Info runs scripts/info.lua (read-only). Errors: ErrInvalid, the Redis
// error.
func (r *Redis) Info(ctx context.Context, name string) (Info, bool, error) {
	const op = "info"
	keys, err := r.lockKeys(op, name)
	if err != nil {
		return Info{}, false, err
	}
	res, err := r.run(ctx, infoScript, op, name, keys)
	if err != nil {
		return Info{}, false, err
	}
	bad := func() (Info, bool, error) {
		return Info{}, false, fmt.Errorf("lock: %s %q: unexpected script reply %v", op, name, res)
	}
	if len(res) < 5 || len(res)%2 == 0 {
		return bad()
	}
	mode, ok := res[0].(string)
	if !ok {
		return bad()
	}
	nums, err := ints(op, name, res[1:5])
	if err != nil {
		return Info{}, false, err
	}
	info := Info{Waiting: int(nums[3])}
	if mode == "" {
		return info, false, nil
	}
	info.TTL = time.Duration(nums[0]) * time.Millisecond
	info.AcquiredAt = time.UnixMilli(nums[1])
	info.Token = nums[2]
	if mode == modeShrdArg {
		info.Mode = Shared
	}
	for i := 5; i+1 < len(res); i += 2 {
		o, ok1 := res[i].(string)
		c, ok2 := res[i+1].(int64)
		if !ok1 || !ok2 {
			return bad()
		}
		info.Owners = append(info.Owners, Holder{Owner: o, Count: int(c)})
	}
	slices.SortFunc(info.Owners, func(a, b Holder) int { return strings.Compare(a.Owner, b.Owner) })
	return info, true, nil
}

// LeaveQueue runs scripts/leave.lua. Errors: ErrInvalid, the Redis error.
func (r *Redis) LeaveQueue(ctx context.Context, name, owner string) error {
	const op = "leave queue"
	if err := checkArgs(op, name, owner, Exclusive); err != nil {
		return err
	}
	keys, err := r.lockKeys(op, name)
	if err != nil {
		return err
	}
	if err := leaveScript.Run(ctx, r.c, keys, owner, r.keys.LockReleased(name)).Err(); err != nil {
		return opErr(op, name, err)
	}
	return nil
}

// Watch subscribes fn to name's wake-up channel through the bus (see
// Redis). Errors: ErrInvalid, an error when the backend has no bus, and the
// bus's Subscribe error (ctx's error, pubsub.ErrClosed, Redis errors),
// wrapped as `lock: watch "name": ...`.
func (r *Redis) Watch(ctx context.Context, name string, fn func()) (func(), error) {
	const op = "watch"
	if _, err := r.lockKeys(op, name); err != nil {
		return nil, err
	}
	if r.bus == nil {
		return nil, fmt.Errorf("lock: %s %q: no pub/sub bus", op, name)
	}
	if fn == nil {
		return nil, invalid(op, name, "nil func")
	}
	channel := r.keys.LockReleased(name)
	r.mu.Lock()
	if r.watches == nil {
		r.watches = map[string]*watch{}
	}
	w := r.watches[channel]
	if w == nil {
		w = &watch{fns: map[uint64]func(){}, done: make(chan struct{})}
		r.watches[channel] = w
		r.mu.Unlock()
		sub, err := r.bus.Subscribe(ctx, channel, func(pubsub.Message) { r.fire(w) })
		r.mu.Lock()
		w.sub, w.err, w.ready = sub, err, true
		close(w.done)
		if err != nil {
			delete(r.watches, channel)
			r.mu.Unlock()
			return nil, opErr(op, name, err)
		}
	} else if !w.ready {
		r.mu.Unlock()
		select {
		case <-w.done:
		case <-ctx.Done():
			return nil, opErr(op, name, ctx.Err())
		}
		if w.err != nil {
			return nil, opErr(op, name, w.err)
		}
		r.mu.Lock()
		if r.watches[channel] != w { // it lingered out meanwhile: start over
			r.mu.Unlock()
			return r.Watch(ctx, name, fn)
		}
	}
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	r.nextFn++
	id := r.nextFn
	w.fns[id] = fn
	r.mu.Unlock()
	return func() { r.unwatch(channel, w, id) }, nil
}

func (r *Redis) fire(w *watch) {
	r.mu.Lock()
	fns := make([]func(), 0, len(w.fns))
	for _, fn := range w.fns {
		fns = append(fns, fn)
	}
	r.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

func (r *Redis) unwatch(channel string, w *watch, id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(w.fns, id)
	if len(w.fns) > 0 || w.idle != nil {
		return
	}
	w.idle = time.AfterFunc(watchLinger, func() {
		r.mu.Lock()
		if len(w.fns) > 0 || r.watches[channel] != w {
			r.mu.Unlock()
			return
		}
		delete(r.watches, channel)
		r.mu.Unlock()
		w.sub.Unsubscribe()
	})
}
