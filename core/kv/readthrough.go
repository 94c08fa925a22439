package kv

import (
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// ReadThrough is the process-local read-through cache over a Store (Lua's
// g:get_cached, g:set and friends): a read is served from Cache while
// fresh, else read from Store and cached; every write through it evicts its
// keys from Cache once done (the Store announces writes to the other
// processes in the same round trip, cache.sync). A nil Cache reads and
// writes straight through.
type ReadThrough struct {
	Store Store
	Cache *Cache        // nil when global.cache.enabled is false
	TTL   time.Duration // the ttl of a read that gives none (global.cache.default_ttl)
}

// Read is one read through the cache: Hit with Data when the cache had a
// fresh value; otherwise Op reads Store and Done must get its value.
type Read struct {
	Data []byte
	Hit  bool
	Op   *store.Op[Value]

	c       *Cache
	key     string
	version uint64
	ttl     time.Duration
}

// Get starts a read of key, cached for ttl (TTL when 0).
func (r ReadThrough) Get(key string, ttl time.Duration) Read {
	if ttl == 0 {
		ttl = r.TTL
	}
	if r.Cache == nil {
		return Read{Op: r.Store.Get(key)}
	}
	if data, ok := r.Cache.Get(key); ok {
		return Read{Data: data, Hit: true}
	}
	// A concurrent invalidation makes the read below uncacheable.
	version := r.Cache.Version(key)
	return Read{Op: r.Store.Get(key), c: r.Cache, key: key, version: version, ttl: ttl}
}

// Done caches v, the value Op read, unless key was invalidated since Get.
// A missing key is not cached.
func (rd Read) Done(v Value) {
	if rd.c != nil && v.Found {
		rd.c.PutIfVersion(rd.version, rd.key, v.Data, rd.ttl)
	}
}

// Written evicts keys from the local cache: call it once a write of them
// is done.
func (r ReadThrough) Written(keys ...string) {
	if r.Cache == nil {
		return
	}
	for _, k := range keys {
		r.Cache.Evict(k)
	}
}
