package pubsub

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/internal/testleak"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// events records Events callbacks, in order.
type events struct {
	ch chan error // Down(err) sends err, Up sends nil
}

func newEvents() *events { return &events{ch: make(chan error, 100)} }

func (e *events) Events() Events {
	return Events{
		Down: func(err error) {
			if err == nil {
				err = errors.New("Down(nil)")
			}
			e.ch <- err
		},
		Up: func() { e.ch <- nil },
	}
}

func (e *events) waitDown(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-e.ch:
		if err == nil {
			t.Fatal("Up before Down")
		}
		t.Logf("Down: %v", err)
		return err
	case <-time.After(within):
		t.Fatalf("no Down within %v", within)
	}
	return nil
}

func (e *events) waitUp(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case err := <-e.ch:
		if err != nil {
			t.Fatalf("second Down in one outage: %v", err)
		}
	case <-time.After(within):
		t.Fatalf("no Up within %v", within)
	}
}

// quiet checks that no further event was reported.
func (e *events) quiet(t *testing.T) {
	t.Helper()
	select {
	case err := <-e.ch:
		t.Fatalf("unexpected event (nil is Up): %v", err)
	default:
	}
}

// privateBus is a bus on a private server that the test may stop.
func privateBus(t *testing.T) (*testredis.Server, *redis.Client, *Redis, *events) {
	t.Helper()
	srv := testredis.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	ev := newEvents()
	b := NewRedis(c, testredis.Prefix(t), ev.Events())
	t.Cleanup(func() { b.Close() })
	return srv, c, b, ev
}

// pollDelivery publishes every 100ms until r receives a message (bounded).
func pollDelivery(t *testing.T, b Bus, r *recorder, channel string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := b.Publish(ctx, channel, []byte("poll"))
		cancel()
		if err != nil {
			t.Logf("publish: %v", err)
		}
		select {
		case m := <-r.ch:
			if m.Channel != channel || string(m.Payload) != "poll" {
				t.Fatalf("got %q %q", m.Channel, m.Payload)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("nothing delivered on %q within 10s", channel)
}

func TestRedisReconnect(t *testing.T) {
	srv, _, b, ev := privateBus(t)
	r, pr := newRecorder(), newRecorder()
	subscribe(t, b, "x", r.handle)
	psubscribe(t, b, "p.*", pr.handle)
	publish(t, b, "x", "before")
	r.expect(t, "x", "", "before")

	srv.Restart()
	ev.waitDown(t, 10*time.Second)
	ev.waitUp(t, 15*time.Second)

	// Up promises that every subscription is confirmed again.
	if n := publish(t, b, "x", "after"); n != 1 {
		t.Fatalf("receivers right after Up = %d, want 1", n)
	}
	r.expect(t, "x", "", "after")
	if n := publish(t, b, "p.1", "after"); n != 1 {
		t.Fatalf("pattern receivers right after Up = %d, want 1", n)
	}
	pr.expect(t, "p.1", "p.*", "after")
	pollDelivery(t, b, r, "x")
	ev.quiet(t)

	// And again: every outage gets its own Down and Up.
	srv.Restart()
	ev.waitDown(t, 10*time.Second)
	ev.waitUp(t, 15*time.Second)
	pollDelivery(t, b, r, "x")
	ev.quiet(t)
}

// Subscribe while Redis is down fails with ctx's error once ctx ends (it
// does not hang) and leaves nothing behind; with a longer deadline it
// succeeds once the server is back.
func TestRedisSubscribeWhileDown(t *testing.T) {
	srv, _, b, ev := privateBus(t)
	ra := newRecorder()
	subscribe(t, b, "a", ra.handle)

	srv.Stop()
	ev.waitDown(t, 10*time.Second)

	for _, sub := range []func(context.Context, string, Handler) (Subscription, error){b.Subscribe, b.PSubscribe} {
		err := withGuard(t, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := sub(ctx, "b", newRecorder().handle)
			return err
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("subscribe while down = %v, want context.DeadlineExceeded", err)
		}
	}

	rc := newRecorder()
	pending := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := b.Subscribe(ctx, "c", rc.handle)
		pending <- err
	}()
	waitWaiters(t, b, 1) // it is waiting before the server comes back

	srv.Start()
	ev.waitUp(t, 15*time.Second)
	select {
	case err := <-pending:
		if err != nil {
			t.Fatalf("Subscribe pending across the outage = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Subscribe pending across the outage did not return")
	}
	if n := publish(t, b, "b", "x"); n != 0 {
		t.Fatalf("the failed subscriptions left %d receivers behind", n)
	}
	if n := publish(t, b, "c", "c"); n != 1 {
		t.Fatalf("receivers of c = %d, want 1", n)
	}
	rc.expect(t, "c", "", "c")
	if n := publish(t, b, "a", "a"); n != 1 {
		t.Fatalf("receivers of a = %d, want 1", n)
	}
	ra.expect(t, "a", "", "a")
	ev.quiet(t)
}

// The first Subscribe of a bus whose server is down, and a Subscribe that
// Close interrupts.
func TestRedisSubscribeFreshBusWhileDown(t *testing.T) {
	srv, _, b, ev := privateBus(t)
	srv.Stop()
	err := withGuard(t, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := b.Subscribe(ctx, "a", newRecorder().handle)
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Subscribe = %v, want context.DeadlineExceeded", err)
	}
	ev.waitDown(t, 10*time.Second)

	pending := make(chan error, 1)
	go func() {
		_, err := b.Subscribe(context.Background(), "a", newRecorder().handle)
		pending <- err
	}()
	waitWaiters(t, b, 1)
	if err := withGuard(t, b.Close); err != nil {
		t.Fatal(err)
	}
	if err := <-pending; !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe interrupted by Close = %v, want ErrClosed", err)
	}
}

// A connection that stays open but stops answering (here: CLIENT PAUSE)
// is detected by the unanswered PING and replaced.
func TestRedisHalfDeadConnection(t *testing.T) {
	_, c, b, ev := privateBus(t)
	b.receiveTimeout = 300 * time.Millisecond
	r := newRecorder()
	subscribe(t, b, "x", r.handle)
	if err := c.Do(context.Background(), "CLIENT", "PAUSE", "2500", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	err := ev.waitDown(t, 10*time.Second)
	if !strings.Contains(err.Error(), "no answer to a ping") {
		t.Fatalf("Down(%v), want the unanswered ping", err)
	}
	ev.waitUp(t, 20*time.Second)
	if n := publish(t, b, "x", "y"); n != 1 {
		t.Fatalf("receivers after Up = %d, want 1", n)
	}
	r.expect(t, "x", "", "y")
	ev.quiet(t)
}

// An idle bus pings the server every receive timeout; the answers keep it
// up.
func TestRedisIdlePings(t *testing.T) {
	_, _, b, ev := privateBus(t)
	b.receiveTimeout = 100 * time.Millisecond
	r := newRecorder()
	subscribe(t, b, "x", r.handle)
	b.mu.Lock()
	start := b.lastTok
	b.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		pings := b.lastTok - start
		b.mu.Unlock()
		if pings >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle pings in 10s", pings)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ev.quiet(t)
	publish(t, b, "x", "still here")
	r.expect(t, "x", "", "still here")
}

// A SUBSCRIBE the server refuses fails Subscribe with the server's error.
func TestRedisSubscribeRefused(t *testing.T) {
	srv, c, _, _ := privateBus(t)
	ctx := context.Background()
	if err := c.Do(ctx, "ACL", "SETUSER", "limited", "on", ">pw", "~*", "resetchannels", "&allowed:*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	lc := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "limited", Password: "pw"})
	t.Cleanup(func() { lc.Close() })
	b := NewRedis(lc, "allowed:", Events{})
	t.Cleanup(func() { b.Close() })
	r := newRecorder()
	subscribe(t, b, "ok", r.handle)

	cctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	nb := NewRedis(lc, "forbidden:", Events{})
	t.Cleanup(func() { nb.Close() })
	_, err := nb.Subscribe(cctx, "x", r.handle)
	if err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("Subscribe to a forbidden channel = %v, want NOPERM", err)
	}
	if !strings.HasPrefix(err.Error(), `pubsub: subscribe "x": `) {
		t.Fatalf("error %q does not say what failed", err)
	}
	// The allowed bus is unaffected.
	publish(t, b, "ok", "1")
	r.expect(t, "ok", "", "1")
}

func TestRedisSubscribeOrCloseFromHandler(t *testing.T) {
	b := NewRedis(testredis.Standalone(t), testredis.Prefix(t), Events{})
	t.Cleanup(func() { b.Close() })
	errs := make(chan error, 1)
	closed := make(chan error, 1)
	subscribe(t, b, "sub", func(Message) {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		_, err := b.Subscribe(ctx, "other", func(Message) {})
		errs <- err
	})
	subscribe(t, b, "close", func(Message) { closed <- b.Close() })
	publish(t, b, "sub", "")
	if err := <-errs; err != nil {
		t.Fatalf("Subscribe from a handler = %v, want it to work", err)
	}
	publish(t, b, "close", "")
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitFor):
		t.Fatal("Close from a handler deadlocked")
	}
	waitNoLoop(t)
}

func TestRedisPrefixWithGlobMetacharacters(t *testing.T) {
	c := testredis.Standalone(t)
	base := testredis.Prefix(t)
	// Unescaped, a's patterns would also match b's channels.
	a := NewRedis(c, base+`*[x]?\`, Events{})
	b := NewRedis(c, base+`Z[x]Z\`, Events{})
	t.Cleanup(func() { a.Close(); b.Close() })
	ra := newRecorder()
	psubscribe(t, a, "*", ra.handle)
	if n := publish(t, b, "foo", "b"); n != 0 {
		t.Fatalf("receivers = %d, want 0", n)
	}
	if n := publish(t, a, "foo", "a"); n != 1 {
		t.Fatalf("receivers = %d, want 1", n)
	}
	ra.expect(t, "foo", "*", "a") // b's message, sent before, did not arrive
	ra.empty(t)
}

// On a cluster, a publish reaches subscribers on every master; receivers
// counts those of the master the bus pins to.
func TestRedisClusterCrossNode(t *testing.T) {
	cc := testredis.Cluster(t)
	ctx := context.Background()
	prefix := testredis.Prefix(t)
	var mu sync.Mutex
	var subs []*redis.PubSub
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		ps := node.Subscribe(ctx, prefix+"x")
		if _, err := ps.ReceiveTimeout(ctx, waitFor); err != nil { // the confirmation
			return err
		}
		mu.Lock()
		subs = append(subs, ps)
		mu.Unlock()
		return nil
	})
	t.Cleanup(func() {
		for _, ps := range subs {
			ps.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 3 {
		t.Fatalf("%d masters, want 3", len(subs))
	}
	b := NewRedis(cc, prefix, Events{})
	t.Cleanup(func() { b.Close() })
	if n := publish(t, b, "x", "hi"); n != 1 {
		t.Fatalf("receivers = %d, want 1 (the subscriber on the pinned master)", n)
	}
	for _, ps := range subs {
		msg, err := ps.ReceiveTimeout(ctx, waitFor)
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := msg.(*redis.Message); !ok || m.Channel != prefix+"x" || m.Payload != "hi" {
			t.Fatalf("got %#v", msg)
		}
	}
}

func TestRedisCloseStopsGoroutine(t *testing.T) {
	c := testredis.Standalone(t)
	baseline := runtime.NumGoroutine()
	b := NewRedis(c, testredis.Prefix(t), Events{})
	publish(t, b, "nobody", "x")
	if loopRunning() {
		t.Fatal("a bus without subscriptions started its goroutine")
	}
	r := newRecorder()
	s := subscribe(t, b, "x", r.handle)
	if !loopRunning() {
		t.Fatal("no delivery goroutine after Subscribe")
	}
	publish(t, b, "x", "1")
	r.expect(t, "x", "", "1")
	s.Unsubscribe()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// The receive goroutine has ended when Close returns; the dispatch
	// goroutine (Close does not wait for a handler) ends right after.
	waitNoLoop(t)
	waitGoroutines(t, baseline)
}

func TestMemoryStartsNoGoroutine(t *testing.T) {
	before := testleak.Snapshot()
	m := NewMemory()
	r := newRecorder()
	s := subscribe(t, m, "x", r.handle)
	ps := psubscribe(t, m, "*", r.handle)
	publish(t, m, "x", "1")
	testleak.NoNew(t, before, "github.com/shieldrt/shieldglobal/")
	r.expect(t, "x", "", "1")
	r.expect(t, "x", "*", "1")
	s.Unsubscribe()
	ps.Unsubscribe()
	m.Close()
	testleak.NoNew(t, before, "github.com/shieldrt/shieldglobal/")
}

// withGuard runs f and fails the test if it hangs.
func withGuard(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("hung")
		return nil
	}
}

// waitWaiters waits until n Subscribes wait for a confirmation.
func waitWaiters(t *testing.T, b *Redis, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		got := len(b.waiters)
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting Subscribes, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// loopRunning reports whether any Redis bus delivery goroutine exists.
func loopRunning() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			st := string(buf[:n])
			return strings.Contains(st, "pubsub.(*Redis).run(") || strings.Contains(st, "pubsub.(*Redis).dispatchLoop(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

func waitNoLoop(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for loopRunning() {
		if time.Now().After(deadline) {
			t.Fatal("delivery goroutine still running")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGoroutines polls until the goroutine count is back to baseline.
func waitGoroutines(t *testing.T, baseline int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		n := runtime.NumGoroutine()
		if n <= baseline {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, baseline %d:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
