package queue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/internal/testclock"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// env is one backend under test.
type env struct {
	b Backend
	// advance lets d pass for the backend: the memory backend's fake clock
	// moves (firing its timers), Redis sleeps.
	advance func(d time.Duration)
	// now is the backend's time (Redis: the local clock, close to the
	// server's on this machine).
	now    func() time.Time
	memory bool
	// second opens another process's view of the same key space (Redis: a
	// second backend on the same prefix with its own consumer name); nil on
	// memory.
	second func(t *testing.T) Backend
}

// span is d on memory and 10·d on Redis, for the durations a test needs
// real time to respect: a message whose TTL is d must outlive the round
// trips between its push and its pop, which a loaded machine stretched
// past 50 ms (message_ttl failed 1 run in 4 on Redis).
func (e env) span(d time.Duration) time.Duration {
	if e.memory {
		return d
	}
	return 10 * d
}

// testOptions are small limits for tests.
func testOptions() Options {
	return Options{MaxLength: 1000, MaxRetries: 2, VisibilityTimeout: time.Minute,
		DeadLetter: DeadLetterOptions{Enabled: true, MaxLength: 100}}
}

// fastTiming shortens the Redis backend's intervals for tests.
func fastTiming() timing {
	t := defaultTiming
	t.linger = 2 * time.Second
	return t
}

func newRedisEnv(t *testing.T, c redis.UniversalClient) env {
	prefix := testredis.Prefix(t)
	open := func(t *testing.T, consumer string) Backend {
		bus := pubsub.NewRedis(c, prefix, pubsub.Events{})
		b := NewRedis(c, prefix, bus, RedisOptions{Consumer: consumer})
		b.t = fastTiming()
		t.Cleanup(func() {
			b.Close()
			bus.Close()
		})
		return b
	}
	n := 0
	return env{
		b:       open(t, "proc-1"),
		advance: time.Sleep,
		now:     time.Now,
		second: func(t *testing.T) Backend {
			n++
			return open(t, fmt.Sprintf("proc-%d", n+1))
		},
	}
}

func newMemoryEnv(t *testing.T) env {
	clk := testclock.New()
	b := NewMemory(MemoryOptions{Clock: clk})
	t.Cleanup(func() { b.Close() })
	return env{b: b, advance: clk.AdvanceStepwise, now: clk.Now, memory: true}
}

// forEachBackend runs f on memory and on every Redis deployment.
func forEachBackend(t *testing.T, f func(t *testing.T, e env)) {
	t.Run("memory", func(t *testing.T) { f(t, newMemoryEnv(t)) })
	for _, name := range sortedNames(testredis.Backends(t)) {
		c := testredis.Backends(t)[name]
		t.Run(name, func(t *testing.T) { f(t, newRedisEnv(t, c)) })
	}
}

func sortedNames(m map[string]redis.UniversalClient) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func do[T any](t *testing.T, op interface {
	Do(context.Context) (T, error)
}) T {
	t.Helper()
	v, err := op.Do(context.Background())
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	return v
}

func wantErr[T any](t *testing.T, op interface {
	Do(context.Context) (T, error)
}, target error) T {
	t.Helper()
	v, err := op.Do(context.Background())
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
	return v
}

// result is one PopWait outcome.
type result[T any] struct {
	v   T
	err error
}

// popWait starts a PopWait and returns the channel its result arrives on.
func popWait[T any](w Waiter[T], timeout time.Duration) (<-chan result[T], func() bool) {
	ch := make(chan result[T], 1)
	cancel := w.PopWait(timeout, func(v T, err error) { ch <- result[T]{v, err} })
	return ch, cancel
}

// await receives from ch within 10s of real time.
func await[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no result within 10s")
	}
	panic("unreachable")
}

// quiet asserts that nothing arrives on ch within d of real time.
func quiet[T any](t *testing.T, ch <-chan T, d time.Duration) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected result %+v", v)
	case <-time.After(d):
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
