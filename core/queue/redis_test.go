package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// forEachRedis runs f on every Redis deployment.
func forEachRedis(t *testing.T, f func(t *testing.T, e env)) {
	for _, name := range sortedNames(testredis.Backends(t)) {
		c := testredis.Backends(t)[name]
		t.Run(name, func(t *testing.T) { f(t, newRedisEnv(t, c)) })
	}
}

func TestRedisWakeUpsAcrossProcesses(t *testing.T) {
	forEachRedis(t, func(t *testing.T, e env) {
		other := e.second(t)
		t.Run("plain", func(t *testing.T) {
			a, _ := e.b.Plain("wake", testOptions())
			b, _ := other.Plain("wake", testOptions())
			ch, _ := popWait[Message](a, time.Minute)
			time.Sleep(50 * time.Millisecond) // the notifier has popped and is asleep
			do(t, b.Push([]byte("hi")))
			if r := await(t, ch); r.err != nil || string(r.v.Body) != "hi" {
				t.Fatalf("got %q %v", r.v.Body, r.err)
			}
		})
		t.Run("delay brought earlier", func(t *testing.T) {
			a, _ := e.b.Delay("wake-delay", testOptions())
			b, _ := other.Delay("wake-delay", testOptions())
			do(t, b.Push([]byte("later"), time.Hour))
			ch, _ := popWait[Message](a, time.Minute)
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			do(t, b.Push([]byte("soon"), 200*time.Millisecond))
			r := await(t, ch)
			if r.err != nil || string(r.v.Body) != "soon" {
				t.Fatalf("got %q %v", r.v.Body, r.err)
			}
			t.Logf("due after 200ms, delivered after %v", time.Since(start))
		})
		t.Run("reliable", func(t *testing.T) {
			a := mustReliable(t, e, "wake-rel", testOptions())
			b, _ := other.Reliable("wake-rel", testOptions())
			ch, _ := popWait[*Delivery](a, time.Minute)
			time.Sleep(50 * time.Millisecond)
			do(t, b.Push([]byte("job")))
			r := await(t, ch)
			if r.err != nil || string(r.v.Body) != "job" {
				t.Fatalf("got %+v %v", r.v, r.err)
			}
			wantErr(t, b.Ack(r.v), ErrForeign) // another process's handle object
			do(t, a.Ack(r.v))
		})
	})
}

func TestRedisKindMismatchAcrossProcesses(t *testing.T) {
	forEachRedis(t, func(t *testing.T, e env) {
		other := e.second(t)
		p, _ := e.b.Plain("kind", testOptions())
		do(t, p.Push([]byte("x")))
		d, _ := other.Priority("kind", testOptions())
		wantErr(t, d.Push([]byte("y"), 1), ErrConflict)
		dq, _ := e.b.Delay("kind2", testOptions())
		do(t, dq.Push([]byte("x"), 0))
		pq, _ := other.Priority("kind2", testOptions())
		wantErr(t, pq.Push([]byte("y"), 1), ErrConflict)
	})
}

func TestRedisWithoutBusRechecks(t *testing.T) {
	c := testredis.Standalone(t)
	b := NewRedis(c, testredis.Prefix(t), nil, RedisOptions{})
	b.t = fastTiming()
	b.t.recheck = 50 * time.Millisecond
	defer b.Close()
	q, _ := b.Plain("nobus", testOptions())
	ch, _ := popWait[Message](q, time.Minute)
	time.Sleep(20 * time.Millisecond)
	do(t, q.Push([]byte("polled")))
	if r := await(t, ch); string(r.v.Body) != "polled" {
		t.Fatalf("got %q %v", r.v.Body, r.err)
	}
}

// privateEnv is a backend on a private server the test may stop or freeze.
func privateEnv(t *testing.T) (*testredis.Server, *redis.Client, func(consumer string) *Redis) {
	srv := testredis.StartServer(t)
	prefix := testredis.Prefix(t)
	open := func(consumer string) *Redis {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: time.Second, WriteTimeout: time.Second,
			DialTimeout: 500 * time.Millisecond, MaxRetries: -1})
		bus := pubsub.NewRedis(c, prefix, pubsub.Events{})
		b := NewRedis(c, prefix, bus, RedisOptions{Consumer: consumer})
		b.t = fastTiming()
		t.Cleanup(func() {
			b.Close()
			bus.Close()
			c.Close()
		})
		return b
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { admin.Close() })
	return srv, admin, open
}

// freeze SIGSTOPs the server for d, then lets it run again.
func freeze(t *testing.T, admin *redis.Client, d time.Duration) {
	t.Helper()
	info, err := admin.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid == 0 {
		t.Fatalf("no process_id in INFO server")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	time.Sleep(d)
}

func TestRedisRestartDoesNotStallWaiters(t *testing.T) {
	srv, _, open := privateEnv(t)
	b := open("p1")
	q, _ := b.Plain("restart", testOptions())
	r, _ := b.Reliable("restart-rel", testOptions())
	ch, _ := popWait[Message](q, time.Minute)
	rch, _ := popWait[*Delivery](r, time.Minute)
	time.Sleep(50 * time.Millisecond)
	srv.Restart() // the pub/sub connection and the waiting flags are gone
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err1 := q.Push([]byte("after")).Do(context.Background())
		_, err2 := r.Push([]byte("after")).Do(context.Background())
		if err1 == nil && err2 == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pushes keep failing: %v %v", err1, err2)
		}
		time.Sleep(50 * time.Millisecond)
	}
	start := time.Now()
	if r := await(t, ch); r.err != nil || string(r.v.Body) != "after" {
		t.Fatalf("plain waiter got %q %v", r.v.Body, r.err)
	}
	if r := await(t, rch); r.err != nil || string(r.v.Body) != "after" {
		t.Fatalf("reliable waiter got %+v %v", r.v, r.err)
	}
	t.Logf("waiters served %v after the first successful push following the restart", time.Since(start))
}

// TestRedisFreezeAndRestartLoseNothing runs producers and consumers of a
// reliable queue through a 5s SIGSTOP of Redis: every message acknowledged by
// a push is processed (at least once), and consumers resume by themselves.
// Then the server restarts (losing its data): consumers go on with what is
// pushed after it.
func TestRedisFreezeAndRestartLoseNothing(t *testing.T) {
	srv, admin, open := privateEnv(t)
	o := testOptions()
	o.VisibilityTimeout = 2 * time.Second
	o.MaxRetries = 100
	o.MaxLength = 1 << 20
	var mu sync.Mutex
	pushed := map[string]bool{}
	processed := map[string]int{}
	var stops []StopFunc
	var queues []Reliable
	for i := 0; i < 2; i++ {
		q, _ := open(fmt.Sprintf("c%d", i)).Reliable("jobs", o)
		queues = append(queues, q)
		stop, err := q.Consume(ConsumeOptions{Concurrency: 8, Block: 2 * time.Second}, func(d *Delivery, done func(error)) {
			mu.Lock()
			processed[string(d.Body)]++
			mu.Unlock()
			done(nil)
		})
		if err != nil {
			t.Fatal(err)
		}
		stops = append(stops, stop)
	}
	producer, _ := open("producer").Reliable("jobs", o)
	push := func(body string) {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := producer.Push([]byte(body)).Do(ctx)
			cancel()
			if err == nil {
				mu.Lock()
				pushed[body] = true
				mu.Unlock()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stopProducing := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; ; i++ {
			select {
			case <-stopProducing:
				return
			default:
			}
			push(fmt.Sprintf("m%d", i))
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	freeze(t, admin, 5*time.Second)
	time.Sleep(500 * time.Millisecond)
	close(stopProducing)
	<-produced

	waitAll := func(what string, want func() (bool, string)) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok, msg := want()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s", what, msg)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitAll("after the freeze", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		for m := range pushed {
			if processed[m] == 0 {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d pushed messages never processed", missing, len(pushed))
	})
	waitAll("queue drained after the freeze", func() (bool, string) {
		n := do(t, queues[0].Length())
		return n == 0, fmt.Sprintf("%d messages left", n)
	})
	mu.Lock()
	t.Logf("freeze: %d pushed, all processed", len(pushed))
	mu.Unlock()

	srv.Restart()
	resumed := time.Now()
	for i := 0; i < 100; i++ {
		push(fmt.Sprintf("r%d", i))
	}
	waitAll("after the restart", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		for i := 0; i < 100; i++ {
			if processed[fmt.Sprintf("r%d", i)] == 0 {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of 100 messages pushed after the restart never processed", missing)
	})
	t.Logf("restart: consumers processed everything %v after the first push", time.Since(resumed))
	for _, s := range stops {
		if err := s(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("stop: %v", err)
		}
	}
}
