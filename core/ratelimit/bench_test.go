package ratelimit

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// Local decisions. The memory and Redis token buckets run the same Allow;
// on Redis it also tracks what a report needs (overflow, lease checks).
// bench/ratelimit_test.go compares with golang.org/x/time/rate.

func benchBucket(b *testing.B, global bool) *TokenBucket {
	var s *Set
	if global {
		// A client that is never used: no Start, so no reports.
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		b.Cleanup(func() { c.Close() })
		s = NewRedis(c, "bench:", Config{Logger: quietLogger()})
	} else {
		s = NewMemory(Config{})
	}
	l, err := s.TokenBucket("bench", Options{Rate: 1e12, Burst: 1e12})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func BenchmarkAllow(b *testing.B) {
	for _, global := range []bool{false, true} {
		name := "memory"
		if global {
			name = "redis-local"
		}
		b.Run(name+"/one-key", func(b *testing.B) {
			l := benchBucket(b, global)
			l.Allow("client-ip", 1)
			b.ReportAllocs()
			for b.Loop() {
				l.Allow("client-ip", 1)
			}
		})
		b.Run(name+"/rejected", func(b *testing.B) {
			l := benchBucket(b, global)
			slow, _ := l.set.TokenBucket("slow", Options{Rate: 1e-9, Burst: 1})
			slow.Allow("client-ip", 1)
			b.ReportAllocs()
			for b.Loop() {
				slow.Allow("client-ip", 1)
			}
		})
		b.Run(name+"/100k-keys", func(b *testing.B) {
			l := benchBucket(b, global)
			keys := make([]string, 100_000)
			for i := range keys {
				keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
				l.Allow(keys[i], 1)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l.Allow(keys[i], 1)
				i++
				if i == len(keys) {
					i = 0
				}
			}
		})
		b.Run(name+"/parallel-1k-keys", func(b *testing.B) {
			l := benchBucket(b, global)
			keys := make([]string, 1000)
			for i := range keys {
				keys[i] = fmt.Sprint("player:", i)
				l.Allow(keys[i], 1)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					l.Allow(keys[i%len(keys)], 1)
					i += 7
				}
			})
		})
	}
}

// BenchmarkMemoryPerKey reports the heap held per active token-bucket key
// (one per client IP), key string included.
func BenchmarkMemoryPerKey(b *testing.B) {
	for _, global := range []bool{false, true} {
		name := "memory"
		if global {
			name = "redis"
		}
		b.Run(name, func(b *testing.B) {
			const n = 200_000
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
			}
			var perKey float64
			for b.Loop() {
				l := benchBucket(b, global)
				before := heap()
				for _, k := range keys {
					l.Allow(k, 1)
				}
				after := heap()
				// Keep l (and its pending list on Redis) alive until measured.
				runtime.KeepAlive(l)
				perKey = float64(after-before) / n
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkSlidingWindow compares a sliding-window AllowOp with the raw
// EVALSHA of the same script, and with an empty script (the floor any
// Redis-backed call pays), from 32 goroutines on standalone Redis.
func BenchmarkSlidingWindow(b *testing.B) {
	c := testredis.Standalone(b)
	s := NewRedis(c, testredis.Prefix(b), Config{Logger: quietLogger()})
	w, err := s.SlidingWindow("sw", Options{Window: time.Second, MaxRequests: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	key := s.keys.RateLimitWindow("sw", "raw")
	if err := windowAllowScript.Run(ctx, c, []string{key}, 1000000, 1<<40, 1).Err(); err != nil {
		b.Fatal(err)
	}
	empty := redis.NewScript("return 1")
	if err := empty.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, f func(i int) error) {
		b.SetParallelism(16) // 32 goroutines on 2 CPUs
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if err := f(i); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
	}
	b.Run("AllowOp", func(b *testing.B) {
		run(b, func(i int) error {
			_, err := w.AllowOp(fmt.Sprint("k", i%64), 1).Do(ctx)
			return err
		})
	})
	b.Run("raw-EVALSHA", func(b *testing.B) {
		sha := windowAllowScript.Hash()
		run(b, func(i int) error {
			return c.EvalSha(ctx, sha, []string{s.keys.RateLimitWindow("sw", fmt.Sprint("r", i%64))}, 1000000, 1<<40, 1).Err()
		})
	})
	b.Run("empty-EVALSHA", func(b *testing.B) {
		run(b, func(int) error { return empty.EvalSha(ctx, c, []string{key}).Err() })
	})
}
