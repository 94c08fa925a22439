package pubsub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// waitFor bounds every wait for a delivery; it is a failure bound, not a
// speed assertion.
const waitFor = 5 * time.Second

// TestConformance runs the same behavioural suite against every backend.
func TestConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) { runConformance(t, memoryBuses()) })
	t.Run("redis", func(t *testing.T) { runConformance(t, redisBuses(testredis.Standalone(t), "")) })
	t.Run("redis-resp2", func(t *testing.T) {
		// PING answers and push messages have other shapes in RESP2.
		opt, err := redis.ParseURL(testredis.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		opt.Protocol = 2
		c := redis.NewClient(opt)
		t.Cleanup(func() { c.Close() })
		runConformance(t, redisBuses(c, ""))
	})
	// On the cluster every test prefix carries the same hash tag, so all
	// buses pin to one master. That keeps "publish a sentinel afterwards"
	// sound across prefixes (messages between two nodes travel
	// asynchronously over the cluster bus); TestRedisClusterCrossNode
	// covers delivery across nodes.
	t.Run("cluster", func(t *testing.T) { runConformance(t, redisBuses(testredis.Cluster(t), "{pubsub-test}:")) })
	t.Run("sentinel", func(t *testing.T) { runConformance(t, redisBuses(testredis.Sentinel(t), "")) })
}

// memoryBuses returns a factory: the buses of one test are the same
// Memory (one process has one memory bus; it stands in for every
// "process"), different tests get different ones.
func memoryBuses() func(t *testing.T) Bus {
	var mu sync.Mutex
	buses := map[*testing.T]*Memory{}
	return func(t *testing.T) Bus {
		mu.Lock()
		defer mu.Unlock()
		if b, ok := buses[t]; ok {
			return b
		}
		b := NewMemory()
		buses[t] = b
		t.Cleanup(func() { b.Close() })
		return b
	}
}

// redisBuses returns a factory of Redis buses on c: the buses of one test
// share a unique prefix (like processes of one deployment), different tests
// get different prefixes.
func redisBuses(c redis.UniversalClient, tag string) func(t *testing.T) Bus {
	var mu sync.Mutex
	prefixes := map[*testing.T]string{}
	return func(t *testing.T) Bus {
		mu.Lock()
		p, ok := prefixes[t]
		if !ok {
			p = testredis.Prefix(t) + tag
			prefixes[t] = p
		}
		mu.Unlock()
		b := NewRedis(c, p, Events{})
		t.Cleanup(func() { b.Close() })
		return b
	}
}

// recorder is a non-blocking handler that queues what it receives.
type recorder struct {
	ch      chan Message
	dropped atomic.Int64
}

func newRecorder() *recorder { return &recorder{ch: make(chan Message, 4096)} }

func (r *recorder) handle(m Message) {
	select {
	case r.ch <- m:
	default:
		r.dropped.Add(1)
	}
}

// next returns the next message or fails the test after waitFor.
func (r *recorder) next(t *testing.T) Message {
	t.Helper()
	select {
	case m := <-r.ch:
		return m
	case <-time.After(waitFor):
		t.Fatalf("no message within %v", waitFor)
		return Message{}
	}
}

// expect receives the next message and checks its channel, pattern and
// payload.
func (r *recorder) expect(t *testing.T, channel, pattern, payload string) {
	t.Helper()
	m := r.next(t)
	if m.Channel != channel || m.Pattern != pattern || string(m.Payload) != payload {
		t.Fatalf("got {channel %q pattern %q payload %q}, want {%q %q %q}",
			m.Channel, m.Pattern, m.Payload, channel, pattern, payload)
	}
}

// empty checks that nothing is queued. Callers first prove, with a sentinel
// that travelled the same path, that anything sent earlier has arrived.
func (r *recorder) empty(t *testing.T) {
	t.Helper()
	select {
	case m := <-r.ch:
		t.Fatalf("unexpected message {channel %q pattern %q payload %q}", m.Channel, m.Pattern, m.Payload)
	default:
	}
	if n := r.dropped.Load(); n > 0 {
		t.Fatalf("%d messages dropped", n)
	}
}

func subscribe(t *testing.T, b Bus, channel string, h Handler) Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	s, err := b.Subscribe(ctx, channel, h)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func psubscribe(t *testing.T, b Bus, pattern string, h Handler) Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	s, err := b.PSubscribe(ctx, pattern, h)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func publish(t *testing.T, b Bus, channel, payload string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	n, err := b.Publish(ctx, channel, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// runConformance is the behaviour every Bus must have. Buses that newBus
// returns for the same *testing.T share a namespace; different tests'
// buses are isolated.
func runConformance(t *testing.T, newBus func(t *testing.T) Bus) {
	t.Run("DeliversExactlyOnceWithExactPayload", func(t *testing.T) {
		b := newBus(t)
		r := newRecorder()
		subscribe(t, b, "chat", r.handle)
		var payload []byte
		for i := range 256 {
			payload = append(payload, byte(i))
		}
		payload = append(payload, "\r\n$-1\r\n*0\r\n"...)
		n, err := b.Publish(context.Background(), "chat", payload)
		if err != nil || n != 1 {
			t.Fatalf("Publish = %d, %v; want 1, nil", n, err)
		}
		m := r.next(t)
		if m.Channel != "chat" || m.Pattern != "" || !bytes.Equal(m.Payload, payload) {
			t.Fatalf("got %q %q %q", m.Channel, m.Pattern, m.Payload)
		}
		publish(t, b, "chat", "")
		r.expect(t, "chat", "", "")
		publish(t, b, "chat", "sentinel")
		r.expect(t, "chat", "", "sentinel") // nothing (no duplicate) before it
		r.empty(t)
	})

	t.Run("PublisherMayReusePayload", func(t *testing.T) {
		b := newBus(t)
		r := newRecorder()
		subscribe(t, b, "c", r.handle)
		buf := []byte("first")
		publish1, err := b.Publish(context.Background(), "c", buf)
		if err != nil || publish1 != 1 {
			t.Fatal(publish1, err)
		}
		copy(buf, "XXXXX")
		r.expect(t, "c", "", "first")
	})

	t.Run("Receivers", func(t *testing.T) {
		b := newBus(t)
		if n := publish(t, b, "nobody", "x"); n != 0 {
			t.Fatalf("receivers with no subscriber = %d, want 0", n)
		}
		r := newRecorder()
		subscribe(t, b, "c", r.handle)
		if n := publish(t, b, "c", "x"); n != 1 {
			t.Fatalf("receivers with one subscriber = %d, want 1", n)
		}
		subscribe(t, b, "c", r.handle) // a second handler is the same receiver
		if n := publish(t, b, "c", "x"); n != 1 {
			t.Fatalf("receivers with two handlers = %d, want 1", n)
		}
		psubscribe(t, b, "c*", r.handle)
		psubscribe(t, b, "c*", r.handle) // the same pattern twice counts once
		psubscribe(t, b, "?", r.handle)
		psubscribe(t, b, "x*", r.handle) // does not match
		if n := publish(t, b, "c", "x"); n != 3 {
			t.Fatalf("receivers with a subscriber and two matching patterns = %d, want 3", n)
		}
		if n := publish(t, b, "cc", "x"); n != 1 {
			t.Fatalf("receivers of a channel only c* matches = %d, want 1", n)
		}
	})

	t.Run("PatternSubscribe", func(t *testing.T) {
		b := newBus(t)
		r := newRecorder()
		psubscribe(t, b, "player.*", r.handle)
		if n := publish(t, b, "other.1", "no"); n != 0 {
			t.Fatalf("receivers of other.1 = %d, want 0", n)
		}
		if n := publish(t, b, "player.1", "yes"); n != 1 {
			t.Fatalf("receivers of player.1 = %d, want 1", n)
		}
		r.expect(t, "player.1", "player.*", "yes") // other.1, sent before, did not arrive
		publish(t, b, "player.sentinel", "end")
		r.expect(t, "player.sentinel", "player.*", "end")
		r.empty(t)
	})

	t.Run("GlobSemanticsMatchRedis", func(t *testing.T) {
		// receivers is the server's own count of matching patterns, so
		// against Redis this checks the server's matcher; against memory,
		// globMatch. Both must agree with matchChannel.
		b := newBus(t)
		patterns := []string{
			"h?llo", "h*llo", "h[ae]llo", "h[^e]llo", "h[a-b]llo", "h[b-a]llo",
			`h\?llo`, `h\*`, `a\`, "[abc", "[^", "[", "[]a]", "[a-]", `[\]]`,
			"*", "**", "?", "", "a*b*c", "[a-\xff]", "[\x80-\xff]", "a\x00*",
		}
		channels := []string{
			"hello", "hallo", "hxllo", "hllo", "heeeello", "hillo", "hbllo",
			"h?llo", "h*", "h*x", `a\`, "a", "ab", "c", "x", "", "]", "^", "-",
			"abc", "a-b-c", "\xff", "\x90", "b", "a\x00", "a\x00b",
		}
		r := newRecorder()
		for _, p := range patterns {
			psubscribe(t, b, p, r.handle)
		}
		for _, ch := range channels {
			var want int64
			for _, p := range patterns {
				if matchChannel(p, ch) {
					want++
				}
			}
			if got := publish(t, b, ch, "x"); got != want {
				t.Errorf("publish %q: %d patterns matched, matchChannel says %d", ch, got, want)
			}
		}
	})

	t.Run("TwoHandlersOneChannel", func(t *testing.T) {
		b := newBus(t)
		r1, r2 := newRecorder(), newRecorder()
		subscribe(t, b, "c", r1.handle)
		subscribe(t, b, "c", r2.handle)
		publish(t, b, "c", "m")
		r1.expect(t, "c", "", "m")
		r2.expect(t, "c", "", "m")
	})

	t.Run("UnsubscribeStopsDeliveryAndIsIdempotent", func(t *testing.T) {
		b := newBus(t)
		gone, stays, probe := newRecorder(), newRecorder(), newRecorder()
		s := subscribe(t, b, "c", gone.handle)
		ps := psubscribe(t, b, "c*", gone.handle)
		s2 := subscribe(t, b, "c", stays.handle)
		subscribe(t, b, "probe", probe.handle)
		s.Unsubscribe()
		s.Unsubscribe()
		ps.Unsubscribe()
		ps.Unsubscribe()
		publish(t, b, "c", "1")
		stays.expect(t, "c", "", "1") // the other handler keeps receiving
		publish(t, b, "probe", "p")
		probe.expect(t, "probe", "", "p") // everything sent before was dispatched
		gone.empty(t)

		s2.Unsubscribe()
		// The server may process our UNSUBSCRIBE after a PUBLISH issued
		// on another connection; poll until it counts nobody.
		deadline := time.Now().Add(waitFor)
		for publish(t, b, "c", "2") != 0 {
			if time.Now().After(deadline) {
				t.Fatal("receivers never dropped to 0 after the last Unsubscribe")
			}
			time.Sleep(10 * time.Millisecond)
		}
		publish(t, b, "probe", "p2")
		probe.expect(t, "probe", "", "p2")
		gone.empty(t)
		stays.empty(t)
	})

	t.Run("ResubscribeAfterLastUnsubscribe", func(t *testing.T) {
		b := newBus(t)
		for i := range 5 {
			r := newRecorder()
			s := subscribe(t, b, "c", r.handle)
			if n := publish(t, b, "c", strconv.Itoa(i)); n != 1 {
				t.Fatalf("round %d: receivers = %d, want 1", i, n)
			}
			r.expect(t, "c", "", strconv.Itoa(i))
			s.Unsubscribe()
		}
	})

	t.Run("OrderFromOnePublisher", func(t *testing.T) {
		b := newBus(t)
		r := newRecorder()
		subscribe(t, b, "seq", r.handle)
		const n = 300
		for i := range n {
			publish(t, b, "seq", strconv.Itoa(i))
		}
		for i := range n {
			r.expect(t, "seq", "", strconv.Itoa(i))
		}
	})

	t.Run("TwoBusesSamePrefix", func(t *testing.T) {
		b1, b2 := newBus(t), newBus(t)
		r1, r2 := newRecorder(), newRecorder()
		subscribe(t, b1, "x", r1.handle)
		subscribe(t, b2, "x", r2.handle)
		if n := publish(t, b2, "x", "from2"); n < 1 {
			t.Fatalf("receivers = %d", n)
		}
		r1.expect(t, "x", "", "from2")
		r2.expect(t, "x", "", "from2")
		publish(t, b1, "x", "from1")
		r1.expect(t, "x", "", "from1")
		r2.expect(t, "x", "", "from1")
	})

	t.Run("PrefixIsolation", func(t *testing.T) {
		a := newBus(t)
		ra := newRecorder()
		subscribe(t, a, "x", ra.handle)
		psubscribe(t, a, "*", ra.handle)
		t.Run("other namespace", func(t *testing.T) {
			b := newBus(t) // another test: another prefix
			rb := newRecorder()
			subscribe(t, b, "x", rb.handle)
			psubscribe(t, b, "*", rb.handle)

			if n := publish(t, a, "x", "a"); n != 2 {
				t.Fatalf("receivers = %d, want 2 (a's channel and pattern only)", n)
			}
			ra.expect(t, "x", "", "a")
			ra.expect(t, "x", "*", "a")
			publish(t, b, "x", "b")
			rb.expect(t, "x", "", "b") // a's message, sent before, did not arrive
			rb.expect(t, "x", "*", "b")
			publish(t, a, "x", "a2")
			ra.expect(t, "x", "", "a2") // b's message did not arrive either
			ra.expect(t, "x", "*", "a2")
			ra.empty(t)
			rb.empty(t)
		})
	})

	t.Run("HandlerUnsubscribesItself", func(t *testing.T) {
		b := newBus(t)
		var self atomic.Pointer[Subscription]
		var calls atomic.Int32
		r, probe := newRecorder(), newRecorder()
		s := subscribe(t, b, "once", func(m Message) {
			calls.Add(1)
			(*self.Load()).Unsubscribe()
			(*self.Load()).Unsubscribe()
			r.handle(m)
		})
		self.Store(&s)
		subscribe(t, b, "probe", probe.handle)
		publish(t, b, "once", "1")
		r.expect(t, "once", "", "1")
		publish(t, b, "once", "2")
		publish(t, b, "probe", "p")
		probe.expect(t, "probe", "", "p")
		r.empty(t)
		if c := calls.Load(); c != 1 {
			t.Fatalf("handler called %d times, want 1", c)
		}
		s.Unsubscribe() // still idempotent from outside
	})

	t.Run("UnsubscribeStopsNewCallsWithoutWaiting", func(t *testing.T) {
		// Unsubscribe does not wait for a call in progress (so it may be
		// called from anywhere, a handler included), and no call starts
		// after it returns.
		b := newBus(t)
		entered, release := make(chan struct{}), make(chan struct{})
		var calls atomic.Int32
		s := subscribe(t, b, "slow", func(Message) {
			if calls.Add(1) == 1 {
				close(entered)
				<-release // holds the first call open
			}
		})
		go b.Publish(context.Background(), "slow", []byte("1"))
		<-entered
		returned := make(chan struct{})
		go func() { s.Unsubscribe(); close(returned) }()
		select {
		case <-returned:
		case <-time.After(waitFor):
			t.Fatal("Unsubscribe waited for the running handler")
		}
		close(release)
		if _, err := b.Publish(context.Background(), "slow", []byte("2")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if n := calls.Load(); n != 1 {
			t.Fatalf("the handler was called %d times; want only the call in progress before Unsubscribe", n)
		}
	})

	t.Run("ConcurrentSubscribeUnsubscribe", func(t *testing.T) {
		// The reference count of a shared channel goes up and down under
		// concurrency; every Subscribe must still be active on return.
		b := newBus(t)
		const workers, rounds = 8, 15
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- func() error {
					ctx := context.Background()
					for i := range rounds {
						want := fmt.Sprintf("%d-%d", w, i)
						got := make(chan struct{}, 1)
						h := func(m Message) {
							if string(m.Payload) == want {
								got <- struct{}{}
							}
						}
						var s Subscription
						var err error
						if i%2 == 0 {
							s, err = b.Subscribe(ctx, "shared", h)
						} else {
							s, err = b.PSubscribe(ctx, "sha*", h)
						}
						if err != nil {
							return err
						}
						if _, err := b.Publish(ctx, "shared", []byte(want)); err != nil {
							return err
						}
						select {
						case <-got:
						case <-time.After(waitFor):
							return fmt.Errorf("worker %d round %d: not delivered", w, i)
						}
						s.Unsubscribe()
					}
					return nil
				}()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("CloseWhileBusy", func(t *testing.T) {
		b := newBus(t)
		subscribe(t, b, "busy", func(Message) {})
		stop, busy := make(chan struct{}), make(chan struct{})
		var ops atomic.Int32
		var once sync.Once
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if ops.Add(1) == 40 {
						once.Do(func() { close(busy) })
					}
					s, err := b.Subscribe(ctx, "busy", func(Message) {})
					if err == nil {
						s.Unsubscribe()
					} else if !errors.Is(err, ErrClosed) {
						t.Errorf("Subscribe: %v", err)
						return
					}
					if _, err := b.Publish(ctx, "busy", []byte("x")); err != nil && !errors.Is(err, ErrClosed) {
						t.Errorf("Publish: %v", err)
						return
					}
				}
			}()
		}
		select { // Close in the middle of the traffic
		case <-busy:
		case <-time.After(waitFor):
			t.Error("the workers made no progress")
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
	})

	t.Run("ErrorsAndClose", func(t *testing.T) {
		b := newBus(t)
		ctx := context.Background()
		if _, err := b.Subscribe(ctx, "c", nil); !errors.Is(err, ErrNilHandler) {
			t.Fatalf("Subscribe(nil handler) = %v, want ErrNilHandler", err)
		}
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := b.Subscribe(canceled, "c", newRecorder().handle); !errors.Is(err, context.Canceled) {
			t.Fatalf("Subscribe(canceled ctx) = %v, want context.Canceled", err)
		}
		r := newRecorder()
		s := subscribe(t, b, "c", r.handle)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		s.Unsubscribe() // harmless after Close
		if _, err := b.Subscribe(ctx, "c", r.handle); !errors.Is(err, ErrClosed) {
			t.Fatalf("Subscribe after Close = %v, want ErrClosed", err)
		}
		if _, err := b.PSubscribe(ctx, "c*", r.handle); !errors.Is(err, ErrClosed) {
			t.Fatalf("PSubscribe after Close = %v, want ErrClosed", err)
		}
		if _, err := b.Publish(ctx, "c", nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("Publish after Close = %v, want ErrClosed", err)
		}
		if _, err := b.Publish(ctx, "c", nil); err == nil || !strings.HasPrefix(err.Error(), `pubsub: publish "c": `) {
			t.Fatalf("Publish error %q does not say what failed", err)
		}
		r.empty(t)
	})
}
