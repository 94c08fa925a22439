package lock

import (
	"github.com/shieldrt/shieldglobal/internal/testclock"
	"github.com/shieldrt/shieldglobal/internal/testleak"

	"testing"
	"time"
)

func TestMemory(t *testing.T) {
	clock := testclock.New()
	runConformance(t, func(t *testing.T) Backend { return NewMemory(clock.Now) }, clock.Advance)
}

// With a nil clock the memory backend uses the real time.
func TestMemoryRealClock(t *testing.T) {
	runConformance(t, func(t *testing.T) Backend { return NewMemory(nil) }, time.Sleep)
}

// The memory backend starts no goroutine, also not for watches.
func TestMemoryStartsNoGoroutine(t *testing.T) {
	before := testleak.Snapshot()
	m := NewMemory(nil)
	ctx := t.Context()
	cancel, err := watchB(ctx, m, "l", func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if _, ok, _, err := try(ctx, m, "l", "A", Exclusive, Options{TTL: time.Second, Fair: true}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := rel(ctx, m, "l", "A", Exclusive); err != nil {
		t.Fatal(err)
	}
	testleak.NoNew(t, before, "github.com/shieldrt/shieldglobal/")
}

// Locks that are free and have no waiters (nor writer intents) are
// forgotten; token counters stay, so tokens keep growing.
func TestMemoryForgetsFreeLocks(t *testing.T) {
	clock := testclock.New()
	m := NewMemory(clock.Now)
	ctx := t.Context()
	g1, _, _, _ := try(ctx, m, "l", "A", Exclusive, Options{TTL: time.Second})
	rel(ctx, m, "l", "A", Exclusive)
	try(ctx, m, "e", "A", Shared, Options{TTL: time.Second})
	try(ctx, m, "w", "A", Exclusive, Options{TTL: time.Minute})
	try(ctx, m, "w", "W", Exclusive, Options{TTL: time.Second, Waiting: true})
	rel(ctx, m, "w", "A", Exclusive)
	clock.Advance(2 * time.Second)
	inf(ctx, m, "e")
	inf(ctx, m, "w")
	m.mu.Lock()
	n := len(m.locks)
	m.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d locks kept; want 0", n)
	}
	g2, ok, _, err := try(ctx, m, "l", "B", Exclusive, Options{TTL: time.Second})
	if !ok || err != nil || g2.Token <= g1.Token {
		t.Fatalf("token after forgetting: %d (first %d), %v %v", g2.Token, g1.Token, ok, err)
	}
}
