package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/faultproxy"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// A sliding window answers Unavailable within Config.Timeout
// (rate_limiter.timeout, 300 ms by default) when Redis does not answer —
// frozen by SIGSTOP or behind a blackhole — not after the client's read
// timeout and retries (3–6 s before the fix, 12 s through a blackhole).
// The client has the default timeouts (read_timeout 3 s).
func TestSlidingWindowIsUnavailableWithinItsTimeoutWhenRedisDoesNotAnswer(t *testing.T) {
	srv := testredis.StartServer(t)
	proxy, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	for _, fault := range []string{"sigstop", "blackhole"} {
		t.Run(fault, func(t *testing.T) {
			// The default config's timeouts (global.redis: dial 5 s, read and write 3 s).
			r := store.Options{Addrs: []string{srv.Addr}, DialTimeout: 5 * time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second}
			if fault == "blackhole" {
				r.Addrs = []string{proxy.Addr()}
			}
			c, err := store.NewClient(r)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			cfg := Config{Timeout: 300 * time.Millisecond} // rate_limiter.timeout's default
			cfg.Logger = quietLogger()
			s := NewRedis(c, testredis.Prefix(t), cfg)
			w, err := s.SlidingWindow("chat", Options{Window: time.Second, MaxRequests: 5})
			if err != nil {
				t.Fatal(err)
			}
			if w.Timeout() != 300*time.Millisecond {
				t.Fatalf("Timeout() = %v; want rate_limiter.timeout's default, 300ms", w.Timeout())
			}
			ctx := context.Background()
			if d, err := w.Allow(ctx, "p1", 1); err != nil || !d.Allowed {
				t.Fatalf("before the fault: %+v, %v", d, err)
			}
			if fault == "sigstop" {
				defer srv.Freeze()()
			} else {
				proxy.Blackhole(true)
				defer proxy.Blackhole(false)
			}
			for range 2 {
				start := time.Now()
				d, err := w.Allow(ctx, "p1", 1)
				took := time.Since(start)
				if err != nil || d.Reason != Unavailable {
					t.Fatalf("allow while Redis does not answer: %+v, %v; want Unavailable", d, err)
				}
				if took > w.Timeout()+1500*time.Millisecond {
					t.Fatalf("allow answered Unavailable after %v; want within its timeout %v (+ slack)", took, w.Timeout())
				}
				t.Logf("unavailable after %v", took)
			}
			if st := w.Stats(); st.Unavailable != 2 {
				t.Fatalf("stats %+v; want 2 unavailable", st)
			}
		})
	}
}
