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
// Commands: Get is GET, Set is SET (with an expiry when ttl > 0), Delete is DEL,
// IncrBy is INCRBYFLOAT (atomic, keeps the TTL; run in a script that also
// range-checks the result), TTL is PTTL. MGet pipelines one GET per key
// (go-redis splits the pipeline by node on Cluster), so it never fails with
// CROSSSLOT and is not a snapshot. MSet runs SETs in MULTI/EXEC: on a
// standalone server all pairs are written atomically; on Cluster the pairs
// are grouped by hash slot (go-redis refuses a multi-slot TxPipeline) and
// each slot's group is its own transaction, run concurrently, so MSet is
// atomic per slot only: keys sharing a {hash tag} are written together,
// other keys may become visible one slot at a time, and if one slot fails
// the others may already be written.
//
// Errors wrap the go-redis error with the operation and key, e.g.
// `kv: get "k": dial tcp ...`, except IncrBy's ErrNotNumber and ErrNotFinite.
type Redis struct {
	c       redis.UniversalClient
	keys    store.Keys
	cluster bool
}

var _ Store = (*Redis)(nil)

// NewRedis returns a Store on c with keys under prefix. It does no I/O and
// never fails; c stays owned by the caller.
func NewRedis(c redis.UniversalClient, prefix string) *Redis {
	_, cluster := c.(*redis.ClusterClient)
	return &Redis{c: c, keys: store.Keys{Prefix: prefix}, cluster: cluster}
}

// Inline returns false: every operation waits on the network.
func (r *Redis) Inline() bool { return false }

// Get returns the value of key (GET). Errors wrap the Redis error.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, bool, error) {
	v, err := r.c.Get(ctx, r.keys.Global(key)).Bytes()
	if err == redis.Nil {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("kv: get %q: %w", key, err)
	}
	return nonNil(v), true, nil
}

func nonNil(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

// MGet returns the values of keys (a pipeline of GETs, split by node on
// Cluster). Errors wrap the Redis error and name the first key that failed
// (or the first key, when the pipeline failed as a whole).
func (r *Redis) MGet(ctx context.Context, keys []string) ([][]byte, error) {
	out := make([][]byte, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	cmds := make([]*redis.StringCmd, len(keys))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Get(ctx, r.keys.Global(k))
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		// Name the first key whose GET failed; a failure before any reply
		// (e.g. dialing) leaves the commands without error: name the first key.
		for i, cmd := range cmds {
			if cerr := cmd.Err(); cerr != nil && cerr != redis.Nil {
				return nil, fmt.Errorf("kv: mget %q: %w", keys[i], cerr)
			}
		}
		return nil, fmt.Errorf("kv: mget %q: %w", keys[0], err)
	}
	for i, cmd := range cmds {
		v, cerr := cmd.Bytes()
		switch {
		case cerr == redis.Nil:
		case cerr != nil:
			return nil, fmt.Errorf("kv: mget %q: %w", keys[i], cerr)
		default:
			out[i] = nonNil(v)
		}
	}
	return out, nil
}

// Set stores value under key (SET, with an expiry when ttl > 0). Errors wrap the
// Redis error.
func (r *Redis) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := r.c.Set(ctx, r.keys.Global(key), nonNil(value), normTTL(ttl)).Err(); err != nil {
		return fmt.Errorf("kv: set %q: %w", key, err)
	}
	return nil
}

// MSet stores all pairs in MULTI/EXEC transactions: one in total on a
// standalone server, one per hash slot on Cluster (see Redis). Errors wrap
// the Redis error and name the first key that failed (or the first key of
// the failed transaction).
func (r *Redis) MSet(ctx context.Context, pairs []Pair, ttl time.Duration) error {
	if len(pairs) == 0 {
		return nil
	}
	ttl = normTTL(ttl)
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
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
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

// Delete removes key (DEL) and reports whether it existed. Errors wrap the
// Redis error.
func (r *Redis) Delete(ctx context.Context, key string) (bool, error) {
	n, err := r.c.Del(ctx, r.keys.Global(key)).Result()
	if err != nil {
		return false, fmt.Errorf("kv: delete %q: %w", key, err)
	}
	return n > 0, nil
}

// incrScript is INCRBYFLOAT plus a float64 range check (see its header).
//
//go:embed scripts/incr.lua
var incrSrc string

var incrScript = redis.NewScript(incrSrc)

// IncrBy adds delta to the number under key with INCRBYFLOAT (atomic, keeps
// the TTL; see Store.IncrBy for the number format), run inside a small Lua
// script that also rejects results outside the float64 range. Errors wrap
// ErrNotNumber when the stored value is not a number, ErrNotFinite when
// delta or the result is NaN or infinite (the value is then unchanged), or
// else the Redis error.
func (r *Redis) IncrBy(ctx context.Context, key string, delta float64) (float64, error) {
	if !finite(delta) {
		return 0, fmt.Errorf("%w: %q", ErrNotFinite, key)
	}
	v, err := incrScript.Run(ctx, r.c, []string{r.keys.Global(key)}, delta).Float64()
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
	return v, nil
}

// TTL returns the remaining time to live of key (PTTL). Errors wrap the
// Redis error.
func (r *Redis) TTL(ctx context.Context, key string) (time.Duration, bool, error) {
	d, err := r.c.PTTL(ctx, r.keys.Global(key)).Result()
	if err != nil {
		return 0, false, fmt.Errorf("kv: ttl %q: %w", key, err)
	}
	// go-redis passes PTTL's -2 (missing) and -1 (no expiry) through as
	// nanoseconds.
	switch d {
	case -2:
		return 0, false, nil
	case -1:
		return NoExpiry, true, nil
	}
	if d < 0 {
		return 0, false, nil
	}
	return d, true, nil
}
