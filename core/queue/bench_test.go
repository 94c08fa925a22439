package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// Benchmarks run against the standalone test server (make bench, or
// scripts/with-redis.sh go test -run=NONE -bench=. ./core/queue/). Each
// push+pop benchmark runs 32 goroutines and compares one shield op per
// command against the raw go-redis commands a hand-written queue would send.

const benchGoroutines = 32

func parallel32(b *testing.B, f func()) {
	b.SetParallelism(max(1, benchGoroutines/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			f()
		}
	})
}

func benchBackend(b *testing.B) (*Redis, redis.UniversalClient, string) {
	c := testredis.Standalone(b)
	prefix := testredis.Prefix(b)
	bus := pubsub.NewRedis(c, prefix, pubsub.Events{})
	r := NewRedis(c, prefix, bus, RedisOptions{Consumer: "bench"})
	b.Cleanup(func() {
		r.Close()
		bus.Close()
	})
	return r, c, prefix
}

func benchOptions() Options {
	o := testOptions()
	o.MaxLength = 1 << 30
	return o
}

// must returns v, panicking on an error other than ErrEmpty (benchmarks
// only: RunParallel bodies cannot call b.Fatal).
func must[T any](v T, err error) T {
	if err != nil && !errors.Is(err, ErrEmpty) {
		panic(err)
	}
	return v
}

var body = []byte(`{"type":"email","to":"user@example.com"}`)

func BenchmarkPushPop(b *testing.B) {
	ctx := context.Background()
	b.Run("plain", func(b *testing.B) {
		r, _, _ := benchBackend(b)
		q := must(r.Plain("bench", benchOptions()))
		parallel32(b, func() {
			must(q.Push(body).Do(ctx))
			must(q.Pop().Do(ctx))
		})
	})
	b.Run("raw-lpush-rpop", func(b *testing.B) {
		_, c, p := benchBackend(b)
		key := p + "raw-list"
		parallel32(b, func() {
			must(c.LPush(ctx, key, body).Result())
			if _, err := c.RPop(ctx, key).Result(); err != nil && !errors.Is(err, redis.Nil) {
				b.Fatal(err)
			}
		})
	})
	b.Run("delay", func(b *testing.B) {
		r, _, _ := benchBackend(b)
		q := must(r.Delay("bench", benchOptions()))
		parallel32(b, func() {
			must(q.Push(body, 0).Do(ctx))
			must(q.Pop().Do(ctx))
		})
	})
	b.Run("priority", func(b *testing.B) {
		r, _, _ := benchBackend(b)
		q := must(r.Priority("bench", benchOptions()))
		var n atomic.Int64
		parallel32(b, func() {
			must(q.Push(body, float64(n.Add(1)%10)).Do(ctx))
			must(q.Pop().Do(ctx))
		})
	})
	b.Run("raw-zadd-zpopmin", func(b *testing.B) {
		_, c, p := benchBackend(b)
		key := p + "raw-zset"
		var n atomic.Int64
		parallel32(b, func() {
			i := n.Add(1)
			must(c.ZAdd(ctx, key, redis.Z{Score: float64(i % 10), Member: fmt.Sprintf("%016x%s", i, body)}).Result())
			must(c.ZPopMin(ctx, key, 1).Result())
		})
	})
	b.Run("reliable", func(b *testing.B) {
		r, _, _ := benchBackend(b)
		q := must(r.Reliable("bench", benchOptions()))
		parallel32(b, func() {
			must(q.Push(body).Do(ctx))
			d, err := q.Pop().Do(ctx)
			if errors.Is(err, ErrEmpty) {
				return
			}
			must(d, err)
			must(d.Ack().Do(ctx))
		})
	})
	b.Run("raw-xadd-xreadgroup-xack", func(b *testing.B) {
		_, c, p := benchBackend(b)
		key := p + "raw-stream"
		must(c.XGroupCreateMkStream(ctx, key, "g", "0").Result())
		parallel32(b, func() {
			must(c.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"d", body}}).Result())
			res, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{key, ">"}, Count: 1, Block: -1}).Result()
			if errors.Is(err, redis.Nil) {
				return
			}
			must(res, err)
			for _, m := range res[0].Messages {
				must(c.XAck(ctx, key, "g", m.ID).Result())
			}
		})
	})
}

// BenchmarkReliableEndToEnd pushes b.N messages from 32 goroutines while a
// consumer with concurrency 32 processes and acknowledges them (hibiken/asynq
// did 7 300 tasks/s end to end on this VM).
func BenchmarkReliableEndToEnd(b *testing.B) {
	ctx := context.Background()
	r, _, _ := benchBackend(b)
	q := must(r.Reliable("e2e", benchOptions()))
	var processed atomic.Int64
	all := make(chan struct{})
	target := int64(b.N)
	stop := must(q.Consume(ConsumeOptions{Concurrency: 32}, func(d *Delivery, done func(error)) {
		if processed.Add(1) == target {
			close(all)
		}
		done(nil)
	}))
	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < benchGoroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= target {
				must(q.Push(body).Do(ctx))
			}
		}()
	}
	wg.Wait()
	<-all
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	if err := stop(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReclaim measures how late, past the visibility timeout, the
// message of a consumer that went silent is delivered to a waiting one.
func BenchmarkReclaim(b *testing.B) {
	ctx := context.Background()
	r, _, _ := benchBackend(b)
	o := benchOptions()
	o.VisibilityTimeout = 200 * time.Millisecond
	q := must(r.Reliable("reclaim", o))
	var late []time.Duration
	for i := 0; i < b.N; i++ {
		must(q.Push(body).Do(ctx))
		d := must(q.Pop().Do(ctx))
		silent := time.Now()
		got := make(chan *Delivery, 1)
		q.PopWait(10*time.Second, func(d *Delivery, err error) {
			if err != nil {
				b.Error(err)
			}
			got <- d
		})
		d2 := <-got
		late = append(late, time.Since(silent)-o.VisibilityTimeout)
		if d2 == nil || d2.ID != d.ID {
			b.Fatalf("reclaimed %+v, want %s", d2, d.ID)
		}
		must(d2.Ack().Do(ctx))
	}
	reportPercentiles(b, late, "late")
}

// BenchmarkDelayLateness pushes messages due 20ms–1s ahead and records how
// long after its due time each reaches a waiting consumer (target: P99 ≤
// 50ms).
func BenchmarkDelayLateness(b *testing.B) {
	ctx := context.Background()
	r, _, _ := benchBackend(b)
	q := must(r.Delay("lateness", benchOptions()))
	n := max(b.N, 200)
	var mu sync.Mutex
	var late []time.Duration
	all := make(chan struct{})
	stop := must(q.Consume(ConsumeOptions{Concurrency: 4}, func(d *Delivery, done func(error)) {
		l := time.Since(d.Due)
		mu.Lock()
		late = append(late, l)
		if len(late) == n {
			close(all)
		}
		mu.Unlock()
		done(nil)
	}))
	b.ResetTimer()
	for i := 0; i < n; i++ {
		must(q.Push(body, time.Duration(20+(i*997)%980)*time.Millisecond).Do(ctx))
	}
	<-all
	b.StopTimer()
	if err := stop(ctx); err != nil {
		b.Fatal(err)
	}
	reportPercentiles(b, late, "late")
}

func reportPercentiles(b *testing.B, ds []time.Duration, unit string) {
	slices.Sort(ds)
	p := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(p(0.50), "p50-ms-"+unit)
	b.ReportMetric(p(0.99), "p99-ms-"+unit)
	b.ReportMetric(0, "ns/op")
}
