package lock

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// runConformance checks that a Backend implements the Backend contract.
// Every backend must pass it unchanged, which is what makes them
// interchangeable.
//
// newBackend returns a backend with its own empty key space. advance lets
// time pass for it: the memory backend moves its fake clock, Redis sleeps.
// Expiry is only ever awaited (poll for up to 2s of real time), never timed;
// wake-ups are awaited for up to 5s.
func runConformance(t *testing.T, newBackend func(t *testing.T) Backend, advance func(d time.Duration)) {
	const hour = time.Hour
	x := Options{TTL: hour}
	re := Options{TTL: hour, Reentrant: true}

	mustAcquire := func(t *testing.T, b Backend, name, owner string, mode Mode, o Options) Grant {
		t.Helper()
		g, ok, retryIn, err := try(t.Context(), b, name, owner, mode, o)
		if err != nil || !ok {
			t.Fatalf("TryAcquire(%q, %q, %v) = ok %v, retryIn %v, err %v; want granted", name, owner, mode, ok, retryIn, err)
		}
		if g.Token <= 0 || g.Count <= 0 || g.AcquiredAt.IsZero() || g.TTL <= 0 {
			t.Fatalf("TryAcquire(%q, %q, %v) granted %+v: want positive token, count, ttl and a time", name, owner, mode, g)
		}
		return g
	}
	mustRefuse := func(t *testing.T, b Backend, name, owner string, mode Mode, o Options) time.Duration {
		t.Helper()
		g, ok, retryIn, err := try(t.Context(), b, name, owner, mode, o)
		if err != nil || ok {
			t.Fatalf("TryAcquire(%q, %q, %v) = %+v, ok %v, err %v; want refused", name, owner, mode, g, ok, err)
		}
		if retryIn <= 0 {
			t.Fatalf("TryAcquire(%q, %q, %v) refused with retryIn %v; want > 0", name, owner, mode, retryIn)
		}
		return retryIn
	}
	mustRelease := func(t *testing.T, b Backend, name, owner string, mode Mode, want int) {
		t.Helper()
		n, err := rel(t.Context(), b, name, owner, mode)
		if err != nil || n != want {
			t.Fatalf("Release(%q, %q, %v) = %d, %v; want %d", name, owner, mode, n, err, want)
		}
	}
	wantNotHeld := func(t *testing.T, err error, what string) {
		t.Helper()
		if !errors.Is(err, ErrNotHeld) {
			t.Fatalf("%s: err = %v; want ErrNotHeld", what, err)
		}
	}
	mustInfo := func(t *testing.T, b Backend, name string) (Info, bool) {
		t.Helper()
		info, found, err := inf(t.Context(), b, name)
		if err != nil {
			t.Fatalf("Info(%q): %v", name, err)
		}
		return info, found
	}
	wantOwners := func(t *testing.T, b Backend, name string, mode Mode, want ...Holder) Info {
		t.Helper()
		info, found := mustInfo(t, b, name)
		if !found || info.Mode != mode || !slices.Equal(info.Owners, want) {
			t.Fatalf("Info(%q) = %+v, found %v; want %v holders %v", name, info, found, mode, want)
		}
		return info
	}
	wantFree := func(t *testing.T, b Backend, name string) {
		t.Helper()
		if info, found := mustInfo(t, b, name); found {
			t.Fatalf("Info(%q) = %+v; want not held", name, info)
		}
	}
	// poll calls f, letting time pass between calls, until it returns
	// true; it fails after 2s of real time.
	poll := func(t *testing.T, what string, f func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for !f() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 2s", what)
			}
			advance(10 * time.Millisecond)
		}
	}
	// watch returns a channel that receives one value per wake-up.
	watch := func(t *testing.T, b Backend, name string) (<-chan struct{}, func()) {
		t.Helper()
		ch := make(chan struct{}, 100)
		cancel, err := watchB(t.Context(), b, name, func() { ch <- struct{}{} })
		if err != nil {
			t.Fatalf("Watch(%q): %v", name, err)
		}
		t.Cleanup(cancel)
		return ch, cancel
	}
	woken := func(t *testing.T, ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no wake-up within 5s", what)
		}
	}

	t.Run("acquire release", func(t *testing.T) {
		b := newBackend(t)
		wantFree(t, b, "boss")
		g := mustAcquire(t, b, "boss", "A", Exclusive, Options{TTL: 30 * time.Second})
		if g.Count != 1 || g.TTL != 30*time.Second {
			t.Fatalf("grant %+v; want count 1, ttl 30s", g)
		}
		info := wantOwners(t, b, "boss", Exclusive, Holder{Owner: "A", Count: 1})
		if info.Token != g.Token || !info.AcquiredAt.Equal(g.AcquiredAt) {
			t.Fatalf("Info %+v does not match grant %+v", info, g)
		}
		if info.TTL <= 15*time.Second || info.TTL > 30*time.Second {
			t.Fatalf("Info TTL %v; want in (15s, 30s]", info.TTL)
		}
		mustRelease(t, b, "boss", "A", Exclusive, 0)
		wantFree(t, b, "boss")
		mustAcquire(t, b, "boss", "B", Exclusive, x)
		// Another name is another lock.
		mustAcquire(t, b, "boss2", "A", Exclusive, x)
	})

	t.Run("second owner refused", func(t *testing.T) {
		b := newBackend(t)
		mustAcquire(t, b, "l", "A", Exclusive, Options{TTL: 30 * time.Second})
		retryIn := mustRefuse(t, b, "l", "B", Exclusive, x)
		if retryIn > 30*time.Second {
			t.Fatalf("retryIn %v exceeds the holder's 30s lease", retryIn)
		}
		mustRefuse(t, b, "l", "B", Exclusive, re)
		mustRefuse(t, b, "l", "B", Shared, x)
		wantOwners(t, b, "l", Exclusive, Holder{Owner: "A", Count: 1})
	})

	t.Run("reentrant", func(t *testing.T) {
		b := newBackend(t)
		g1 := mustAcquire(t, b, "l", "A", Exclusive, re)
		for want := 2; want <= 3; want++ {
			g := mustAcquire(t, b, "l", "A", Exclusive, re)
			if g.Count != want || g.Token != g1.Token || !g.AcquiredAt.Equal(g1.AcquiredAt) {
				t.Fatalf("re-entry %d: %+v; want count %d, token %d and acquired_at of the first grant", want, g, want, g1.Token)
			}
		}
		wantOwners(t, b, "l", Exclusive, Holder{Owner: "A", Count: 3})
		mustRefuse(t, b, "l", "B", Exclusive, re)
		mustRelease(t, b, "l", "A", Exclusive, 2)
		mustRelease(t, b, "l", "A", Exclusive, 1)
		mustRefuse(t, b, "l", "B", Exclusive, re)
		mustRelease(t, b, "l", "A", Exclusive, 0)
		wantFree(t, b, "l")
		_, err := rel(t.Context(), b, "l", "A", Exclusive)
		wantNotHeld(t, err, "release below zero")
		mustAcquire(t, b, "l", "B", Exclusive, re)
	})

	t.Run("non-reentrant same owner refused", func(t *testing.T) {
		b := newBackend(t)
		mustAcquire(t, b, "l", "A", Exclusive, x)
		mustRefuse(t, b, "l", "A", Exclusive, x)
		wantOwners(t, b, "l", Exclusive, Holder{Owner: "A", Count: 1})
		mustAcquire(t, b, "l2", "R", Shared, x)
		mustRefuse(t, b, "l2", "R", Shared, x)
		wantOwners(t, b, "l2", Shared, Holder{Owner: "R", Count: 1})
	})

	t.Run("release by non-holder", func(t *testing.T) {
		b := newBackend(t)
		_, err := rel(t.Context(), b, "l", "A", Exclusive)
		wantNotHeld(t, err, "release of a free lock")
		mustAcquire(t, b, "l", "A", Exclusive, re)
		_, err = rel(t.Context(), b, "l", "B", Exclusive)
		wantNotHeld(t, err, "release by another owner")
		_, err = rel(t.Context(), b, "l", "A", Shared)
		wantNotHeld(t, err, "release of a shared hold the owner does not have")
		wantOwners(t, b, "l", Exclusive, Holder{Owner: "A", Count: 1})
		mustRefuse(t, b, "l", "B", Exclusive, x)
	})

	t.Run("ttl expiry", func(t *testing.T) {
		b := newBackend(t)
		mustAcquire(t, b, "l", "A", Exclusive, Options{TTL: 50 * time.Millisecond})
		poll(t, "lock free after its 50ms lease", func() bool {
			_, ok, _, err := try(t.Context(), b, "l", "B", Exclusive, x)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		})
		wantOwners(t, b, "l", Exclusive, Holder{Owner: "B", Count: 1})
		_, err := rel(t.Context(), b, "l", "A", Exclusive)
		wantNotHeld(t, err, "release after the lease ended")
		wantNotHeld(t, ext(t.Context(), b, "l", "A", Exclusive, hour), "extend after the lease ended")
		wantOwners(t, b, "l", Exclusive, Holder{Owner: "B", Count: 1})
	})

	t.Run("extend", func(t *testing.T) {
		b := newBackend(t)
		mustAcquire(t, b, "l", "A", Exclusive, Options{TTL: 100 * time.Millisecond})
		if err := ext(t.Context(), b, "l", "A", Exclusive, hour); err != nil {
			t.Fatalf("Extend by the holder: %v", err)
		}
		wantNotHeld(t, ext(t.Context(), b, "l", "B", Exclusive, hour), "extend by a non-holder")
		wantNotHeld(t, ext(t.Context(), b, "l", "A", Shared, hour), "extend of a shared hold the owner does not have")
		advance(200 * time.Millisecond)
		info := wantOwners(t, b, "l", Exclusive, Holder{Owner: "A", Count: 1})
		if info.TTL <= hour/2 {
			t.Fatalf("Info TTL after Extend(1h) = %v", info.TTL)
		}
		mustRefuse(t, b, "l", "B", Exclusive, x)
		if err := ext(t.Context(), b, "l", "A", Exclusive, 0); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Extend with ttl 0: %v; want ErrInvalid", err)
		}
	})

	t.Run("fencing tokens", func(t *testing.T) {
		b := newBackend(t)
		var last int64
		next := func(g Grant, what string) {
			t.Helper()
			if g.Token <= last {
				t.Fatalf("%s: token %d not above the previous %d", what, g.Token, last)
			}
			last = g.Token
		}
		for i := range 3 {
			for _, owner := range []string{"A", "B"} {
				g := mustAcquire(t, b, "l", owner, Exclusive, re)
				next(g, fmt.Sprintf("round %d owner %s", i, owner))
				if again := mustAcquire(t, b, "l", owner, Exclusive, re); again.Token != g.Token {
					t.Fatalf("re-entry changed the token: %d -> %d", g.Token, again.Token)
				}
				mustRelease(t, b, "l", owner, Exclusive, 1)
				mustRelease(t, b, "l", owner, Exclusive, 0)
			}
		}
		// Shared holds draw from the same counter.
		r1 := mustAcquire(t, b, "l", "R1", Shared, re)
		next(r1, "reader 1")
		next(mustAcquire(t, b, "l", "R2", Shared, re), "reader 2")
		if again := mustAcquire(t, b, "l", "R1", Shared, re); again.Token != r1.Token || again.Count != 2 {
			t.Fatalf("shared re-entry %+v; want token %d count 2", again, r1.Token)
		}
		mustRelease(t, b, "l", "R1", Shared, 1)
		mustRelease(t, b, "l", "R1", Shared, 0)
		mustRelease(t, b, "l", "R2", Shared, 0)
		// The counter survives expiry.
		next(mustAcquire(t, b, "l", "C", Exclusive, Options{TTL: 20 * time.Millisecond}), "short lease")
		poll(t, "short lease ended", func() bool {
			g, ok, _, err := try(t.Context(), b, "l", "D", Exclusive, x)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				next(g, "after expiry")
			}
			return ok
		})
		// Names have their own counters that never go backwards.
		if g := mustAcquire(t, b, "other", "A", Exclusive, x); g.Token <= 0 {
			t.Fatalf("token %d", g.Token)
		}
	})

	t.Run("info", func(t *testing.T) {
		b := newBackend(t)
		wantFree(t, b, "l")
		g := mustAcquire(t, b, "l", "A", Exclusive, re)
		mustAcquire(t, b, "l", "A", Exclusive, re)
		info := wantOwners(t, b, "l", Exclusive, Holder{Owner: "A", Count: 2})
		if info.Token != g.Token || !info.AcquiredAt.Equal(g.AcquiredAt) || info.TTL <= hour/2 || info.TTL > hour || info.Waiting != 0 {
			t.Fatalf("Info %+v; grant %+v", info, g)
		}
		mustRelease(t, b, "l", "A", Exclusive, 1)
		mustRelease(t, b, "l", "A", Exclusive, 0)

		rb := mustAcquire(t, b, "l", "rb", Shared, Options{TTL: 10 * time.Minute})
		ra := mustAcquire(t, b, "l", "ra", Shared, Options{TTL: hour, Reentrant: true})
		mustAcquire(t, b, "l", "ra", Shared, Options{TTL: hour, Reentrant: true})
		info = wantOwners(t, b, "l", Shared, Holder{Owner: "ra", Count: 2}, Holder{Owner: "rb", Count: 1})
		if info.Token != ra.Token || !info.AcquiredAt.Equal(rb.AcquiredAt) || info.TTL <= hour/2 || info.TTL > hour {
			t.Fatalf("shared Info %+v; want the highest token %d, the oldest acquired_at %v, the longest ttl", info, ra.Token, rb.AcquiredAt)
		}
		// Waiting counts fair waiters.
		mustRefuse(t, b, "l", "W1", Exclusive, Options{TTL: hour, Fair: true, Waiting: true, WaiterTTL: hour})
		mustRefuse(t, b, "l", "W2", Exclusive, Options{TTL: hour, Fair: true, Waiting: true, WaiterTTL: hour})
		if info, _ := mustInfo(t, b, "l"); info.Waiting != 2 {
			t.Fatalf("Waiting = %d; want 2", info.Waiting)
		}
		if err := leave(t.Context(), b, "l", "W2"); err != nil {
			t.Fatal(err)
		}
		if err := leave(t.Context(), b, "l", "W2"); err != nil {
			t.Fatalf("LeaveQueue twice: %v", err)
		}
		if info, _ := mustInfo(t, b, "l"); info.Waiting != 1 {
			t.Fatalf("Waiting = %d; want 1", info.Waiting)
		}
	})

	t.Run("rwlock readers and writers", func(t *testing.T) {
		b := newBackend(t)
		var want []Holder
		for i := range 5 {
			o := fmt.Sprintf("r%d", i)
			mustAcquire(t, b, "rw", o, Shared, x)
			want = append(want, Holder{Owner: o, Count: 1})
		}
		wantOwners(t, b, "rw", Shared, want...)
		// Readers exclude the writer; the hint is the readers' lease.
		if retryIn := mustRefuse(t, b, "rw", "W", Exclusive, x); retryIn > hour {
			t.Fatalf("retryIn %v", retryIn)
		}
		for i := range 4 {
			mustRelease(t, b, "rw", fmt.Sprintf("r%d", i), Shared, 0)
			mustRefuse(t, b, "rw", "W", Exclusive, x)
		}
		mustRelease(t, b, "rw", "r4", Shared, 0)
		wantFree(t, b, "rw")
		mustAcquire(t, b, "rw", "W", Exclusive, x)
		// The writer excludes readers and other writers.
		mustRefuse(t, b, "rw", "r0", Shared, x)
		mustRefuse(t, b, "rw", "W2", Exclusive, x)
		mustRelease(t, b, "rw", "W", Exclusive, 0)
		mustAcquire(t, b, "rw", "r0", Shared, x)
	})

	t.Run("rwlock downgrade", func(t *testing.T) {
		b := newBackend(t)
		w := mustAcquire(t, b, "rw", "W", Exclusive, x)
		r := mustAcquire(t, b, "rw", "W", Shared, x)
		if r.Token <= w.Token {
			t.Fatalf("downgrade read hold token %d not above write token %d", r.Token, w.Token)
		}
		wantOwners(t, b, "rw", Exclusive, Holder{Owner: "W", Count: 1})
		mustRefuse(t, b, "rw", "R", Shared, x)
		// Re-entering the write hold while also reading is not an upgrade.
		mustAcquire(t, b, "rw", "W", Exclusive, re)
		mustRelease(t, b, "rw", "W", Exclusive, 1)
		mustRelease(t, b, "rw", "W", Exclusive, 0)
		// Now only reading: other readers join, writers wait.
		wantOwners(t, b, "rw", Shared, Holder{Owner: "W", Count: 1})
		mustAcquire(t, b, "rw", "R", Shared, x)
		mustRefuse(t, b, "rw", "X", Exclusive, x)
		wantOwners(t, b, "rw", Shared, Holder{Owner: "R", Count: 1}, Holder{Owner: "W", Count: 1})
	})

	t.Run("rwlock upgrade refused", func(t *testing.T) {
		b := newBackend(t)
		mustAcquire(t, b, "rw", "R", Shared, x)
		for _, o := range []Options{x, re, {TTL: hour, Fair: true}, {TTL: hour, Waiting: true}, {TTL: hour, Fair: true, Waiting: true}} {
			_, ok, _, err := try(t.Context(), b, "rw", "R", Exclusive, o)
			if ok || !errors.Is(err, ErrUpgrade) {
				t.Fatalf("upgrade with %+v: ok %v err %v; want ErrUpgrade", o, ok, err)
			}
		}
		wantOwners(t, b, "rw", Shared, Holder{Owner: "R", Count: 1})
		if info, _ := mustInfo(t, b, "rw"); info.Waiting != 0 {
			t.Fatalf("refused upgrade left a waiter: %+v", info)
		}
	})

	t.Run("rwlock dead reader expires alone", func(t *testing.T) {
		b := newBackend(t)
		mustAcquire(t, b, "rw", "dead", Shared, Options{TTL: 100 * time.Millisecond})
		mustAcquire(t, b, "rw", "live", Shared, x)
		poll(t, "dead reader's hold gone", func() bool {
			if err := ext(t.Context(), b, "rw", "live", Shared, hour); err != nil {
				t.Fatalf("live reader's renewal: %v", err)
			}
			info, _ := mustInfo(t, b, "rw")
			return len(info.Owners) == 1
		})
		wantOwners(t, b, "rw", Shared, Holder{Owner: "live", Count: 1})
		_, err := rel(t.Context(), b, "rw", "dead", Shared)
		wantNotHeld(t, err, "release by the expired reader")
		wantNotHeld(t, ext(t.Context(), b, "rw", "dead", Shared, hour), "extend by the expired reader")
		mustRefuse(t, b, "rw", "W", Exclusive, x)
		mustRelease(t, b, "rw", "live", Shared, 0)
		mustAcquire(t, b, "rw", "W", Exclusive, x)

		// A dead reader alone blocks a writer only for its lease.
		mustAcquire(t, b, "rw2", "dead", Shared, Options{TTL: 50 * time.Millisecond})
		poll(t, "writer obtains after the dead reader's lease", func() bool {
			_, ok, _, err := try(t.Context(), b, "rw2", "W", Exclusive, x)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		})
	})

	t.Run("release all levels", func(t *testing.T) {
		b := newBackend(t)
		ch, _ := watch(t, b, "l")
		for range 3 {
			mustAcquire(t, b, "l", "A", Exclusive, re)
		}
		if n, err := relAll(t.Context(), b, "l", "A", Exclusive); err != nil || n != 0 {
			t.Fatalf("release all = %d, %v; want 0", n, err)
		}
		wantFree(t, b, "l")
		woken(t, ch, "release of every level")
		for range 2 {
			mustAcquire(t, b, "l", "R", Shared, re)
		}
		if n, err := relAll(t.Context(), b, "l", "R", Shared); err != nil || n != 0 {
			t.Fatalf("release all (shared) = %d, %v; want 0", n, err)
		}
		wantFree(t, b, "l")
		_, err := relAll(t.Context(), b, "l", "R", Shared)
		wantNotHeld(t, err, "release all of nothing")
	})

	t.Run("waiting writer holds back new readers", func(t *testing.T) {
		b := newBackend(t)
		waitingW := Options{TTL: hour, Waiting: true, WaiterTTL: hour}
		mustAcquire(t, b, "rw", "r1", Shared, re)
		// A writer that only tries leaves no intent: readers still join.
		mustRefuse(t, b, "rw", "W", Exclusive, x)
		mustAcquire(t, b, "rw", "r2", Shared, x)
		mustRelease(t, b, "rw", "r2", Shared, 0)
		// A waiting writer does.
		mustRefuse(t, b, "rw", "W", Exclusive, waitingW)
		if info, _ := mustInfo(t, b, "rw"); info.Waiting != 1 {
			t.Fatalf("Waiting = %d with one waiting writer; want 1", info.Waiting)
		}
		retryIn := mustRefuse(t, b, "rw", "r2", Shared, x)
		if retryIn > hour {
			t.Fatalf("reader's retryIn %v exceeds the writer's liveness", retryIn)
		}
		mustRefuse(t, b, "rw", "r2", Shared, Options{TTL: hour, Waiting: true})
		// Re-entries of a reader that holds are not held back.
		mustAcquire(t, b, "rw", "r1", Shared, re)
		mustRelease(t, b, "rw", "r1", Shared, 1)
		mustRelease(t, b, "rw", "r1", Shared, 0)
		// The writer gets in once the readers left; its intent is gone.
		g := mustAcquire(t, b, "rw", "W", Exclusive, waitingW)
		if info, _ := mustInfo(t, b, "rw"); info.Waiting != 0 {
			t.Fatalf("Waiting = %d after the writer got in; want 0", info.Waiting)
		}
		// Its own downgrade is fine; others' reads wait for its release.
		mustAcquire(t, b, "rw", "W", Shared, x)
		mustRefuse(t, b, "rw", "r2", Shared, x)
		mustRelease(t, b, "rw", "W", Exclusive, 0)
		mustRelease(t, b, "rw", "W", Shared, 0)
		if r := mustAcquire(t, b, "rw", "r2", Shared, x); r.Token <= g.Token {
			t.Fatalf("reader token %d not above the writer's %d", r.Token, g.Token)
		}
	})

	t.Run("waiting writer leaving wakes the readers", func(t *testing.T) {
		b := newBackend(t)
		ch, _ := watch(t, b, "rw")
		mustAcquire(t, b, "rw", "r1", Shared, x)
		mustRefuse(t, b, "rw", "W", Exclusive, Options{TTL: hour, Waiting: true, WaiterTTL: hour})
		mustRefuse(t, b, "rw", "r2", Shared, x)
		if err := leave(t.Context(), b, "rw", "W"); err != nil {
			t.Fatal(err)
		}
		woken(t, ch, "the last waiting writer left")
		mustAcquire(t, b, "rw", "r2", Shared, x)
	})

	t.Run("silent waiting writer purged", func(t *testing.T) {
		b := newBackend(t)
		mustAcquire(t, b, "rw", "r1", Shared, x)
		mustRefuse(t, b, "rw", "dead", Exclusive, Options{TTL: hour, Waiting: true, WaiterTTL: 100 * time.Millisecond})
		mustRefuse(t, b, "rw", "r2", Shared, x)
		poll(t, "reader admitted once the silent writer's intent lapsed", func() bool {
			_, ok, _, err := try(t.Context(), b, "rw", "r2", Shared, x)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		})
	})

	t.Run("fair try without waiting is not queued", func(t *testing.T) {
		b := newBackend(t)
		mustAcquire(t, b, "f", "H", Exclusive, x)
		mustRefuse(t, b, "f", "T", Exclusive, Options{TTL: hour, Fair: true})
		if info, _ := mustInfo(t, b, "f"); info.Waiting != 0 {
			t.Fatalf("Waiting = %d after a fair try; want 0", info.Waiting)
		}
		mustRefuse(t, b, "f", "W", Exclusive, Options{TTL: hour, Fair: true, Waiting: true, WaiterTTL: hour})
		mustRelease(t, b, "f", "H", Exclusive, 0)
		// The queue has a head: a fair try by someone else is refused, the head gets it.
		mustRefuse(t, b, "f", "T", Exclusive, Options{TTL: hour, Fair: true})
		mustAcquire(t, b, "f", "W", Exclusive, Options{TTL: hour, Fair: true})
	})

	t.Run("fair order", func(t *testing.T) {
		b := newBackend(t)
		fair := Options{TTL: hour, Fair: true, Waiting: true, WaiterTTL: hour}
		mustAcquire(t, b, "f", "H", Exclusive, x)
		for i := 1; i <= 5; i++ {
			mustRefuse(t, b, "f", fmt.Sprintf("w%d", i), Exclusive, fair)
		}
		// Retrying does not change the order.
		mustRefuse(t, b, "f", "w3", Exclusive, fair)
		if info, _ := mustInfo(t, b, "f"); info.Waiting != 5 {
			t.Fatalf("Waiting = %d; want 5", info.Waiting)
		}
		mustRelease(t, b, "f", "H", Exclusive, 0)
		for i := 1; i <= 5; i++ {
			// Everyone behind the head is refused although the lock is free.
			for j := 5; j > i; j-- {
				mustRefuse(t, b, "f", fmt.Sprintf("w%d", j), Exclusive, fair)
			}
			// A caller that is not fair barges in: fairness is among fair callers.
			if i == 3 {
				mustAcquire(t, b, "f", "barger", Exclusive, x)
				mustRelease(t, b, "f", "barger", Exclusive, 0)
			}
			owner := fmt.Sprintf("w%d", i)
			mustAcquire(t, b, "f", owner, Exclusive, fair)
			mustRelease(t, b, "f", owner, Exclusive, 0)
		}
		if info, _ := mustInfo(t, b, "f"); info.Waiting != 0 {
			t.Fatalf("Waiting = %d; want 0", info.Waiting)
		}
	})

	t.Run("fair readers wait behind a queued writer", func(t *testing.T) {
		b := newBackend(t)
		fair := Options{TTL: hour, Fair: true, Waiting: true, WaiterTTL: hour}
		mustAcquire(t, b, "f", "r1", Shared, fair)
		mustRefuse(t, b, "f", "W", Exclusive, fair)
		// A new reader could share, but the writer is ahead of it.
		mustRefuse(t, b, "f", "r2", Shared, fair)
		mustRelease(t, b, "f", "r1", Shared, 0)
		mustRefuse(t, b, "f", "r2", Shared, fair)
		mustAcquire(t, b, "f", "W", Exclusive, fair)
		// The writer downgrades without queueing behind r2.
		mustAcquire(t, b, "f", "W", Shared, fair)
		mustRelease(t, b, "f", "W", Exclusive, 0)
		mustAcquire(t, b, "f", "r2", Shared, fair)
	})

	t.Run("fair dead waiter purged", func(t *testing.T) {
		b := newBackend(t)
		mustAcquire(t, b, "f", "H", Exclusive, x)
		mustRefuse(t, b, "f", "dead", Exclusive, Options{TTL: hour, Fair: true, Waiting: true, WaiterTTL: 100 * time.Millisecond})
		live := Options{TTL: hour, Fair: true, Waiting: true, WaiterTTL: hour}
		mustRefuse(t, b, "f", "live", Exclusive, live)
		if info, _ := mustInfo(t, b, "f"); info.Waiting != 2 {
			t.Fatalf("Waiting = %d; want 2", info.Waiting)
		}
		mustRelease(t, b, "f", "H", Exclusive, 0)
		poll(t, "live waiter obtains once the dead head is purged", func() bool {
			_, ok, _, err := try(t.Context(), b, "f", "live", Exclusive, live)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		})
		info := wantOwners(t, b, "f", Exclusive, Holder{Owner: "live", Count: 1})
		if info.Waiting != 0 {
			t.Fatalf("Waiting = %d after the purge; want 0", info.Waiting)
		}
		// The dead waiter coming back is a new waiter.
		mustRefuse(t, b, "f", "dead", Exclusive, live)
	})

	t.Run("fair leave queue wakes the next", func(t *testing.T) {
		b := newBackend(t)
		fair := Options{TTL: hour, Fair: true, Waiting: true, WaiterTTL: hour}
		ch, _ := watch(t, b, "f")
		mustAcquire(t, b, "f", "H", Exclusive, x)
		mustRefuse(t, b, "f", "first", Exclusive, fair)
		mustRefuse(t, b, "f", "second", Exclusive, fair)
		mustRelease(t, b, "f", "H", Exclusive, 0)
		woken(t, ch, "release")
		mustRefuse(t, b, "f", "second", Exclusive, fair)
		if err := leave(t.Context(), b, "f", "first"); err != nil {
			t.Fatal(err)
		}
		woken(t, ch, "head left the queue of a free lock")
		mustAcquire(t, b, "f", "second", Exclusive, fair)
	})

	t.Run("watch", func(t *testing.T) {
		b := newBackend(t)
		ch, cancel := watch(t, b, "l")
		mustAcquire(t, b, "l", "A", Exclusive, re)
		mustAcquire(t, b, "l", "A", Exclusive, re)
		mustRelease(t, b, "l", "A", Exclusive, 1)
		mustRelease(t, b, "l", "A", Exclusive, 0)
		woken(t, ch, "exclusive release")
		mustAcquire(t, b, "l", "r1", Shared, x)
		mustAcquire(t, b, "l", "r2", Shared, x)
		mustRelease(t, b, "l", "r1", Shared, 0)
		mustRelease(t, b, "l", "r2", Shared, 0)
		woken(t, ch, "last shared release")
		// Only the last shared release and the exclusive release notified.
		select {
		case <-ch:
			t.Fatal("a wake-up for a release that freed nothing")
		default:
		}
		// After cancel, no more calls: a second watch sees the next release
		// (delivered after any the first would have got), the first does not.
		cancel()
		cancel()
		ch2, _ := watch(t, b, "l")
		mustAcquire(t, b, "l", "A", Exclusive, x)
		mustRelease(t, b, "l", "A", Exclusive, 0)
		woken(t, ch2, "second watch")
		select {
		case <-ch:
			t.Fatal("cancelled watch was called")
		default:
		}
		// Other names do not wake this one.
		mustAcquire(t, b, "other", "A", Exclusive, x)
		mustRelease(t, b, "other", "A", Exclusive, 0)
		mustAcquire(t, b, "l", "A", Exclusive, x)
		mustRelease(t, b, "l", "A", Exclusive, 0)
		woken(t, ch2, "third release")
		select {
		case <-ch2:
			t.Fatal("woken by another lock's release")
		default:
		}
	})

	t.Run("invalid arguments", func(t *testing.T) {
		b := newBackend(t)
		ctx := t.Context()
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s: %v; want ErrInvalid", what, err)
			}
		}
		for _, name := range []string{"", "}x"} {
			_, _, _, err := try(ctx, b, name, "A", Exclusive, x)
			check(fmt.Sprintf("TryAcquire name %q", name), err)
			_, err = rel(ctx, b, name, "A", Exclusive)
			check("Release", err)
			check("Extend", ext(ctx, b, name, "A", Exclusive, hour))
			_, _, err = inf(ctx, b, name)
			check("Info", err)
			check("LeaveQueue", leave(ctx, b, name, "A"))
			_, err = watchB(ctx, b, name, func() {})
			check("Watch", err)
		}
		_, _, _, err := try(ctx, b, "l", "", Exclusive, x)
		check("empty owner", err)
		_, _, _, err = try(ctx, b, "l", "A", Mode(7), x)
		check("bad mode", err)
		_, _, _, err = try(ctx, b, "l", "A", Exclusive, Options{})
		check("zero ttl", err)
		// Odd but valid names and owners.
		for _, name := range []string{"a}b", "{x}", "ключ {tag}", "a b\x00c"} {
			mustAcquire(t, b, name, "node-1:42:co{7}", Exclusive, x)
			wantOwners(t, b, name, Exclusive, Holder{Owner: "node-1:42:co{7}", Count: 1})
			mustRelease(t, b, name, "node-1:42:co{7}", Exclusive, 0)
		}
	})

}
