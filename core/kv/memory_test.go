package kv

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/testclock"
	"github.com/shieldrt/shieldglobal/internal/testleak"
)

func TestMemory(t *testing.T) {
	clock := testclock.New()
	runConformance(t, func(t *testing.T) Store {
		return NewMemory(WithClock(clock.Now))
	}, clock.Advance)
}

func TestMemoryRealClock(t *testing.T) {
	// Without WithClock the store uses time.Now; expiry must still happen.
	m := NewMemory()
	if err := syncOf(m).Set(t.Context(), "k", []byte("v"), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, found, _ := syncOf(m).Get(t.Context(), "k")
		if !found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("1ms key still present after 2s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestMemoryOpsAreLocal(t *testing.T) {
	if NewMemory().Get("k").Kind() != store.KindLocal {
		t.Fatal("memory ops must be local (inline on the Lua loop)")
	}
}

func TestMemoryExpiryBoundary(t *testing.T) {
	clock := testclock.New()
	m := NewMemory(WithClock(clock.Now))
	ctx := t.Context()
	if err := syncOf(m).Set(ctx, "k", []byte("v"), 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d, found, _ := syncOf(m).TTL(ctx, "k"); !found || d != 1500*time.Millisecond {
		t.Fatalf("TTL = %v, %v; want 1.5s", d, found)
	}
	clock.Advance(400 * time.Millisecond)
	if d, found, _ := syncOf(m).TTL(ctx, "k"); !found || d != 1100*time.Millisecond {
		t.Fatalf("TTL after 400ms = %v, %v; want 1.1s", d, found)
	}
	clock.Advance(1100 * time.Millisecond)
	// Like Redis, a key is alive at exactly its expiry time...
	if _, found, _ := syncOf(m).Get(ctx, "k"); !found {
		t.Fatal("key gone at exactly its expiry time")
	}
	if d, found, _ := syncOf(m).TTL(ctx, "k"); !found || d != 0 {
		t.Fatalf("TTL at expiry = %v, %v; want 0, true", d, found)
	}
	// ...and gone right after.
	clock.Advance(time.Nanosecond)
	if _, found, _ := syncOf(m).Get(ctx, "k"); found {
		t.Fatal("key present after its expiry time")
	}
	if n := m.size(); n != 0 {
		t.Fatalf("expired key read by Get still stored: size %d", n)
	}
}

func TestMemoryTTLRounding(t *testing.T) {
	clock := testclock.New()
	m := NewMemory(WithClock(clock.Now))
	for _, c := range []struct{ in, want time.Duration }{
		{time.Nanosecond, time.Millisecond},
		{999 * time.Microsecond, time.Millisecond},
		{1500 * time.Microsecond, time.Millisecond},
		{time.Second + 999*time.Microsecond, time.Second},
	} {
		if err := syncOf(m).Set(t.Context(), "k", nil, c.in); err != nil {
			t.Fatal(err)
		}
		if d, found, _ := syncOf(m).TTL(t.Context(), "k"); !found || d != c.want {
			t.Fatalf("Set ttl %v: TTL = %v, %v; want %v (Redis PX rounding)", c.in, d, found, c.want)
		}
	}
}

func TestMemorySweepRemovesUnreadExpiredKeys(t *testing.T) {
	clock := testclock.New()
	m := NewMemory(WithClock(clock.Now))
	ctx := t.Context()
	for i := range 1000 {
		if err := syncOf(m).Set(ctx, "old-"+strconv.Itoa(i), []byte("x"), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if err := syncOf(m).Set(ctx, "live-"+strconv.Itoa(i), []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Second)
	if n := m.size(); n < 1000 {
		t.Fatalf("size %d before any write after expiry; the sweep ran early", n)
	}
	// Writes to a single key only; the amortised sweep must reach every shard.
	for range 2 * memShards * sweepEvery {
		if err := syncOf(m).Set(ctx, "hot", []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.size(); n != 101 {
		t.Fatalf("size %d after sweeping; want 101 (100 live keys + hot)", n)
	}
	for i := range 100 {
		if _, found, _ := syncOf(m).Get(ctx, "live-"+strconv.Itoa(i)); !found {
			t.Fatalf("sweep removed live key %d", i)
		}
	}
}

func TestMemoryStartsNoGoroutine(t *testing.T) {
	before := testleak.Snapshot()
	clock := testclock.New()
	m := NewMemory(WithClock(clock.Now))
	ctx := t.Context()
	for i := range 5000 {
		k := strconv.Itoa(i % 300)
		syncOf(m).Set(ctx, k, []byte("1"), time.Duration(i%3)*time.Second)
		syncOf(m).MSet(ctx, []Pair{{k + "a", nil}, {k + "b", nil}}, time.Second)
		syncOf(m).IncrBy(ctx, k+"n", 1)
		syncOf(m).Get(ctx, k)
		syncOf(m).Delete(ctx, k+"a")
		clock.Advance(10 * time.Millisecond)
	}
	testleak.NoNew(t, before, "github.com/shieldrt/shieldglobal/")
}

func TestMemoryConcurrentMixed(t *testing.T) {
	// Lock ordering (MSet locks several shards) and data races: run with -race.
	clock := testclock.New()
	m := NewMemory(WithClock(clock.Now))
	ctx := t.Context()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 500 {
				k := func() string { return "k" + strconv.Itoa(r.IntN(50)) }
				switch r.IntN(7) {
				case 0:
					var pairs []Pair
					for range 1 + r.IntN(8) {
						pairs = append(pairs, Pair{k(), []byte("v")})
					}
					if err := syncOf(m).MSet(ctx, pairs, time.Duration(r.IntN(3))*time.Millisecond); err != nil {
						t.Error(err)
					}
				case 1:
					syncOf(m).Set(ctx, k(), []byte(strconv.Itoa(r.IntN(9))), time.Duration(r.IntN(3))*time.Millisecond)
				case 2:
					syncOf(m).MGet(ctx, []string{k(), k(), k()})
				case 3:
					syncOf(m).Delete(ctx, k())
				case 4:
					syncOf(m).IncrBy(ctx, k(), 1) // may hit "v": ErrNotNumber is fine here
				case 5:
					syncOf(m).TTL(ctx, k())
				case 6:
					clock.Advance(time.Millisecond)
					syncOf(m).Get(ctx, k())
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkMemoryGet(b *testing.B) {
	m := NewMemory()
	ctx := b.Context()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("player:%d:score", i)
		syncOf(m).Set(ctx, keys[i], []byte(`{"score":12345,"name":"someone"}`), 0)
	}
	b.Run("serial", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok, _ := syncOf(m).Get(ctx, keys[i&1023]); !ok {
				b.Fatal("missing")
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(1024)
			for pb.Next() {
				if _, ok, _ := syncOf(m).Get(ctx, keys[i&1023]); !ok {
					b.Fatal("missing")
				}
				i++
			}
		})
	})
}
