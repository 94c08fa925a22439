package lock

import (
	"context"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// One subscription per lock serves every watcher of the process and lingers
// after the last one leaves, so the next contended acquire reuses it; a
// cancelled watcher is never called again.
func TestWatchSharesAndReusesTheSubscription(t *testing.T) {
	c := testredis.Standalone(t)
	b, _ := newRedisBackend(t, c)
	ctx := context.Background()
	first := make(chan struct{}, 4)
	cancel1, err := watchB(ctx, b, "w", func() { first <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan struct{}, 4)
	cancel2, err := watchB(ctx, b, "w", func() { second <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	if b.watch.subscriptions() != 1 {
		t.Fatal("two watchers of one lock did not share a subscription")
	}
	release := func() {
		if _, ok, _, err := try(ctx, b, "w", "owner", Exclusive, Options{TTL: time.Minute}); !ok || err != nil {
			t.Fatalf("acquire: %v %v", ok, err)
		}
		if _, err := rel(ctx, b, "w", "owner", Exclusive); err != nil {
			t.Fatal(err)
		}
	}
	release()
	for _, ch := range []chan struct{}{first, second} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("a watcher was not woken by the release")
		}
	}
	cancel1()
	cancel2()
	// Lingering: a new watcher reuses the subscription, and the cancelled
	// ones are not called.
	third := make(chan struct{}, 4)
	cancel3, err := watchB(ctx, b, "w", func() { third <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer cancel3()
	release()
	select {
	case <-third:
	case <-time.After(5 * time.Second):
		t.Fatal("the reused subscription did not wake the new watcher")
	}
	if len(first)+len(second) != 0 {
		t.Fatal("a cancelled watcher was called")
	}
}

func TestWatchUnsubscribesAfterLinger(t *testing.T) {
	c := testredis.Standalone(t)
	b, prefix := newRedisBackend(t, c)
	ctx := context.Background()
	cancel, err := watchB(ctx, b, "linger", func() {})
	if err != nil {
		t.Fatal(err)
	}
	channel := prefix + "lock:released:{linger}"
	subscribers := func() int64 {
		n, err := c.PubSubNumSub(ctx, channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[channel]
	}
	if subscribers() != 1 {
		t.Fatal("not subscribed while watched")
	}
	cancel()
	deadline := time.Now().Add(watchLinger + 10*time.Second)
	for subscribers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("still subscribed long after the last watcher left")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
