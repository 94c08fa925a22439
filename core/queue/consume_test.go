package queue

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// forEachRealTime runs f on a memory backend with the real clock and on
// every Redis deployment (consumer timers need real time).
func forEachRealTime(t *testing.T, f func(t *testing.T, e env)) {
	t.Run("memory", func(t *testing.T) {
		b := NewMemory(MemoryOptions{})
		t.Cleanup(func() { b.Close() })
		f(t, env{b: b, advance: time.Sleep, now: time.Now, memory: true})
	})
	for _, name := range sortedNames(testredis.Backends(t)) {
		c := testredis.Backends(t)[name]
		t.Run(name, func(t *testing.T) { f(t, newRedisEnv(t, c)) })
	}
}

func TestConsumeExtendsLongHandlers(t *testing.T) {
	forEachRealTime(t, func(t *testing.T, e env) {
		o := testOptions()
		o.VisibilityTimeout = 600 * time.Millisecond
		q := mustReliable(t, e, "long", o)
		do(t, q.Push([]byte("slow")))
		var alive atomic.Bool
		alive.Store(true)
		started := make(chan *Delivery, 2)
		release := make(chan struct{})
		stop, err := q.Consume(ConsumeOptions{Alive: alive.Load}, func(d *Delivery, done func(error)) {
			started <- d
			if string(d.Body) == "wedged" {
				return // never finishes
			}
			go func() {
				<-release
				done(nil)
			}()
		})
		if err != nil {
			t.Fatal(err)
		}
		d := await(t, started)
		time.Sleep(3 * o.VisibilityTimeout) // the handler outlives its visibility timeout
		wantErr(t, q.Pop(), ErrEmpty)       // and keeps its message
		close(release)
		deadline := time.Now().Add(10 * time.Second)
		for do(t, q.Length()) != 0 {
			if time.Now().After(deadline) {
				t.Fatal("not acknowledged")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if st := do(t, q.Stats()); st.Reclaimed != 0 {
			t.Fatalf("reclaimed while extended: %+v", st)
		}

		// A wedged process (Alive false) lets its message go.
		do(t, q.Push([]byte("wedged")))
		alive.Store(false)
		d = await(t, started)
		time.Sleep(2 * o.VisibilityTimeout)
		d2 := do(t, q.Pop())
		if d2.ID != d.ID || d2.Deliveries != 2 {
			t.Fatalf("after the wedge: %+v", d2)
		}
		do(t, d2.Ack())
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = stop(ctx)
	})
}

func TestConsumeOptionsAndRetryAfter(t *testing.T) {
	forEachRealTime(t, func(t *testing.T, e env) {
		q := mustReliable(t, e, "opts", testOptions())
		if _, err := q.Consume(ConsumeOptions{Concurrency: -1}, func(*Delivery, func(error)) {}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("negative concurrency: %v", err)
		}
		if _, err := q.Consume(ConsumeOptions{}, nil); !errors.Is(err, ErrInvalid) {
			t.Fatalf("nil handler: %v", err)
		}
		var mu sync.Mutex
		var times []time.Time
		got := make(chan struct{}, 2)
		stop, _ := q.Consume(ConsumeOptions{}, func(d *Delivery, done func(error)) {
			mu.Lock()
			times = append(times, time.Now())
			mu.Unlock()
			got <- struct{}{}
			if d.Deliveries == 1 {
				done(RetryAfter(errors.New("later"), 300*time.Millisecond))
				return
			}
			done(nil)
		})
		defer stop(context.Background())
		do(t, q.Push([]byte("x")))
		await(t, got)
		await(t, got)
		mu.Lock()
		defer mu.Unlock()
		if gap := times[1].Sub(times[0]); gap < 300*time.Millisecond {
			t.Fatalf("retried after %v, want >= 300ms", gap)
		}
	})
}

// TestDelayAccuracy checks that no delayed message is delivered early and
// that due order holds, and logs the lateness (the figures are in
// BenchmarkDelayLateness).
func TestDelayAccuracy(t *testing.T) {
	forEachRealTime(t, func(t *testing.T, e env) {
		q, _ := e.b.Delay("accuracy", testOptions())
		const n = 100
		var mu sync.Mutex
		var late []time.Duration
		var order []time.Time
		all := make(chan struct{})
		stop, _ := q.Consume(ConsumeOptions{Concurrency: 1}, func(d *Delivery, done func(error)) {
			now := time.Now()
			mu.Lock()
			late = append(late, now.Sub(d.Due))
			order = append(order, d.Due)
			if len(late) == n {
				close(all)
			}
			mu.Unlock()
			done(nil)
		})
		defer stop(context.Background())
		for i := 0; i < n; i++ {
			do(t, q.Push([]byte("x"), time.Duration(10+(i*37)%500)*time.Millisecond))
		}
		await(t, all)
		mu.Lock()
		defer mu.Unlock()
		if !slices.IsSortedFunc(order, func(a, b time.Time) int { return a.Compare(b) }) {
			t.Fatal("not delivered in due order")
		}
		slices.Sort(late)
		if late[0] < 0 {
			t.Fatalf("delivered %v early", -late[0])
		}
		t.Logf("lateness over %d messages: p50 %v, p99 %v, max %v", n, late[n/2], late[n*99/100], late[n-1])
	})
}
