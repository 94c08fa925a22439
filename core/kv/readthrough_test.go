package kv

import (
	"context"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testclock"
)

// The read-through protocol: a miss reads the store and caches what it
// found; a hit does not read; an eviction between the read's start and its
// end keeps the (possibly stale) value out of the cache; a write evicts; a
// missing key is not cached; no cache reads through every time.
func TestReadThrough(t *testing.T) {
	ctx := context.Background()
	clock := testclock.New()
	s := NewMemory(WithClock(clock.Now))
	r := ReadThrough{Store: s, Cache: NewCache(100, clock.Now), TTL: time.Minute}
	if _, err := s.Set("k", []byte("1"), 0).Do(ctx); err != nil {
		t.Fatal(err)
	}
	read := func(key string) Read {
		t.Helper()
		rd := r.Get(key, 0)
		if !rd.Hit {
			v, err := rd.Op.Do(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rd.Done(v)
			rd.Data = v.Data
		}
		return rd
	}
	if rd := read("k"); rd.Hit || string(rd.Data) != "1" {
		t.Fatalf("first read: hit %v, %q", rd.Hit, rd.Data)
	}
	if rd := read("k"); !rd.Hit || string(rd.Data) != "1" {
		t.Fatalf("second read: hit %v, %q; want a hit of 1", rd.Hit, rd.Data)
	}

	// A write evicts.
	if _, err := s.Set("k", []byte("2"), 0).Do(ctx); err != nil {
		t.Fatal(err)
	}
	r.Written("k")
	if rd := read("k"); rd.Hit || string(rd.Data) != "2" {
		t.Fatalf("read after a write: hit %v, %q", rd.Hit, rd.Data)
	}

	// An eviction while a read is in flight: its value is not cached.
	r.Written("k")
	rd := r.Get("k", 0)
	v, err := rd.Op.Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.Written("k") // another process's write announced meanwhile
	rd.Done(v)
	if again := r.Get("k", 0); again.Hit {
		t.Fatal("a read that raced an eviction was cached")
	}

	// The ttl: TTL by default, expiring on the cache's clock.
	read("k")
	clock.Advance(time.Minute + time.Millisecond)
	if again := r.Get("k", 0); again.Hit {
		t.Fatal("a cached value outlived the default ttl")
	}

	// Missing keys are not cached; no cache reads through.
	if rd := read("missing"); rd.Hit || rd.Data != nil {
		t.Fatalf("missing key: %+v", rd)
	}
	if again := r.Get("missing", 0); again.Hit {
		t.Fatal("a missing key was cached")
	}
	direct := ReadThrough{Store: s}
	if rd := direct.Get("k", 0); rd.Hit || rd.Op == nil {
		t.Fatalf("no cache: %+v", rd)
	}
	direct.Written("k") // no cache: nothing to do, no panic
}
