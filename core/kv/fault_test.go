package kv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/faultproxy"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// A Redis that does not answer — frozen by SIGSTOP, or behind a blackhole
// that accepts and reads but never replies — fails set and incr within
// store.OpTimeout (global.redis.read_timeout), not after go-redis's
// retries: a pipeline (the runtime's batch of a loop turn) took
// (MaxRetries+1) read timeouts, 12.2 s with the default 3 s, before the
// fix. The test uses a 1 s read timeout; the old code took 4 s for the
// batch (and 2 s for a lone set).
func TestSetAndIncrFailWithinTheReadTimeoutWhenRedisDoesNotAnswer(t *testing.T) {
	srv := testredis.StartServer(t)
	proxy, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })

	for _, fault := range []string{"sigstop", "blackhole"} {
		t.Run(fault, func(t *testing.T) {
			r := store.Options{Addrs: []string{srv.Addr}, DialTimeout: 5 * time.Second} // global.redis.dial_timeout's default
			if fault == "blackhole" {
				r.Addrs = []string{proxy.Addr()}
			}
			r.ReadTimeout, r.WriteTimeout = time.Second, time.Second
			c, err := store.NewClient(r)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			bound := store.OpTimeout(c)
			if bound != time.Second {
				t.Fatalf("OpTimeout = %v; want global.redis.read_timeout (1s)", bound)
			}
			s := NewRedis(c, testredis.Prefix(t))
			ctx := context.Background()
			if _, err := s.IncrBy("n", 1).Do(ctx); err != nil {
				t.Fatal(err)
			}
			if fault == "sigstop" {
				defer srv.Freeze()()
			} else {
				proxy.Blackhole(true)
				defer proxy.Blackhole(false)
			}
			for name, op := range map[string]func() error{
				"set":  func() error { _, err := s.Set("k", []byte("v"), 0).Do(ctx); return err },
				"incr": func() error { _, err := s.IncrBy("n", 1).Do(ctx); return err },
				// As the runtime sends a loop turn's calls: one pipeline,
				// which go-redis retried 3 times, a read timeout each.
				"set and incr in one batch": func() error {
					var b store.Batch
					set, incr := s.Set("k", []byte("v"), 0), s.IncrBy("n", 1)
					b.Add(set)
					b.Add(incr)
					b.Exec(ctx)
					_, err1 := set.Result()
					_, err2 := incr.Result()
					return errors.Join(err1, err2)
				},
			} {
				start := time.Now()
				err := op()
				took := time.Since(start)
				if !errors.Is(err, store.ErrNoAnswer) {
					t.Fatalf("%s while Redis does not answer: %v; want store.ErrNoAnswer", name, err)
				}
				// Generous slack for a loaded machine; the old code took
				// (1 + 3 retries) x 1 s at least.
				if took > bound+1500*time.Millisecond {
					t.Fatalf("%s failed after %v; want within the read timeout %v (+ slack): %v", name, took, bound, err)
				}
				t.Logf("%s failed after %v: %v", name, took, err)
			}
		})
	}
	// Redis answers again once thawed (new connections; the blackholed
	// ones were dropped by go-redis after their timeouts).
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}
