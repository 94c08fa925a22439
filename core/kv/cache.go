package kv

import (
	"bytes"
	"container/list"
	"hash/maphash"
	"sync"
	"time"
)

// Cache is the process-local cache behind get_cached: an LRU of at most
// maxSize entries, each with its own expiry. It is safe for concurrent use
// and every operation is O(1). It starts no goroutine; expired entries are
// dropped when looked up or pushed out by newer ones.
//
// Cached values are immutable: Put stores a copy, and Get returns the cached
// slice itself, which callers must not modify.
//
// Staleness: the owner evicts keys announced on the invalidation channel and
// turns bypass on while that channel is down. A value read from the backend
// concurrently with an eviction could still be put after it; Version and
// PutIfVersion close that window.
type Cache struct {
	now  func() time.Time
	max  int
	seed maphash.Seed

	mu      sync.Mutex
	ll      *list.List // front = most recently used; values are *cacheEntry
	m       map[string]*list.Element
	bypass  bool
	hits    uint64
	misses  uint64
	epoch   uint64               // bumped by Clear and SetBypass
	evicted [cacheStripes]uint64 // bumped by Evict, per key stripe
}

const cacheStripes = 256

type cacheEntry struct {
	key string
	v   []byte
	exp time.Time // zero: no expiry
}

// CacheStats is a snapshot of a Cache's counters.
type CacheStats struct {
	Size    int     // entries held now (some may have expired but not yet been dropped)
	Hits    uint64  // Get calls that returned a value
	Misses  uint64  // Get calls that did not (missing, expired or bypassed)
	HitRate float64 // Hits / (Hits + Misses); 0 before any lookup
}

// NewCache returns an empty cache of at most maxSize entries (maxSize < 1
// stores nothing) that reads the time from now (nil: time.Now). It never
// fails.
func NewCache(maxSize int, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{now: now, max: maxSize, seed: maphash.MakeSeed(), ll: list.New(), m: make(map[string]*list.Element)}
}

// Get returns the cached value of key and marks it most recently used. It
// counts a hit or a miss; an expired entry is a miss and is removed; while
// bypass is on every Get is a miss. The returned slice must not be modified.
func (c *Cache) Get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bypass {
		c.misses++
		return nil, false
	}
	el, ok := c.m[key]
	if !ok {
		c.misses++
		return nil, false
	}
	e := el.Value.(*cacheEntry)
	if !e.exp.IsZero() && !c.now().Before(e.exp) {
		c.remove(el)
		c.misses++
		return nil, false
	}
	c.ll.MoveToFront(el)
	c.hits++
	return e.v, true
}

// Put caches a copy of value under key for ttl (ttl <= 0: until evicted),
// making it the most recently used entry and dropping the least recently
// used ones beyond maxSize. It does nothing while bypass is on.
func (c *Cache) Put(key string, value []byte, ttl time.Duration) {
	c.put(key, value, ttl, false, 0)
}

// Version returns a token for key that changes whenever key may have become
// stale in the cache: on Evict(key), Clear and SetBypass. Take it before
// reading key from the backend and pass it to PutIfVersion.
func (c *Cache) Version(key string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version(key)
}

// both counters only grow, so their sum changes whenever either does.
func (c *Cache) version(key string) uint64 {
	return c.epoch + c.evicted[c.stripe(key)]
}

func (c *Cache) stripe(key string) uint64 {
	return maphash.String(c.seed, key) % cacheStripes
}

// PutIfVersion is Put, done only if Version(key) still equals version, so a
// value read before a concurrent invalidation of key is not cached after it.
// It reports whether the value was stored.
func (c *Cache) PutIfVersion(version uint64, key string, value []byte, ttl time.Duration) bool {
	return c.put(key, value, ttl, true, version)
}

func (c *Cache) put(key string, value []byte, ttl time.Duration, check bool, version uint64) bool {
	if c.max < 1 {
		return false
	}
	v := bytes.Clone(value)
	if v == nil {
		v = []byte{}
	}
	var exp time.Time
	if ttl > 0 {
		exp = c.now().Add(ttl)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bypass || (check && c.version(key) != version) {
		return false
	}
	if el, ok := c.m[key]; ok {
		e := el.Value.(*cacheEntry)
		e.v, e.exp = v, exp
		c.ll.MoveToFront(el)
		return true
	}
	c.m[key] = c.ll.PushFront(&cacheEntry{key: key, v: v, exp: exp})
	for c.ll.Len() > c.max {
		c.remove(c.ll.Back())
	}
	return true
}

func (c *Cache) remove(el *list.Element) {
	c.ll.Remove(el)
	delete(c.m, el.Value.(*cacheEntry).key)
}

// Evict drops key from the cache (if present) and changes Version(key).
func (c *Cache) Evict(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		c.remove(el)
	}
	c.evicted[c.stripe(key)]++
}

// Clear drops every entry and changes every Version. Stats counters are kept.
func (c *Cache) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clear()
}

func (c *Cache) clear() {
	c.ll.Init()
	clear(c.m)
	c.epoch++
}

// SetBypass turns bypass on or off. While on, Get always misses (and counts
// the miss) and Put stores nothing; it is on while the invalidation channel
// is down, so the cache never serves data that may be stale. Every change
// clears the cache, since invalidations may have been missed meanwhile.
func (c *Cache) SetBypass(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bypass != on {
		c.bypass = on
		c.clear()
	}
}

// Stats returns the current size and hit/miss counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := CacheStats{Size: c.ll.Len(), Hits: c.hits, Misses: c.misses}
	if n := c.hits + c.misses; n > 0 {
		s.HitRate = float64(c.hits) / float64(n)
	}
	return s
}
