package kv

import (
	"github.com/shieldrt/shieldglobal/internal/testclock"

	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func cacheHas(t *testing.T, c *Cache, key, want string) {
	t.Helper()
	v, ok := c.Get(key)
	if !ok || string(v) != want {
		t.Fatalf("Get(%q) = %q, %v; want %q", key, v, ok, want)
	}
}

func cacheMisses(t *testing.T, c *Cache, key string) {
	t.Helper()
	if v, ok := c.Get(key); ok {
		t.Fatalf("Get(%q) = %q; want a miss", key, v)
	}
}

func TestCacheLRUOrder(t *testing.T) {
	c := NewCache(3, nil)
	c.Put("a", []byte("A"), 0)
	c.Put("b", []byte("B"), 0)
	c.Put("c", []byte("C"), 0)
	cacheHas(t, c, "a", "A") // a is now the most recently used; b the least
	c.Put("d", []byte("D"), 0)
	cacheMisses(t, c, "b")
	cacheHas(t, c, "a", "A")
	cacheHas(t, c, "c", "C")
	cacheHas(t, c, "d", "D")
	// Order now (most recent first): d c a. Updating a refreshes it.
	c.Put("a", []byte("A2"), 0)
	c.Put("e", []byte("E"), 0) // evicts c
	cacheMisses(t, c, "c")
	cacheHas(t, c, "a", "A2")
	cacheHas(t, c, "d", "D")
	cacheHas(t, c, "e", "E")
	if n := c.Stats().Size; n != 3 {
		t.Fatalf("Size = %d; want 3", n)
	}
}

func TestCacheMaxSize(t *testing.T) {
	c := NewCache(10, nil)
	for i := range 100 {
		c.Put(strconv.Itoa(i), []byte(strconv.Itoa(i)), 0)
		if n := c.Stats().Size; n > 10 {
			t.Fatalf("Size = %d after %d puts; max is 10", n, i+1)
		}
	}
	for i := range 90 {
		cacheMisses(t, c, strconv.Itoa(i))
	}
	for i := 90; i < 100; i++ {
		cacheHas(t, c, strconv.Itoa(i), strconv.Itoa(i))
	}
	// Re-putting a present key does not grow the cache or evict anything.
	c.Put("95", []byte("x"), 0)
	if n := c.Stats().Size; n != 10 {
		t.Fatalf("Size = %d; want 10", n)
	}
	cacheHas(t, c, "90", "90")

	for _, max := range []int{0, -1} {
		z := NewCache(max, nil)
		z.Put("a", []byte("A"), 0)
		if n := z.Stats().Size; n != 0 {
			t.Fatalf("NewCache(%d) stored %d entries", max, n)
		}
		cacheMisses(t, z, "a")
	}
}

func TestCacheTTL(t *testing.T) {
	clock := testclock.New()
	c := NewCache(10, clock.Now)
	c.Put("short", []byte("s"), 10*time.Second)
	c.Put("long", []byte("l"), time.Hour)
	c.Put("forever", []byte("f"), 0)
	c.Put("negative", []byte("n"), -time.Second)
	clock.Advance(10*time.Second - time.Nanosecond)
	cacheHas(t, c, "short", "s")
	clock.Advance(time.Nanosecond)
	cacheMisses(t, c, "short")
	if n := c.Stats().Size; n != 3 {
		t.Fatalf("Size = %d after an expired Get; the entry must be removed", n)
	}
	cacheHas(t, c, "long", "l")
	clock.Advance(1000 * time.Hour)
	cacheMisses(t, c, "long")
	cacheHas(t, c, "forever", "f")
	cacheHas(t, c, "negative", "n")
	// Re-putting sets a new expiry.
	c.Put("short", []byte("s2"), time.Second)
	clock.Advance(500 * time.Millisecond)
	c.Put("short", []byte("s3"), time.Second)
	clock.Advance(700 * time.Millisecond)
	cacheHas(t, c, "short", "s3")
	c.Put("short", []byte("s4"), 0)
	clock.Advance(time.Hour)
	cacheHas(t, c, "short", "s4")
}

func TestCacheCopiesOnPut(t *testing.T) {
	c := NewCache(10, nil)
	buf := []byte("hello")
	c.Put("k", buf, 0)
	copy(buf, "XXXXX")
	cacheHas(t, c, "k", "hello")
	c.Put("empty", nil, 0)
	if v, ok := c.Get("empty"); !ok || v == nil || len(v) != 0 {
		t.Fatalf("Get(empty) = %#v, %v; want a non-nil empty value", v, ok)
	}
}

func TestCacheEvictAndClear(t *testing.T) {
	c := NewCache(10, nil)
	c.Put("a", []byte("A"), 0)
	c.Put("b", []byte("B"), 0)
	c.Evict("a")
	c.Evict("not-there")
	cacheMisses(t, c, "a")
	cacheHas(t, c, "b", "B")
	if n := c.Stats().Size; n != 1 {
		t.Fatalf("Size = %d after Evict; want 1", n)
	}
	c.Put("a", []byte("A"), 0)
	c.Clear()
	cacheMisses(t, c, "a")
	cacheMisses(t, c, "b")
	st := c.Stats()
	if st.Size != 0 {
		t.Fatalf("Size = %d after Clear", st.Size)
	}
	if st.Hits != 1 || st.Misses != 3 {
		t.Fatalf("Clear reset the counters: %+v", st)
	}
	c.Put("c", []byte("C"), 0)
	cacheHas(t, c, "c", "C")
}

func TestCacheBypass(t *testing.T) {
	c := NewCache(10, nil)
	c.Put("a", []byte("A"), 0)
	c.SetBypass(true)
	cacheMisses(t, c, "a")
	c.Put("b", []byte("B"), 0)
	cacheMisses(t, c, "b")
	if st := c.Stats(); st.Size != 0 || st.Misses != 2 || st.Hits != 0 {
		t.Fatalf("stats while bypassed = %+v; want size 0 and 2 counted misses", st)
	}
	c.SetBypass(true) // idempotent
	c.SetBypass(false)
	// Entries from before the bypass may be stale: they are gone.
	cacheMisses(t, c, "a")
	cacheMisses(t, c, "b")
	c.Put("a", []byte("A2"), 0)
	cacheHas(t, c, "a", "A2")
}

func TestCacheVersion(t *testing.T) {
	c := NewCache(10, nil)
	v := c.Version("k")
	if !c.PutIfVersion(v, "k", []byte("1"), 0) {
		t.Fatal("PutIfVersion with a fresh version did not store")
	}
	cacheHas(t, c, "k", "1")
	if c.Version("k") != v {
		t.Fatal("Put changed the version")
	}

	// A reader takes the version, an invalidation arrives, the reader puts
	// what it read before the invalidation: dropped.
	v = c.Version("k")
	c.Evict("k")
	if c.PutIfVersion(v, "k", []byte("stale"), 0) {
		t.Fatal("PutIfVersion stored a value read before Evict")
	}
	cacheMisses(t, c, "k")

	// Evicting a key in another stripe does not disturb k.
	other := ""
	for i := 0; other == ""; i++ {
		if k := "o" + strconv.Itoa(i); c.stripe(k) != c.stripe("k") {
			other = k
		}
	}
	v = c.Version("k")
	c.Evict(other)
	if !c.PutIfVersion(v, "k", []byte("2"), 0) {
		t.Fatal("Evict of an unrelated key dropped a Put")
	}

	for name, invalidate := range map[string]func(){
		"Clear":            c.Clear,
		"SetBypass(true)":  func() { c.SetBypass(true); c.SetBypass(false) },
		"SetBypass(false)": func() { c.SetBypass(true); v = c.Version("k"); c.SetBypass(false) },
	} {
		v = c.Version("k")
		invalidate()
		if c.PutIfVersion(v, "k", []byte("stale"), 0) {
			t.Fatalf("PutIfVersion stored a value read before %s", name)
		}
	}
	c.SetBypass(true)
	if c.PutIfVersion(c.Version("k"), "k", []byte("x"), 0) {
		t.Fatal("PutIfVersion stored while bypassed")
	}
}

func TestCacheStats(t *testing.T) {
	c := NewCache(10, nil)
	if st := c.Stats(); st != (CacheStats{}) {
		t.Fatalf("new cache stats = %+v; want zero (HitRate 0 without lookups)", st)
	}
	c.Put("a", []byte("A"), 0)
	c.Get("a")
	c.Get("a")
	c.Get("a")
	c.Get("b")
	st := c.Stats()
	if st.Size != 1 || st.Hits != 3 || st.Misses != 1 || st.HitRate != 0.75 {
		t.Fatalf("stats = %+v; want size 1, 3 hits, 1 miss, rate 0.75", st)
	}
}

func TestCacheConcurrent(t *testing.T) {
	clock := testclock.New()
	c := NewCache(64, clock.Now)
	var gets atomic.Uint64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for range 3000 {
				k := "k" + strconv.Itoa(r.IntN(200))
				switch n := r.IntN(100); {
				case n < 50:
					gets.Add(1)
					if v, ok := c.Get(k); ok && string(v) != k {
						t.Errorf("Get(%q) = %q", k, v)
					}
				case n < 85:
					c.Put(k, []byte(k), time.Duration(r.IntN(3))*time.Millisecond)
				case n < 93:
					c.PutIfVersion(c.Version(k), k, []byte(k), 0)
				case n < 97:
					c.Evict(k)
				case n < 98:
					clock.Advance(time.Millisecond)
				case n < 99:
					c.SetBypass(r.IntN(2) == 0)
				default:
					c.Clear()
					c.Stats()
				}
			}
		})
	}
	wg.Wait()
	st := c.Stats()
	if st.Size > 64 {
		t.Fatalf("Size = %d; max is 64", st.Size)
	}
	if st.Hits+st.Misses != gets.Load() {
		t.Fatalf("hits %d + misses %d != %d Gets", st.Hits, st.Misses, gets.Load())
	}
}

func BenchmarkCacheGet(b *testing.B) {
	c := NewCache(4096, nil)
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("player:%d:score", i)
		c.Put(keys[i], []byte(`{"score":12345,"name":"someone"}`), time.Hour)
	}
	b.Run("serial", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok := c.Get(keys[i&1023]); !ok {
				b.Fatal("miss")
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(1024)
			for pb.Next() {
				if _, ok := c.Get(keys[i&1023]); !ok {
					b.Fatal("miss")
				}
				i++
			}
		})
	})
}
