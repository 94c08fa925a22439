package queue

import (
	"errors"
	"testing"
	"time"
)

// deadTwo pushes two messages to a reliable queue with no retries and nacks
// both: two dead letters, ids returned oldest first.
func deadTwo(t *testing.T, q Reliable) []DeadLetter {
	t.Helper()
	do(t, q.Push([]byte("a")))
	do(t, q.Push([]byte("b")))
	for range 2 {
		d := do(t, q.Pop())
		if r := do(t, q.Nack(d, 0)); !r.DeadLettered {
			t.Fatal("nack did not dead-letter")
		}
	}
	dl := do(t, q.DeadLetters().Range(0, 10))
	if len(dl) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dl))
	}
	return dl
}

// The admin view by name: Find returns the queue opened in this process
// (any kind, its options), Delete drops chosen dead letters only, Purge of a
// broadcast queue is refused, a plain queue has no dead letters.
func TestAdminFindDeleteByName(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		o := testOptions()
		o.MaxRetries = 0
		q, err := e.b.Reliable("adm", o)
		if err != nil {
			t.Fatal(err)
		}
		dl := deadTwo(t, q)

		if _, err := Find(e.b, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Find of an unopened queue: %v", err)
		}
		h, err := Find(e.b, "adm")
		if err != nil || h.Kind != KindReliable {
			t.Fatalf("Find: %+v %v", h, err)
		}
		dead, err := h.DeadLetters()
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, dead.Delete(), ErrInvalid)
		wantErr(t, dead.Delete(""), ErrInvalid)
		if n := do(t, dead.Delete(dl[0].ID, "1-999")); n != 1 {
			t.Fatalf("Delete removed %d, want 1", n)
		}
		left := do(t, dead.Range(0, 10))
		if len(left) != 1 || left[0].ID != dl[1].ID {
			t.Fatalf("left %+v, want only %s", left, dl[1].ID)
		}
		if st := do(t, h.Stats()); st.DeadLetters != 1 {
			t.Fatalf("stats dead letters %d", st.DeadLetters)
		}

		p, err := e.b.Plain("adm_plain", testOptions())
		if err != nil {
			t.Fatal(err)
		}
		do(t, p.Push([]byte("x")))
		hp, err := Find(e.b, "adm_plain")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hp.DeadLetters(); !errors.Is(err, ErrInvalid) {
			t.Fatalf("plain dead letters: %v", err)
		}
		if n := do(t, hp.Purge()); n != 1 {
			t.Fatalf("purged %d", n)
		}
		if _, err := e.b.Broadcast("adm_bc", testOptions()); err != nil {
			t.Fatal(err)
		}
		hb, _ := Find(e.b, "adm_bc")
		wantErr(t, hb.Purge(), ErrInvalid)
	})
}

// Discover finds, from another process that opened nothing, every queue in
// Redis with its kind (on a Cluster, on every master), and Open then reaches
// its dead letters: what the admin CLI does.
func TestAdminDiscoverAndOpen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		if e.memory {
			return
		}
		o := testOptions()
		o.MaxRetries = 0
		names := []string{"d_a", "d_b", "d_c", "d_d", "d_e"}
		for _, n := range names[:4] {
			q, err := e.b.Reliable(n, o)
			if err != nil {
				t.Fatal(err)
			}
			do(t, q.Push([]byte(n)))
		}
		dq, _ := e.b.Delay("d_e", o)
		do(t, dq.Push([]byte("later"), time.Hour))
		rq, _ := e.b.Reliable("d_dead", o)
		deadTwo(t, rq)

		other := e.second(t).(*Redis)
		found, err := other.Discover(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]Kind{}
		for _, f := range found {
			got[f.Name] = f.Kind
		}
		for _, n := range names[:4] {
			if got[n] != KindReliable {
				t.Fatalf("discovered %v: %s missing or wrong kind", found, n)
			}
		}
		if got["d_e"] != KindDelay || got["d_dead"] != KindReliable || len(got) != 6 {
			t.Fatalf("discovered %v", found)
		}
		h, err := Open(other, got["d_dead"], "d_dead", o)
		if err != nil {
			t.Fatal(err)
		}
		dead, _ := h.DeadLetters()
		if n := do(t, dead.RequeueAll()); n != 2 {
			t.Fatalf("requeued %d", n)
		}
		if l := do(t, rq.Length()); l != 2 {
			t.Fatalf("queue length after requeue %d", l)
		}
	})
}

// Oldest is the head of every kind: zero when empty (or, delay, nothing
// due), the push time (delay: due time) otherwise; a reliable message in
// flight still counts until it is acknowledged.
func TestAdminOldest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		o := testOptions()
		open := func(kind Kind, name string) Handle {
			t.Helper()
			h, err := Open(e.b, kind, name, o)
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		// within: t is a time of this test run (2 s of slack for Redis's
		// clock against this machine's).
		start := e.now()
		within := func(what string, got time.Time) {
			t.Helper()
			if got.IsZero() || got.Before(start.Add(-2*time.Second)) || got.After(e.now().Add(2*time.Second)) {
				t.Fatalf("%s: oldest %v, want a time between %v and now (%v)", what, got, start, e.now())
			}
		}
		zero := func(what string, h Handle) {
			t.Helper()
			if got := do(t, h.Oldest()); !got.IsZero() {
				t.Fatalf("%s: oldest %v, want none", what, got)
			}
		}

		hp := open(KindPlain, "old_plain")
		zero("empty plain", hp)
		p := hp.q.(Plain)
		do(t, p.Push([]byte("a")))
		first := do(t, hp.Oldest())
		within("plain", first)
		e.advance(20 * time.Millisecond)
		do(t, p.Push([]byte("b")))
		if got := do(t, hp.Oldest()); !got.Equal(first) {
			t.Fatalf("plain head moved to %v before a pop (was %v)", got, first)
		}
		do(t, p.Pop())
		if got := do(t, hp.Oldest()); !got.After(first) {
			t.Fatalf("after a pop the head is %v, want after %v", got, first)
		}

		hd := open(KindDelay, "old_delay")
		d := hd.q.(Delay)
		do(t, d.Push([]byte("later"), time.Hour))
		zero("delay with nothing due", hd)
		do(t, d.Push([]byte("now"), 0))
		within("delay", do(t, hd.Oldest()))

		hq := open(KindPriority, "old_prio")
		zero("empty priority", hq)
		do(t, hq.q.(Priority).Push([]byte("x"), 5))
		within("priority", do(t, hq.Oldest()))

		hr := open(KindReliable, "old_rel")
		r := hr.q.(Reliable)
		zero("empty reliable", hr)
		do(t, r.Push([]byte("x")))
		dl := do(t, r.Pop())
		within("reliable in flight", do(t, hr.Oldest()))
		do(t, r.Ack(dl))
		zero("reliable acknowledged", hr)

		hb := open(KindBroadcast, "old_bc")
		zero("empty broadcast", hb)
		do(t, hb.q.(Broadcast).Push([]byte("x")))
		within("broadcast", do(t, hb.Oldest()))
	})
}
