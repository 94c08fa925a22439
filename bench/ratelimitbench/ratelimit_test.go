// Package ratelimitbench compares the local decision of shield's token
// bucket (core/ratelimit) with golang.org/x/time/rate, in one run:
//
//	cd bench && go test -run NONE -bench . -benchmem ./ratelimitbench/
//
// x/time/rate limits one thing; shield's limiter is keyed (a sharded map of
// buckets), so the keyed case is compared with the usual way of keying
// x/time/rate: a map of *rate.Limiter under a mutex.
package ratelimitbench

import (
	"fmt"
	"sync"
	"testing"

	"golang.org/x/time/rate"

	"github.com/shieldrt/shieldglobal/core/ratelimit"
)

const fast = 1e12 // every request allowed: the comparison is of the decision itself

func shieldBucket(b *testing.B) *ratelimit.TokenBucket {
	l, err := ratelimit.NewMemory(ratelimit.Config{}).TokenBucket("bench", ratelimit.Options{Rate: fast, Burst: fast})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func BenchmarkOneKey(b *testing.B) {
	b.Run("shield", func(b *testing.B) {
		l := shieldBucket(b)
		b.ReportAllocs()
		for b.Loop() {
			l.Allow("client-ip", 1)
		}
	})
	b.Run("x-time-rate", func(b *testing.B) {
		l := rate.NewLimiter(fast, 1<<40)
		b.ReportAllocs()
		for b.Loop() {
			l.Allow()
		}
	})
}

// keyedRate is x/time/rate keyed the common way.
type keyedRate struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func (k *keyedRate) allow(key string) bool {
	k.mu.Lock()
	l := k.m[key]
	if l == nil {
		l = rate.NewLimiter(fast, 1<<40)
		k.m[key] = l
	}
	k.mu.Unlock()
	return l.Allow()
}

func BenchmarkKeyedParallel(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprint("player:", i)
	}
	b.Run("shield", func(b *testing.B) {
		l := shieldBucket(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i += 7 {
				l.Allow(keys[i%len(keys)], 1)
			}
		})
	})
	b.Run("x-time-rate", func(b *testing.B) {
		k := &keyedRate{m: make(map[string]*rate.Limiter)}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i += 7 {
				k.allow(keys[i%len(keys)])
			}
		})
	})
}
