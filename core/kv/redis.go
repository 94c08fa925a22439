package kv

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Redis is a Store kept in Redis, standalone or Cluster. Every key is
// store.Keys{Prefix: prefix}.Global(key).
//
// Commands: Get is GET, Set is SET (with an expiry when ttl > 0), Delete is
// DEL, IncrBy is INCRBYFLOAT (atomic, keeps the TTL; run in a script that
// also range-checks the result), TTL is PTTL; each is one command, so the
// Lua runtime batches them with other tasks' commands. MGet sends one GET per
// key in the same round trip (split by node on Cluster), so it never fails
// with CROSSSLOT and is not a snapshot. MSet runs SETs in MULTI/EXEC (a
// store.Work op: transactions never share a pipeline): on a standalone
// server all pairs are written atomically; on Cluster the pairs are grouped
// by hash slot (go-redis refuses a multi-slot TxPipeline) and each slot's
// group is its own transaction, run concurrently, so MSet is atomic per slot
// only: keys sharing a {hash tag} are written together, other keys may
// become visible one slot at a time, and if one slot fails the others may
// already be written.
//
// With WithAnnounce, every write also PUBLISHes "<origin>\n<key>" on the
// cache-invalidation channel, in the same round trip as the write, so other
// processes evict key from their local caches.
//
// Errors wrap the go-redis error with the operation and key, e.g.
// `kv: get "k": dial tcp ...`, except IncrBy's ErrNotNumber and ErrNotFinite.
type Redis struct {
	c        redis.UniversalClient
	keys     store.Keys
	cluster  bool
	announce string // channel; "" = no announcements
	origin   string
	durable  store.Durability
}

var _ Store = (*Redis)(nil)

// RedisOption configures NewRedis.
type RedisOption func(*Redis)

// WithAnnounce makes every write announce its key on channel (a full
// channel name: store.Keys.CacheInvalidation) as "<origin>\n<key>"; origin
// tells a process its own announcements apart.
func WithAnnounce(channel, origin string) RedisOption {
	return func(r *Redis) { r.announce, r.origin = channel, origin }
}

// WithDurability makes Set, MSet, Delete and IncrBy wait for d's replicas
// (see store.Durability); their errors are then a *store.NotDurableError
// when the replicas did not confirm the write in time.
func WithDurability(d store.Durability) RedisOption {
	return func(r *Redis) { r.durable = d }
}

// NewRedis returns a Store on c with keys under prefix. It does no I/O and
// never fails; c stays owned by the caller.
func NewRedis(c redis.UniversalClient, prefix string, opts ...RedisOption) *Redis {
	_, cluster := c.(*redis.ClusterClient)
	r := &Redis{c: c, keys: store.Keys{Prefix: prefix}, cluster: cluster}
	for _, o := range opts {
		o(r)
	}
	return r
}

var bg = context.Background()

// announced appends the announcements of keys to cmds.
func (r *Redis) announced(cmds []redis.Cmder, keys ...string) []redis.Cmder {
	if r.announce == "" {
		return cmds
	}
	for _, k := range keys {
		cmds = append(cmds, redis.NewIntCmd(bg, "publish", r.announce, r.origin+"\n"+k))
	}
	return cmds
}

// announceErr is the error of the first announcement that failed: the write
// happened, but other caches may keep the old value until their TTL.
func announceErr(op, key string, cmds []redis.Cmder) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return fmt.Errorf("kv: %s %q: written, but announcing the change to other caches failed: %w", op, key, err)
		}
	}
	return nil
}

// Get returns the value of key (GET).
func (r *Redis) Get(key string) *store.Op[Value] {
	cmd := redis.NewStringCmd(bg, "get", r.keys.Global(key))
	return store.Commands(r.c, func() (Value, error) {
		v, err := cmd.Bytes()
		if err == redis.Nil {
			return Value{}, nil
		}
		if err != nil {
			return Value{}, fmt.Errorf("kv: get %q: %w", key, err)
		}
		return Value{Data: nonNil(v), Found: true}, nil
	}, cmd)
}

func nonNil(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

// MGet returns the values of keys (one GET each, one round trip). Errors
// name the first key whose GET failed.
func (r *Redis) MGet(keys []string) *store.Op[[][]byte] {
	if len(keys) == 0 {
		return store.Local(func() ([][]byte, error) { return [][]byte{}, nil })
	}
	cmds := make([]redis.Cmder, len(keys))
	for i, k := range keys {
		cmds[i] = redis.NewStringCmd(bg, "get", r.keys.Global(k))
	}
	return store.Commands(r.c, func() ([][]byte, error) {
		out := make([][]byte, len(keys))
		for i, c := range cmds {
			v, err := c.(*redis.StringCmd).Bytes()
			switch {
			case err == redis.Nil:
			case err != nil:
				return nil, fmt.Errorf("kv: mget %q: %w", keys[i], err)
			default:
				out[i] = nonNil(v)
			}
		}
		return out, nil
	}, cmds...)
}

// Set stores value under key (SET, with an expiry when ttl > 0).
func (r *Redis) Set(key string, value []byte, ttl time.Duration) *store.Op[struct{}] {
	args := []any{"set", r.keys.Global(key), nonNil(value)}
	if ttl = normTTL(ttl); ttl > 0 {
		args = append(args, "px", ttl.Milliseconds())
	}
	cmd := redis.NewStatusCmd(bg, args...)
	cmds := r.announced([]redis.Cmder{cmd}, key)
	return store.Commands(r.c, func() (struct{}, error) {
		if err := cmd.Err(); err != nil {
			return struct{}{}, fmt.Errorf("kv: set %q: %w", key, err)
		}
		return struct{}{}, announceErr("set", key, cmds[1:])
	}, cmds...).Durable(r.durable)
}

// MSet stores all pairs in MULTI/EXEC transactions: one in total on a
// standalone server, one per hash slot on Cluster (see Redis), then
// announces every key in one round trip. Errors name the first key that
// failed (or the first key of the failed transaction).
func (r *Redis) MSet(pairs []Pair, ttl time.Duration) *store.Op[struct{}] {
	return store.Work(func(ctx context.Context) (struct{}, error) {
		if len(pairs) == 0 {
			return struct{}{}, nil
		}
		tctx, cancel := store.Bound(ctx, r.c) // the transactions, in parallel on Cluster: one round trip's bound
		err := r.mset(tctx, pairs, normTTL(ttl))
		cancel()
		if err != nil {
			return struct{}{}, err
		}
		keys := make([]string, len(pairs))
		for i, p := range pairs {
			keys[i] = p.Key
		}
		cmds := r.announced(nil, keys...)
		if len(cmds) == 0 {
			return struct{}{}, nil
		}
		_, err = store.Commands(r.c, func() (struct{}, error) { return struct{}{}, announceErr("mset", keys[0], cmds) }, cmds...).Do(ctx)
		return struct{}{}, err
	})
}

func (r *Redis) mset(ctx context.Context, pairs []Pair, ttl time.Duration) error {
	if !r.cluster {
		return r.msetTx(ctx, pairs, ttl)
	}
	bySlot := make(map[uint16][]Pair)
	var order []uint16
	for _, p := range pairs {
		s := keySlot(r.keys.Global(p.Key))
		if _, ok := bySlot[s]; !ok {
			order = append(order, s)
		}
		bySlot[s] = append(bySlot[s], p)
	}
	if len(order) == 1 {
		return r.msetTx(ctx, pairs, ttl)
	}
	// One transaction per slot, a bounded number at a time.
	const parallel = 16
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, parallel)
		errs = make([]error, len(order))
	)
	for i, s := range order {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = r.msetTx(ctx, bySlot[s], ttl)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *Redis) msetTx(ctx context.Context, pairs []Pair, ttl time.Duration) error {
	cmds := make([]*redis.StatusCmd, len(pairs))
	_, err := store.TxPipelined(ctx, r.c, r.keys.Global(pairs[0].Key), r.durable, func(p redis.Pipeliner) error {
		for i, pr := range pairs {
			cmds[i] = p.Set(ctx, r.keys.Global(pr.Key), nonNil(pr.Value), ttl)
		}
		return nil
	})
	if err == nil {
		return nil
	}
	for i, cmd := range cmds {
		if cerr := cmd.Err(); cerr != nil {
			return fmt.Errorf("kv: mset %q: %w", pairs[i].Key, cerr)
		}
	}
	return fmt.Errorf("kv: mset %q: %w", pairs[0].Key, err)
}

// Delete removes key (DEL) and reports whether it existed.
func (r *Redis) Delete(key string) *store.Op[bool] {
	cmd := redis.NewIntCmd(bg, "del", r.keys.Global(key))
	cmds := r.announced([]redis.Cmder{cmd}, key)
	return store.Commands(r.c, func() (bool, error) {
		n, err := cmd.Result()
		if err != nil {
			return false, fmt.Errorf("kv: delete %q: %w", key, err)
		}
		return n > 0, announceErr("delete", key, cmds[1:])
	}, cmds...).Durable(r.durable)
}

// incrScript is INCRBYFLOAT plus a float64 range check (see its header).
//
//go:embed scripts/incr.lua
var incrSrc string

var incrScript = store.NewScript("kv/incr.lua", incrSrc)

// IncrBy adds delta to the number under key with INCRBYFLOAT (atomic, keeps
// the TTL; see Store.IncrBy for the number format), run inside a small Lua
// script that also rejects results outside the float64 range. Errors wrap
// ErrNotNumber when the stored value is not a number, ErrNotFinite when
// delta or the result is NaN or infinite (the value is then unchanged), or
// else the Redis error.
func (r *Redis) IncrBy(key string, delta float64) *store.Op[float64] {
	if !finite(delta) {
		return store.Failed[float64](fmt.Errorf("%w: %q", ErrNotFinite, key))
	}
	cmd := incrScript.Cmd([]string{r.keys.Global(key)}, delta)
	cmds := r.announced([]redis.Cmder{cmd}, key)
	return store.Commands(r.c, func() (float64, error) {
		v, err := cmd.Float64()
		if err != nil {
			var rerr redis.Error
			if errors.As(err, &rerr) {
				msg := rerr.Error()
				switch {
				case strings.Contains(msg, "not a valid float"):
					return 0, fmt.Errorf("%w: %q", ErrNotNumber, key)
				case strings.Contains(msg, "NaN or Infinity"):
					return 0, fmt.Errorf("%w: %q", ErrNotFinite, key)
				}
			}
			return 0, fmt.Errorf("kv: incrby %q: %w", key, err)
		}
		return v, announceErr("incrby", key, cmds[1:])
	}, cmds...).Durable(r.durable)
}

// TTL returns the remaining time to live of key (PTTL).
func (r *Redis) TTL(key string) *store.Op[Expiry] {
	cmd := redis.NewIntCmd(bg, "pttl", r.keys.Global(key))
	return store.Commands(r.c, func() (Expiry, error) {
		ms, err := cmd.Result()
		if err != nil {
			return Expiry{}, fmt.Errorf("kv: ttl %q: %w", key, err)
		}
		switch {
		case ms == -1:
			return Expiry{Left: NoExpiry, Found: true}, nil
		case ms < 0:
			return Expiry{}, nil
		}
		return Expiry{Left: time.Duration(ms) * time.Millisecond, Found: true}, nil
	}, cmd)
}

// Invalidate announces key without writing it (nothing without WithAnnounce).
func (r *Redis) Invalidate(key string) *store.Op[struct{}] {
	cmds := r.announced(nil, key)
	if len(cmds) == 0 {
		return store.Local(func() (struct{}, error) { return struct{}{}, nil })
	}
	return store.Commands(r.c, func() (struct{}, error) {
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				return struct{}{}, fmt.Errorf("kv: invalidate %q: %w", key, err)
			}
		}
		return struct{}{}, nil
	}, cmds...)
}
