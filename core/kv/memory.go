package kv

import (
	"bytes"
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

const (
	memShards = 64 // power of two
	// Every sweepEvery writes, one shard (round robin) is sampled for
	// expired entries. No goroutine is involved.
	sweepEvery   = 16
	sweepSample  = 20
	sweepRepeats = 4 // extra samples while >= 25% of a sample was expired
)

// Memory is an in-process Store. It starts no goroutine: expired entries are
// removed when accessed and by a small sweep amortised over writes, so memory
// held by expired keys stays proportional to the live set.
//
// Values are copied in and out. Every single-key operation is atomic; MSet is
// atomic as a whole; MGet reads each key atomically but is not a snapshot.
// Methods return an error only when ctx is already done.
type Memory struct {
	now    func() time.Time
	seed   maphash.Seed
	writes atomic.Uint64
	shards [memShards]memShard
}

type memShard struct {
	mu sync.RWMutex
	m  map[string]memEntry
	_  [32]byte // 32 + 32 bytes: keep shards on separate cache lines
}

type memEntry struct {
	v   []byte
	exp time.Time // zero: no expiry
}

func (e *memEntry) expired(now time.Time) bool {
	return !e.exp.IsZero() && now.After(e.exp) // like Redis: alive at exactly exp
}

// MemoryOption configures NewMemory.
type MemoryOption func(*Memory)

// WithClock makes the store read the time from now instead of time.Now
// (tests use it to expire keys without sleeping).
func WithClock(now func() time.Time) MemoryOption {
	return func(m *Memory) {
		if now != nil {
			m.now = now
		}
	}
}

// NewMemory returns an empty in-process store. It never fails.
func NewMemory(opts ...MemoryOption) *Memory {
	m := &Memory{now: time.Now, seed: maphash.MakeSeed()}
	for _, o := range opts {
		o(m)
	}
	for i := range m.shards {
		m.shards[i].m = make(map[string]memEntry)
	}
	return m
}

var _ Store = (*Memory)(nil)

func (m *Memory) shardIndex(key string) int {
	return int(maphash.String(m.seed, key) & (memShards - 1))
}

// Inline returns true: memory operations never wait on I/O.
func (m *Memory) Inline() bool { return true }

// Get returns a copy of the value of key. The only error is ctx's.
func (m *Memory) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("kv: get %q: %w", key, err)
	}
	v, ok := m.get(key)
	return v, ok, nil
}

func (m *Memory) get(key string) ([]byte, bool) {
	s := &m.shards[m.shardIndex(key)]
	s.mu.RLock()
	e, ok := s.m[key]
	if !ok {
		s.mu.RUnlock()
		return nil, false
	}
	if !e.exp.IsZero() && e.expired(m.now()) {
		s.mu.RUnlock()
		s.mu.Lock()
		if e, ok := s.m[key]; ok && e.expired(m.now()) {
			delete(s.m, key)
		}
		s.mu.Unlock()
		return nil, false
	}
	v := append([]byte{}, e.v...)
	s.mu.RUnlock()
	return v, true
}

// MGet returns copies of the values of keys, nil for missing ones. The only
// error is ctx's.
func (m *Memory) MGet(ctx context.Context, keys []string) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kv: mget %q: %w", firstKey(keys), err)
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i], _ = m.get(k)
	}
	return out, nil
}

func firstKey(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}

func (m *Memory) expiry(ttl time.Duration) time.Time {
	if ttl = normTTL(ttl); ttl == 0 {
		return time.Time{}
	}
	return m.now().Add(ttl)
}

func clone(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return bytes.Clone(v)
}

// Set stores a copy of value under key. The only error is ctx's.
func (m *Memory) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kv: set %q: %w", key, err)
	}
	e := memEntry{v: clone(value), exp: m.expiry(ttl)}
	s := &m.shards[m.shardIndex(key)]
	s.mu.Lock()
	s.m[key] = e
	s.mu.Unlock()
	m.wrote(1)
	return nil
}

// MSet stores copies of all pairs atomically (no reader sees some of them
// without the others). The only error is ctx's.
func (m *Memory) MSet(ctx context.Context, pairs []Pair, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		var first string
		if len(pairs) > 0 {
			first = pairs[0].Key
		}
		return fmt.Errorf("kv: mset %q: %w", first, err)
	}
	if len(pairs) == 0 {
		return nil
	}
	exp := m.expiry(ttl)
	idx := make([]int, len(pairs))
	entries := make([]memEntry, len(pairs))
	var mask uint64
	for i, p := range pairs {
		idx[i] = m.shardIndex(p.Key)
		mask |= 1 << idx[i]
		entries[i] = memEntry{v: clone(p.Value), exp: exp}
	}
	// Lock the shards involved in ascending order (the only multi-shard lock
	// in the package, so no deadlock).
	for i := range memShards {
		if mask&(1<<i) != 0 {
			m.shards[i].mu.Lock()
		}
	}
	for i, p := range pairs {
		m.shards[idx[i]].m[p.Key] = entries[i]
	}
	for i := range memShards {
		if mask&(1<<i) != 0 {
			m.shards[i].mu.Unlock()
		}
	}
	m.wrote(len(pairs))
	return nil
}

// Delete removes key and reports whether it existed unexpired. The only
// error is ctx's.
func (m *Memory) Delete(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("kv: delete %q: %w", key, err)
	}
	s := &m.shards[m.shardIndex(key)]
	s.mu.Lock()
	e, ok := s.m[key]
	if ok {
		delete(s.m, key)
		ok = e.exp.IsZero() || !e.expired(m.now())
	}
	s.mu.Unlock()
	return ok, nil
}

// IncrBy adds delta to the JSON number stored under key, keeping its TTL
// (see Store.IncrBy). Errors wrap ErrNotNumber, ErrNotFinite or ctx's error.
func (m *Memory) IncrBy(ctx context.Context, key string, delta float64) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("kv: incrby %q: %w", key, err)
	}
	if !finite(delta) {
		return 0, fmt.Errorf("%w: %q", ErrNotFinite, key)
	}
	s := &m.shards[m.shardIndex(key)]
	s.mu.Lock()
	e, ok := s.m[key]
	if ok && !e.exp.IsZero() && e.expired(m.now()) {
		ok, e = false, memEntry{}
	}
	var cur float64
	if ok {
		var isNum bool
		if cur, isNum = parseNumber(e.v); !isNum {
			s.mu.Unlock()
			return 0, fmt.Errorf("%w: %q", ErrNotNumber, key)
		}
	}
	x := cur + delta
	if !finite(x) {
		s.mu.Unlock()
		return 0, fmt.Errorf("%w: %q", ErrNotFinite, key)
	}
	e.v = formatNumber(x)
	s.m[key] = e
	s.mu.Unlock()
	m.wrote(1)
	return x, nil
}

// TTL returns the remaining time to live of key (NoExpiry when it has
// none). The only error is ctx's.
func (m *Memory) TTL(ctx context.Context, key string) (time.Duration, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("kv: ttl %q: %w", key, err)
	}
	s := &m.shards[m.shardIndex(key)]
	s.mu.RLock()
	e, ok := s.m[key]
	s.mu.RUnlock()
	if !ok {
		return 0, false, nil
	}
	if e.exp.IsZero() {
		return NoExpiry, true, nil
	}
	left := e.exp.Sub(m.now())
	if left < 0 {
		return 0, false, nil
	}
	return left, true, nil
}

// wrote counts n writes and runs the amortised expiry sweep when due.
func (m *Memory) wrote(n int) {
	after := m.writes.Add(uint64(n))
	before := after - uint64(n)
	for c := before/sweepEvery + 1; c <= after/sweepEvery; c++ {
		m.sweep(&m.shards[c%memShards])
		if c-before/sweepEvery >= memShards {
			break // a huge MSet sweeps each shard at most once
		}
	}
}

// sweep removes expired entries from a random sample of s, sampling again
// while at least a quarter of a sample was expired.
func (m *Memory) sweep(s *memShard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) == 0 {
		return
	}
	now := m.now()
	for range 1 + sweepRepeats {
		seen, expired := 0, 0
		for k, e := range s.m { // map iteration starts at a random position
			if seen == sweepSample {
				break
			}
			seen++
			if e.expired(now) {
				delete(s.m, k)
				expired++
			}
		}
		if expired*4 < seen || len(s.m) == 0 {
			return
		}
	}
}

// size returns the number of stored entries, expired or not (for tests).
func (m *Memory) size() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
