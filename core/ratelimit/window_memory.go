package ratelimit

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// memoryWindow keeps each key's requests in the current window as their
// times (Set clock ns, strictly increasing per key, like the Redis
// script's microseconds), so the count is exact.
type memoryWindow struct {
	set    *Set
	window int64 // ns
	max    int64
	seed   maphash.Seed
	shards [numShards]windowShard
}

type windowShard struct {
	mu sync.Mutex
	m  map[string]*requestLog
	_  [64]byte
}

// requestLog is a queue of request times: times[head:] are in the window
// (or were, when last trimmed).
type requestLog struct {
	times []int64
	head  int
}

func newMemoryWindow(s *Set, o Options) *memoryWindow {
	w := &memoryWindow{set: s, window: int64(o.Window), max: o.MaxRequests, seed: maphash.MakeSeed()}
	for i := range w.shards {
		w.shards[i].m = make(map[string]*requestLog)
	}
	return w
}

func (w *memoryWindow) shard(key string) *windowShard {
	return &w.shards[maphash.String(w.seed, key)&shardMask]
}

// trim drops the requests that left the window at now.
func (q *requestLog) trim(now, window int64) {
	for q.head < len(q.times) && q.times[q.head] <= now-window {
		q.head++
	}
	if q.head > 0 && q.head >= len(q.times)/2 {
		n := copy(q.times, q.times[q.head:])
		q.times = q.times[:n]
		q.head = 0
	}
}

func (q *requestLog) count() int64 { return int64(len(q.times) - q.head) }

func (w *memoryWindow) allow(key string, n int64, settle settleFunc, seq uint64) *store.Op[Decision] {
	return store.Local(func() (Decision, error) {
		now := w.set.clock()
		sh := w.shard(key)
		sh.mu.Lock()
		q := sh.m[key]
		if q == nil {
			q = &requestLog{}
			sh.m[key] = q
		}
		q.trim(now, w.window)
		count := q.count()
		if count+n > w.max {
			d := Decision{Reason: Rejected, Remaining: max(0, w.max-count), RetryAfter: -1}
			if n <= w.max {
				d.RetryAfter = time.Duration(max(1, q.times[q.head+int(count+n-w.max-1)]+w.window-now))
			}
			if count == 0 {
				delete(sh.m, key)
			}
			sh.mu.Unlock()
			return settle(seq, d, nil)
		}
		start := now
		if len(q.times) > q.head && q.times[len(q.times)-1] >= start {
			start = q.times[len(q.times)-1] + 1
		}
		for i := int64(0); i < n; i++ {
			q.times = append(q.times, start+i)
		}
		sh.mu.Unlock()
		return settle(seq, Decision{Allowed: true, Remaining: w.max - count - n}, nil)
	})
}

func (w *memoryWindow) remaining(key string) *store.Op[int64] {
	return store.Local(func() (int64, error) {
		now := w.set.clock()
		sh := w.shard(key)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		q := sh.m[key]
		if q == nil {
			return w.max, nil
		}
		q.trim(now, w.window)
		return max(0, w.max-q.count()), nil
	})
}

func (w *memoryWindow) active() int {
	n := 0
	for i := range w.shards {
		sh := &w.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// cleanup drops keys whose requests all left the window.
func (w *memoryWindow) cleanup(now int64) {
	for i := range w.shards {
		sh := &w.shards[i]
		sh.mu.Lock()
		for key, q := range sh.m {
			if q.count() == 0 || q.times[len(q.times)-1] <= now-w.window {
				delete(sh.m, key)
			}
		}
		sh.mu.Unlock()
	}
}
