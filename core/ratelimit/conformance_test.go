package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/internal/testclock"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// afterFunc is Config.AfterFunc on clk.
func afterFunc(clk *testclock.Clock) func(time.Duration, func()) func() bool {
	return func(d time.Duration, f func()) func() bool { return clk.AfterFunc(d, f).Stop }
}

// backend is one deployment the conformance suite runs on.
type backend struct {
	name string
	// newSet returns a started Set on its own key space with the clock of
	// clk for the local math and timers.
	newSet func(t *testing.T, clk *testclock.Clock) *Set
	// settle lets the Set's reports land (Redis) before the test moves the
	// fake clock: the local math runs on the fake clock, Redis on its own.
	settle func(t *testing.T, s *Set)
	// sleep lets time pass for sliding windows: the fake clock on memory,
	// real time on Redis (server time).
	sleep func(clk *testclock.Clock, d time.Duration)
}

func backends(t *testing.T) []backend {
	mem := backend{
		name: "memory",
		newSet: func(t *testing.T, clk *testclock.Clock) *Set {
			s := NewMemory(Config{Now: clk.Now, AfterFunc: afterFunc(clk), Logger: quietLogger()})
			s.Start()
			t.Cleanup(s.Stop)
			return s
		},
		settle: func(*testing.T, *Set) {},
		sleep:  func(clk *testclock.Clock, d time.Duration) { clk.AdvanceStepwise(d) },
	}
	bs := []backend{mem}
	for name, c := range testredis.Backends(t) {
		bs = append(bs, backend{
			name:   name,
			newSet: func(t *testing.T, clk *testclock.Clock) *Set { return newSyncedSet(t, c, clk) },
			settle: func(t *testing.T, s *Set) {
				t.Helper()
				if err := s.SyncNow(t.Context()); err != nil {
					t.Fatal(err)
				}
			},
			sleep: func(_ *testclock.Clock, d time.Duration) { time.Sleep(d) },
		})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].name < bs[j].name })
	return bs
}

func TestConformance(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			t.Run("TokenBucket", func(t *testing.T) { tokenBucketConformance(t, be) })
			t.Run("Wait", func(t *testing.T) { waitConformance(t, be) })
			t.Run("WaitOrder", func(t *testing.T) { waitOrderConformance(t, be) })
			t.Run("SlidingWindow", func(t *testing.T) { slidingWindowConformance(t, be) })
			t.Run("SlidingWindowNeverOverMax", func(t *testing.T) { slidingWindowExact(t, be) })
			t.Run("Options", func(t *testing.T) { optionsConformance(t, be) })
			t.Run("Stats", func(t *testing.T) { statsConformance(t, be) })
		})
	}
}

// newSyncedSet is a started Redis Set on c with clk for its clock and timers, and
// an interval long enough that only SyncNow reports, after its first sync.
func newSyncedSet(t *testing.T, c redis.UniversalClient, clk *testclock.Clock) *Set {
	t.Helper()
	s := NewRedis(c, testredis.Prefix(t), Config{Now: clk.Now, AfterFunc: afterFunc(clk),
		SyncInterval: time.Hour, Logger: quietLogger()})
	s.Start()
	t.Cleanup(s.Stop)
	if err := s.SyncNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

func mustAllow(t *testing.T, l *TokenBucket, key string, n int, want bool) {
	t.Helper()
	ok, reason := l.Allow(key, n)
	if ok != want {
		t.Fatalf("Allow(%q, %d) = %v %q, want %v (remaining %d)", key, n, ok, reason, want, l.Remaining(key))
	}
	if !ok && reason != Rejected || ok && reason != "" {
		t.Fatalf("Allow(%q, %d) = %v with reason %q", key, n, ok, reason)
	}
}

func tokenBucketConformance(t *testing.T, be backend) {
	clk := testclock.New()
	s := be.newSet(t, clk)
	l, err := s.TokenBucket("tb", Options{Rate: 10, Burst: 5})
	if err != nil {
		t.Fatal(err)
	}
	// A new key holds the whole burst.
	if n := l.Remaining("a"); n != 5 {
		t.Fatalf("Remaining of a new key = %d, want 5", n)
	}
	for range 5 {
		mustAllow(t, l, "a", 1, true)
	}
	mustAllow(t, l, "a", 1, false)
	be.settle(t, s) // the first report must not change what the key holds
	mustAllow(t, l, "a", 1, false)
	if n := l.Remaining("a"); n != 0 {
		t.Fatalf("Remaining after the burst = %d, want 0", n)
	}
	// Another key is independent.
	mustAllow(t, l, "b", 5, true)
	mustAllow(t, l, "b", 1, false)

	// 10/s: one token per 100ms.
	if d, ok := l.Delay("a", 1); !ok || d != 100*time.Millisecond {
		t.Fatalf("Delay(a, 1) = %v %v, want 100ms", d, ok)
	}
	clk.AdvanceStepwise(100 * time.Millisecond)
	mustAllow(t, l, "a", 1, true)
	mustAllow(t, l, "a", 1, false)
	// Refill stops at the burst.
	clk.AdvanceStepwise(10 * time.Second)
	if n := l.Remaining("a"); n != 5 {
		t.Fatalf("Remaining after 10s = %d, want the burst 5", n)
	}
	be.settle(t, s)
	if n := l.Remaining("a"); n != 5 {
		t.Fatalf("Remaining after a report = %d, want 5", n)
	}
	mustAllow(t, l, "a", 3, true)
	mustAllow(t, l, "a", 3, false) // all or nothing
	if n := l.Remaining("a"); n != 2 {
		t.Fatalf("Remaining = %d, want 2", n)
	}
	if d, ok := l.Delay("a", 3); !ok || d != 100*time.Millisecond {
		t.Fatalf("Delay(a, 3) = %v %v, want 100ms", d, ok)
	}
	if d, ok := l.Delay("a", 2); !ok || d != 0 {
		t.Fatalf("Delay(a, 2) = %v %v, want 0", d, ok)
	}
	// More than the burst never fits.
	mustAllow(t, l, "a", 6, false)
	if _, ok := l.Delay("a", 6); ok {
		t.Fatal("Delay(a, 6) with burst 5: want not ok")
	}
	// n <= 0 takes nothing.
	if ok, _ := l.Allow("a", 0); !ok {
		t.Fatal("Allow(a, 0) = false")
	}
	if n := l.Remaining("a"); n != 2 {
		t.Fatalf("Remaining after Allow(0) = %d, want 2", n)
	}
	// Fractional rates accumulate.
	slow, err := s.TokenBucket("slow", Options{Rate: 0.5, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	mustAllow(t, slow, "x", 1, true)
	be.settle(t, s)
	clk.AdvanceStepwise(1999 * time.Millisecond)
	mustAllow(t, slow, "x", 1, false)
	clk.AdvanceStepwise(time.Millisecond)
	mustAllow(t, slow, "x", 1, true)
}

func waitConformance(t *testing.T, be backend) {
	clk := testclock.New()
	s := be.newSet(t, clk)
	l, err := s.TokenBucket("w", Options{Rate: 10, Burst: 2})
	if err != nil {
		t.Fatal(err)
	}
	mustAllow(t, l, "k", 2, true)
	be.settle(t, s)
	type result struct {
		ok     bool
		reason Reason
	}
	results := make(chan result, 10)
	done := func(ok bool, r Reason) { results <- result{ok, r} }
	expect := func(want result) {
		t.Helper()
		select {
		case got := <-results:
			if got != want {
				t.Fatalf("wait finished with %+v, want %+v", got, want)
			}
		default:
			t.Fatalf("wait not finished, want %+v", want)
		}
	}
	none := func() {
		t.Helper()
		select {
		case got := <-results:
			t.Fatalf("wait finished early: %+v", got)
		default:
		}
	}

	// Two tokens come after 200ms.
	l.Wait("k", 2, time.Second, done)
	clk.AdvanceStepwise(0)
	none()
	clk.AdvanceStepwise(199 * time.Millisecond)
	none()
	clk.AdvanceStepwise(time.Millisecond)
	expect(result{true, ""})
	mustAllow(t, l, "k", 1, false) // the waiter took them

	// More than the burst: timeout at the deadline, not before.
	l.Wait("k", 3, 500*time.Millisecond, done)
	clk.AdvanceStepwise(499 * time.Millisecond)
	none()
	clk.AdvanceStepwise(time.Millisecond)
	expect(result{false, Timeout})

	// A token taken by someone else meanwhile: the waiter waits again.
	mustAllow(t, l, "k", 2, true)
	l.Wait("k", 1, time.Second, done)
	clk.AdvanceStepwise(50 * time.Millisecond)
	clk.Jump(50 * time.Millisecond) // the token arrives, without firing the timer...
	mustAllow(t, l, "k", 1, true)   // ...and someone else takes it
	clk.AdvanceStepwise(0)
	none()
	clk.AdvanceStepwise(100 * time.Millisecond)
	expect(result{true, ""})

	// Cancel: done is never called.
	clk.AdvanceStepwise(200 * time.Millisecond)
	mustAllow(t, l, "k", 2, true)
	cancel := l.Wait("k", 1, time.Second, done)
	if !cancel() {
		t.Fatal("cancel of a pending wait = false")
	}
	if cancel() {
		t.Fatal("second cancel = true")
	}
	clk.AdvanceStepwise(2 * time.Second)
	none()
	// Cancel after it finished reports so.
	cancel = l.Wait("k", 1, time.Second, done)
	clk.AdvanceStepwise(0)
	expect(result{true, ""})
	if cancel() {
		t.Fatal("cancel after done = true")
	}
}

// Waits are served first come, first served: a wait for 5 tokens ahead of
// waits for 1 is not starved by them (it timed out while 45 tokens went to
// the others), and the waits for 1 are served in the order they started
// (2, 1, 5, 4, 3 before).
func waitOrderConformance(t *testing.T, be backend) {
	clk := testclock.New()
	s := be.newSet(t, clk)
	l, err := s.TokenBucket("order", Options{Rate: 10, Burst: 5})
	if err != nil {
		t.Fatal(err)
	}
	mustAllow(t, l, "k", 5, true)
	be.settle(t, s)
	served := make(chan string, 10)
	wait := func(name string, n int) {
		l.Wait("k", n, 10*time.Second, func(ok bool, r Reason) {
			if !ok {
				name += " timed out (" + string(r) + ")"
			}
			served <- name
		})
	}
	wait("five", 5)
	for i := 1; i <= 5; i++ {
		wait(fmt.Sprintf("one#%d", i), 1)
	}
	var order []string
	for step := 0; step < 20 && len(order) < 6; step++ {
		clk.AdvanceStepwise(100 * time.Millisecond)
		if step == 2 && l.Take("k", 1) {
			t.Fatal("Take took a token while earlier waits were waiting")
		}
		for drained := false; !drained; {
			select {
			case name := <-served:
				order = append(order, name)
			default:
				drained = true
			}
		}
	}
	want := []string{"five", "one#1", "one#2", "one#3", "one#4", "one#5"}
	if !slices.Equal(order, want) {
		t.Fatalf("waits served %v; want %v", order, want)
	}
	if !l.Take("k", 0) {
		t.Fatal("Take with nobody waiting = false")
	}
}

// swAllow runs AllowOp and fails the test on an error.
func swAllow(t *testing.T, w *SlidingWindow, key string, n int) Decision {
	t.Helper()
	d, err := w.Allow(t.Context(), key, n)
	if err != nil {
		t.Fatalf("Allow(%q, %d): %v", key, n, err)
	}
	return d
}

func swRemaining(t *testing.T, w *SlidingWindow, key string) int64 {
	t.Helper()
	n, err := w.RemainingOp(key).Do(t.Context())
	if err != nil {
		t.Fatalf("Remaining(%q): %v", key, err)
	}
	return n
}

func slidingWindowConformance(t *testing.T, be backend) {
	clk := testclock.New()
	s := be.newSet(t, clk)
	const window = 300 * time.Millisecond
	w, err := s.SlidingWindow("sw", Options{Window: window, MaxRequests: 3})
	if err != nil {
		t.Fatal(err)
	}
	if n := swRemaining(t, w, "a"); n != 3 {
		t.Fatalf("Remaining of a new key = %d, want 3", n)
	}
	for i := range 3 {
		d := swAllow(t, w, "a", 1)
		if !d.Allowed || d.Reason != "" || d.Remaining != int64(2-i) {
			t.Fatalf("request %d: %+v, want allowed with %d remaining", i+1, d, 2-i)
		}
	}
	d := swAllow(t, w, "a", 1)
	if d.Allowed || d.Reason != Rejected || d.Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter > window {
		t.Fatalf("fourth request: %+v, want rejected, retry within the window", d)
	}
	if n := swRemaining(t, w, "a"); n != 0 {
		t.Fatalf("Remaining when full = %d", n)
	}
	// More than the maximum never fits.
	if d := swAllow(t, w, "b", 4); d.Allowed || d.RetryAfter != -1 {
		t.Fatalf("Allow(b, 4) with max 3: %+v, want rejected, RetryAfter -1", d)
	}
	if d := swAllow(t, w, "b", 2); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("Allow(b, 2): %+v", d)
	}
	if d := swAllow(t, w, "b", 2); d.Allowed || d.Remaining != 1 {
		t.Fatalf("Allow(b, 2) with 1 left: %+v, want rejected with 1 remaining", d)
	}
	if _, err := w.Allow(t.Context(), "b", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Allow(b, 0): %v, want ErrInvalid", err)
	}
	// After the window the key is empty again.
	be.sleep(clk, window+20*time.Millisecond)
	if n := swRemaining(t, w, "a"); n != 3 {
		t.Fatalf("Remaining after the window = %d, want 3", n)
	}
	if d := swAllow(t, w, "a", 3); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("Allow(a, 3) after the window: %+v", d)
	}
}

// slidingWindowExact hammers one key from several goroutines and checks
// that no window ever held more than the maximum. Allowed requests are
// known by the interval [sent, answered] that contains their (server)
// time: any set of requests whose intervals all fit in one window must
// have at most MaxRequests members.
func slidingWindowExact(t *testing.T, be backend) {
	clk := testclock.New()
	s := be.newSet(t, clk)
	const window, max = 200 * time.Millisecond, 10
	w, err := s.SlidingWindow("exact", Options{Window: window, MaxRequests: max})
	if err != nil {
		t.Fatal(err)
	}
	type span struct {
		sent, got time.Time
		n         int
	}
	var mu sync.Mutex
	var spans []span
	now := time.Now
	if be.name == "memory" {
		now = clk.Now
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < 400; i++ {
				sent := now()
				n := 1 + r.IntN(2)
				d, err := w.Allow(context.Background(), "k", n)
				got := now()
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					mu.Lock()
					spans = append(spans, span{sent, got, n})
					mu.Unlock()
				}
				if be.name == "memory" {
					clk.Jump(time.Duration(r.IntN(2)) * time.Millisecond)
				} else {
					time.Sleep(time.Duration(r.IntN(3)) * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	sort.Slice(spans, func(i, j int) bool { return spans[i].sent.Before(spans[j].sent) })
	if len(spans) < max {
		t.Fatalf("only %d requests allowed", len(spans))
	}
	worst := 0
	for i, a := range spans {
		n := 0
		for _, b := range spans[i:] {
			if b.got.Before(a.sent.Add(window)) {
				n += b.n
			}
		}
		worst = maxInt(worst, n)
	}
	if worst > max {
		t.Fatalf("%d allowed requests within one window of %v, max %d", worst, window, max)
	}
	t.Logf("%d calls allowed, at most %d requests seen within one window", len(spans), worst)
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func optionsConformance(t *testing.T, be backend) {
	s := be.newSet(t, testclock.New())
	bad := []struct {
		o    Options
		want string
	}{
		{Options{Rate: 0, Burst: 1}, "rate = 0"},
		{Options{Rate: -1, Burst: 1}, "rate = -1"},
		{Options{Rate: nan(), Burst: 1}, "rate = NaN"},
		{Options{Rate: inf(), Burst: 1}, "rate = +Inf"},
		{Options{Rate: 1, Burst: 0.5}, "burst = 0.5"},
		{Options{Rate: 1}, "burst = 0"},
		{Options{Rate: 1, Burst: 1, Window: time.Second}, "window = 1s"},
		{Options{Rate: 1, Burst: 1, MaxRequests: 3}, "max_requests = 3"},
		{Options{Sliding: true, Window: 0, MaxRequests: 1}, "window = 0s"},
		{Options{Sliding: true, Window: time.Microsecond, MaxRequests: 1}, "window = 1µs"},
		{Options{Sliding: true, Window: time.Second}, "max_requests = 0"},
		{Options{Sliding: true, Window: time.Second, MaxRequests: 1, Rate: 5}, "rate = 5"},
		{Options{Algorithm: "leaky_bucket", Rate: 1, Burst: 1}, `algorithm = "leaky_bucket"`},
		{Options{Algorithm: AlgorithmTokenBucket, Sliding: true, Rate: 1, Burst: 1}, "sliding = true"},
	}
	for _, c := range bad {
		_, err := s.Limiter("bad", c.o)
		if !errors.Is(err, ErrInvalid) || !containsStr(err.Error(), c.want) {
			t.Errorf("Limiter(%+v) = %v, want ErrInvalid naming %q", c.o, err, c.want)
		}
	}
	for _, name := range []string{"", "}x"} {
		if _, err := s.Limiter(name, Options{Rate: 1, Burst: 1}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Limiter(%q) = %v, want ErrInvalid", name, err)
		}
	}
	// The same name and options: the same limiter; other options: conflict.
	a, err := s.Limiter("api", Options{Rate: 100, Burst: 200})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.TokenBucket("api", Options{Rate: 100, Burst: 200})
	if err != nil || Limiter(b) != a {
		t.Fatalf("second TokenBucket(api) = %p %v, want the first %p", b, err, a)
	}
	if _, err := s.Limiter("api", Options{Rate: 100, Burst: 100}); !errors.Is(err, ErrConflict) {
		t.Fatalf("api with another burst: %v, want ErrConflict", err)
	}
	if _, err := s.SlidingWindow("api", Options{Window: time.Second, MaxRequests: 1}); !errors.Is(err, ErrConflict) {
		t.Fatalf("api as a sliding window: %v, want ErrConflict", err)
	}
	if _, err := s.TokenBucket("sw", Options{Sliding: true, Window: time.Second, MaxRequests: 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("TokenBucket with sliding options: %v, want ErrInvalid", err)
	}
	// Sliding = true or the algorithm picks the sliding window.
	l, err := s.Limiter("strict", Options{Window: time.Minute, MaxRequests: 100, Sliding: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.(*SlidingWindow); !ok || l.Options().Algorithm != AlgorithmSlidingWindow {
		t.Fatalf("sliding = true gave %T %+v", l, l.Options())
	}
	if got, ok := s.Get("strict"); !ok || got != l {
		t.Fatal("Get(strict) does not return the limiter")
	}
}

func nan() float64 { z := 0.0; return z / z }
func inf() float64 { z := 0.0; return 1 / z }

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func statsConformance(t *testing.T, be backend) {
	clk := testclock.New()
	// The fake clock starts at midnight UTC; go to a minute before the next.
	clk.Jump(24*time.Hour - time.Minute)
	s := be.newSet(t, clk)
	l, err := s.TokenBucket("st", Options{Rate: 1, Burst: 2})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.SlidingWindow("sw", Options{Window: time.Hour, MaxRequests: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		l.Allow(fmt.Sprint("k", i%2), 1) // k0: 3 requests, k1: 2
	}
	swAllow(t, w, "x", 1)
	swAllow(t, w, "x", 1)
	st := s.Stats()
	if st.Limiters != 2 || st.Allowed != 5 || st.Rejected != 2 || st.RejectedToday != 2 {
		t.Fatalf("stats %+v: want 2 limiters, 5 allowed, 2 rejected, 2 today", st)
	}
	if lt := l.Stats(); lt.ActiveKeys != 2 || lt.Allowed != 4 || lt.Rejected != 1 || lt.Processes != 1 {
		t.Fatalf("token bucket stats %+v", lt)
	}
	// After midnight UTC rejected_today starts again.
	be.settle(t, s)
	clk.AdvanceStepwise(2 * time.Minute)
	if st := s.Stats(); st.RejectedToday != 0 || st.Rejected != 2 {
		t.Fatalf("after midnight: %+v, want 0 rejected today, 2 in all", st)
	}
	for range 4 {
		l.Allow("k9", 1)
	}
	if st := s.Stats(); st.RejectedToday != 2 {
		t.Fatalf("after midnight and two rejections: %+v", st)
	}
}
