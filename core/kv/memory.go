package kv

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
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
// Its operations are store.Local ops (they run inline on the Lua loop).
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

// Get returns a copy of the value of key. It never fails.
func (m *Memory) Get(key string) *store.Op[Value] {
	return store.Local(func() (Value, error) {
		v, ok := m.get(key)
		return Value{Data: v, Found: ok}, nil
	})
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

// MGet returns copies of the values of keys, nil for missing ones. It never
// fails.
func (m *Memory) MGet(keys []string) *store.Op[[][]byte] {
	return store.Local(func() ([][]byte, error) {
		out := make([][]byte, len(keys))
		for i, k := range keys {
			out[i], _ = m.get(k)
		}
		return out, nil
	})
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

// Set stores a copy of value under key. It never fails.
func (m *Memory) Set(key string, value []byte, ttl time.Duration) *store.Op[struct{}] {
	return store.Local(func() (struct{}, error) { m.set(key, value, ttl); return struct{}{}, nil })
}

func (m *Memory) set(key string, value []byte, ttl time.Duration) {
	e := memEntry{v: clone(value), exp: m.expiry(ttl)}
	s := &m.shards[m.shardIndex(key)]
	s.mu.Lock()
	s.m[key] = e
	s.mu.Unlock()
	m.wrote(1)
}

// MSet stores copies of all pairs atomically (no reader sees some of them
// without the others). It never fails.
func (m *Memory) MSet(pairs []Pair, ttl time.Duration) *store.Op[struct{}] {
	return store.Local(func() (struct{}, error) { m.mset(pairs, ttl); return struct{}{}, nil })
}

func (m *Memory) mset(pairs []Pair, ttl time.Duration) {
	if len(pairs) == 0 {
		return
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
}

// Delete removes key and reports whether it existed unexpired. It never
// fails.
func (m *Memory) Delete(key string) *store.Op[bool] {
	return store.Local(func() (bool, error) { return m.delete(key), nil })
}

func (m *Memory) delete(key string) bool {
	s := &m.shards[m.shardIndex(key)]
	s.mu.Lock()
	e, ok := s.m[key]
	if ok {
		delete(s.m, key)
		ok = e.exp.IsZero() || !e.expired(m.now())
	}
	s.mu.Unlock()
	return ok
}

// IncrBy adds delta to the JSON number stored under key, keeping its TTL
// (see Store.IncrBy). Errors wrap ErrNotNumber or ErrNotFinite.
func (m *Memory) IncrBy(key string, delta float64) *store.Op[float64] {
	return store.Local(func() (float64, error) { return m.incrBy(key, delta) })
}

func (m *Memory) incrBy(key string, delta float64) (float64, error) {
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
// none). It never fails.
func (m *Memory) TTL(key string) *store.Op[Expiry] {
	return store.Local(func() (Expiry, error) {
		s := &m.shards[m.shardIndex(key)]
		s.mu.RLock()
		e, ok := s.m[key]
		s.mu.RUnlock()
		if !ok {
			return Expiry{}, nil
		}
		if e.exp.IsZero() {
			return Expiry{Left: NoExpiry, Found: true}, nil
		}
		left := e.exp.Sub(m.now())
		if left < 0 {
			return Expiry{}, nil
		}
		return Expiry{Left: left, Found: true}, nil
	})
}

// Invalidate does nothing: there is no other process to tell.
func (m *Memory) Invalidate(string) *store.Op[struct{}] {
	return store.Local(func() (struct{}, error) { return struct{}{}, nil })
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
