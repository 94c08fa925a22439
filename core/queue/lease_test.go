package queue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/clock"
	"github.com/shieldrt/shieldglobal/internal/testclock"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// testLoop is a Loop: one goroutine running posted functions in order.
// Redis ops are sent on it at once (a batch of one).
type testLoop struct {
	ctx   context.Context
	posts chan func()
}

func newTestLoop(t *testing.T) *testLoop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &testLoop{ctx: ctx, posts: make(chan func(), 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case f := <-l.posts:
				f()
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

func (l *testLoop) Post(fn func()) {
	select {
	case l.posts <- fn:
	case <-l.ctx.Done():
	}
}

func (l *testLoop) Send(p store.Pending, done func()) {
	var b store.Batch
	b.Add(p)
	b.Exec(l.ctx)
	done()
}

func (l *testLoop) Go(fn func())             { go fn() }
func (l *testLoop) Context() context.Context { return l.ctx }

// do runs fn on the loop and waits for it (and so for everything posted
// before it).
func (l *testLoop) do(t *testing.T, fn func()) {
	t.Helper()
	ch := make(chan struct{})
	l.Post(func() { fn(); close(ch) })
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not run a function within 10s")
	}
}

// pause wedges the loop until the returned function is called.
func (l *testLoop) pause() (resume func()) {
	started, gate := make(chan struct{}), make(chan struct{})
	l.Post(func() { close(started); <-gate })
	<-started
	return func() { close(gate) }
}

// leaseEnv is a backend and the clock of the Leases under test.
type leaseEnv struct {
	b Backend
	// other is a second consumer (another process on Redis; the same
	// backend on memory, whose pops reclaim just the same).
	other Backend
	clk   Clock
	// wait lets d pass: the fake clock moves (firing timers), or real time.
	wait   func(d time.Duration)
	memory bool
}

// leaseVT is the visibility timeout of the lease tests: long enough that a
// loaded machine still extends in time on Redis (real time).
const leaseVT = 3 * time.Second

func forEachLeaseBackend(t *testing.T, f func(t *testing.T, e leaseEnv)) {
	t.Run("memory", func(t *testing.T) {
		clk := testclock.New()
		b := NewMemory(MemoryOptions{Clock: clk})
		t.Cleanup(func() { b.Close() })
		f(t, leaseEnv{b: b, other: b, clk: clk, wait: clk.Advance, memory: true})
	})
	for _, name := range sortedNames(testredis.Backends(t)) {
		c := testredis.Backends(t)[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			re := newRedisEnv(t, c)
			f(t, leaseEnv{b: re.b, other: re.second(t), clk: clock.Real, wait: time.Sleep})
		})
	}
}

func leaseOptions() Options {
	o := testOptions()
	o.VisibilityTimeout = leaseVT
	return o
}

// syncDetach runs releases at once and records their errors.
type syncDetach struct {
	mu   sync.Mutex
	errs []error
}

func (d *syncDetach) run(_ string, run func(ctx context.Context) error) {
	err := run(context.Background())
	d.mu.Lock()
	d.errs = append(d.errs, err)
	d.mu.Unlock()
}

func (d *syncDetach) sent(t *testing.T) []error {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]error(nil), d.errs...)
}

func TestLeases(t *testing.T) {
	forEachLeaseBackend(t, func(t *testing.T, e leaseEnv) {
		newLeases := func(t *testing.T) (*testLoop, *Leases, *syncDetach) {
			lp := newTestLoop(t)
			det := &syncDetach{}
			return lp, NewLeases(lp, LeaseOptions{Clock: e.clk, Detach: det.run}), det
		}
		hold := func(t *testing.T, lp *testLoop, s *Leases, d *Delivery, owner any) *Lease {
			t.Helper()
			var l *Lease
			var err error
			lp.do(t, func() { l, err = s.Hold(d, owner) })
			if err != nil {
				t.Fatal(err)
			}
			return l
		}

		t.Run("extended while held", func(t *testing.T) {
			q := mustReliable(t, env{b: e.b}, "lease_extend", leaseOptions())
			other, err := e.other.Reliable("lease_extend", leaseOptions())
			if err != nil {
				t.Fatal(err)
			}
			id := do(t, q.Push([]byte("job")))
			lp, s, _ := newLeases(t)
			l := hold(t, lp, s, do(t, q.Pop()), "task-1")
			// Twice the visibility timeout, in steps of the extension
			// interval: without the extensions the other consumer would
			// reclaim the message.
			for range 6 {
				e.wait(leaseVT / 3)
				lp.do(t, func() {})
			}
			wantErr(t, other.Pop(), ErrEmpty)
			var lost, expired bool
			lp.do(t, func() { lost, expired = l.Lost(), l.Expired() })
			if lost || expired {
				t.Fatalf("lost %v, expired %v while extended", lost, expired)
			}
			if l.Delivery().ID != id {
				t.Fatalf("lease of %s, want %s", l.Delivery().ID, id)
			}
			do(t, l.Ack())
			if n := do(t, q.Length()); n != 0 {
				t.Fatalf("length %d after the lease's ack", n)
			}
			lp.do(t, func() {
				if n := s.Active(); n != 0 {
					t.Errorf("%d leases active after the ack", n)
				}
			})
		})

		t.Run("lost to another consumer while the loop is wedged", func(t *testing.T) {
			q := mustReliable(t, env{b: e.b}, "lease_lost", leaseOptions())
			other, err := e.other.Reliable("lease_lost", leaseOptions())
			if err != nil {
				t.Fatal(err)
			}
			do(t, q.Push([]byte("job")))
			lp, s, _ := newLeases(t)
			l := hold(t, lp, s, do(t, q.Pop()), "task-1")
			resume := lp.pause() // wedged: the ticks wait behind it
			e.wait(leaseVT + leaseVT/6)
			if !l.Expired() || l.Lost() { // (the loop is parked: reading is safe)
				t.Fatalf("expired %v (want true), lost %v (want false) past the visibility timeout", l.Expired(), l.Lost())
			}
			var d2 *Delivery
			deadline := time.Now().Add(5 * time.Second)
			for d2 == nil {
				d, err := other.Pop().Do(context.Background())
				switch {
				case err == nil:
					d2 = d
				case errors.Is(err, ErrEmpty) && time.Now().Before(deadline) && !e.memory:
					time.Sleep(50 * time.Millisecond) // the group's visibility scan is gated
				default:
					t.Fatalf("the other consumer's pop: %v", err)
				}
			}
			if d2.Deliveries != 2 {
				t.Fatalf("reclaimed with %d deliveries, want 2", d2.Deliveries)
			}
			resume()
			if !e.memory {
				e.wait(leaseVT / 3) // a tick is due by now on the real clock too
			}
			deadline = time.Now().Add(5 * time.Second)
			for {
				var lost bool
				lp.do(t, func() { lost = l.Lost() })
				if lost {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the lease is not lost 5s after another consumer took its message")
				}
				if e.memory {
					e.wait(leaseVT / 3)
				} else {
					time.Sleep(50 * time.Millisecond)
				}
			}
			lp.do(t, func() {
				if n := s.Active(); n != 1 {
					t.Errorf("%d leases active, want the lost one until its owner ends", n)
				}
				s.AbandonOwner("task-1", "t1")
				if n := s.Active(); n != 0 {
					t.Errorf("%d leases active after the owner ended", n)
				}
			})
			do(t, d2.Ack())
		})

		t.Run("expired, then renewed when nobody took it", func(t *testing.T) {
			q := mustReliable(t, env{b: e.b}, "lease_expired", leaseOptions())
			do(t, q.Push([]byte("job")))
			lp, s, _ := newLeases(t)
			l := hold(t, lp, s, do(t, q.Pop()), "task-1")
			resume := lp.pause()
			e.wait(leaseVT + leaseVT/6)
			if !l.Expired() {
				t.Fatal("not expired past the visibility timeout without an extension")
			}
			resume()
			deadline := time.Now().Add(5 * time.Second)
			for {
				var expired, lost bool
				lp.do(t, func() { expired, lost = l.Expired(), l.Lost() })
				if lost {
					t.Fatal("lost, though no other consumer popped")
				}
				if !expired {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("still expired 5s after the loop resumed")
				}
				if e.memory {
					e.wait(leaseVT / 3)
				} else {
					time.Sleep(50 * time.Millisecond)
				}
			}
			do(t, l.Ack())
		})

		t.Run("an ended owner's leases are given back first and uncounted", func(t *testing.T) {
			q := mustReliable(t, env{b: e.b}, "lease_abandon", leaseOptions())
			idA := do(t, q.Push([]byte("a")))
			do(t, q.Push([]byte("b")))
			lp, s, det := newLeases(t)
			la := hold(t, lp, s, do(t, q.Pop()), "task-1")
			lb := hold(t, lp, s, do(t, q.Pop()), "task-2")
			do(t, q.Push([]byte("c")))
			lp.do(t, func() { s.AbandonOwner("task-1", "t1") })
			if errs := det.sent(t); len(errs) != 1 || errs[0] != nil {
				t.Fatalf("releases sent: %v", errs)
			}
			if !la.Settled() || lb.Settled() {
				t.Fatalf("settled: a %v (want true), b %v (want false)", la.Settled(), lb.Settled())
			}
			d := do(t, q.Pop())
			if d.ID != idA || string(d.Body) != "a" || d.Deliveries != 1 {
				t.Fatalf("after the release popped %s %q deliveries %d, want %s \"a\" 1 (before the newer c, uncounted)",
					d.ID, d.Body, d.Deliveries, idA)
			}
			lp.do(t, func() {
				if n := s.Active(); n != 1 {
					t.Errorf("%d leases active, want task-2's", n)
				}
			})
			do(t, d.Ack())
			do(t, lb.Ack())
		})

		t.Run("close releases the leases without owner", func(t *testing.T) {
			q := mustReliable(t, env{b: e.b}, "lease_close", leaseOptions())
			do(t, q.Push([]byte("main")))
			do(t, q.Push([]byte("task")))
			lp, s, det := newLeases(t)
			lm := hold(t, lp, s, do(t, q.Pop()), nil)
			lt := hold(t, lp, s, do(t, q.Pop()), "task-1")
			lp.do(t, func() { s.Close() })
			if errs := det.sent(t); len(errs) != 1 || errs[0] != nil {
				t.Fatalf("releases sent: %v", errs)
			}
			if !lm.Settled() || lt.Settled() {
				t.Fatalf("settled: main %v (want true), task %v (want false)", lm.Settled(), lt.Settled())
			}
			d := do(t, q.Pop())
			if string(d.Body) != "main" {
				t.Fatalf("popped %q after close, want the released \"main\"", d.Body)
			}
			// After Close a pop outside any task cannot be held.
			var err error
			lp.do(t, func() { _, err = s.Hold(d, nil) })
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("hold after close: %v, want ErrClosed", err)
			}
			if errs := det.sent(t); len(errs) != 2 || errs[1] != nil {
				t.Fatalf("releases sent: %v (the refused hold releases its delivery)", errs)
			}
			do(t, do(t, q.Pop()).Ack())
			do(t, lt.Ack())
		})

		t.Run("bad input", func(t *testing.T) {
			q := mustReliable(t, env{b: e.b}, "lease_bad", leaseOptions())
			p, err := e.b.Plain("lease_bad_plain", leaseOptions())
			if err != nil {
				t.Fatal(err)
			}
			do(t, q.Push([]byte("x")))
			lp, s, _ := newLeases(t)
			d := do(t, q.Pop())
			do(t, d.Ack())
			lp.do(t, func() {
				if _, err := s.Hold(nil, "t"); !errors.Is(err, ErrInvalid) {
					t.Errorf("hold(nil): %v", err)
				}
				if _, err := s.Hold(&Delivery{up: p}, "t"); !errors.Is(err, ErrInvalid) {
					t.Errorf("hold(a plain delivery): %v", err)
				}
				if _, err := s.Hold(d, "t"); !errors.Is(err, ErrSettled) {
					t.Errorf("hold(an acked delivery): %v", err)
				}
				if n := s.Active(); n != 0 {
					t.Errorf("%d leases active", n)
				}
			})
		})
	})
}

// The default Detach sends the release on a goroutine of its own.
func TestLeasesDefaultDetachReleases(t *testing.T) {
	clk := testclock.New()
	b := NewMemory(MemoryOptions{Clock: clk})
	t.Cleanup(func() { b.Close() })
	q, err := b.Reliable("detach", testOptions())
	if err != nil {
		t.Fatal(err)
	}
	do(t, q.Push([]byte("x")))
	lp := newTestLoop(t)
	s := NewLeases(lp, LeaseOptions{Clock: clk})
	d := do(t, q.Pop())
	lp.do(t, func() {
		if _, err := s.Hold(d, 1); err != nil {
			t.Error(err)
		}
		s.AbandonOwner(1, "task")
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err := q.Pop().Do(context.Background())
		if err == nil {
			if string(d.Body) != "x" || d.Deliveries != 1 {
				t.Fatalf("popped %q deliveries %d", d.Body, d.Deliveries)
			}
			return
		}
		if !errors.Is(err, ErrEmpty) || time.Now().After(deadline) {
			t.Fatalf("pop after the release: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
