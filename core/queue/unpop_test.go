package queue

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Unpop is the one give back of the plain kinds: the message returns to its
// place, unchanged, ahead of what was pushed after it.
func TestUnpopGivesBackToItsPlace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		t.Run("plain: at the head, enqueued time kept", func(t *testing.T) {
			o := testOptions()
			o.MaxLength = 3
			q, err := e.b.Plain("unpop_plain", o)
			if err != nil {
				t.Fatal(err)
			}
			do(t, q.PushBatch([][]byte{[]byte("a"), []byte("b")}))
			m := do(t, q.Pop())
			do(t, q.PushBatch([][]byte{[]byte("c"), []byte("d")})) // full now: 3
			do(t, q.Unpop(m))                                      // it had its place: no ErrFull
			if n := do(t, q.Length()); n != 4 {
				t.Fatalf("length %d after unpop, want 4", n)
			}
			again := do(t, q.Pop())
			if string(again.Body) != "a" || !again.EnqueuedAt.Equal(m.EnqueuedAt) {
				t.Fatalf("popped %q enqueued %v, want \"a\" enqueued %v", again.Body, again.EnqueuedAt, m.EnqueuedAt)
			}
			if got := popAll(t, func() (Message, error) { return q.Pop().Do(context.Background()) }); !slices.Equal(got, []string{"b", "c", "d"}) {
				t.Fatalf("then %q, want b c d", got)
			}
		})
		t.Run("priority: ahead of equal priorities pushed later", func(t *testing.T) {
			q, err := e.b.Priority("unpop_prio", testOptions())
			if err != nil {
				t.Fatal(err)
			}
			do(t, q.Push([]byte("x"), 1))
			do(t, q.Push([]byte("y"), 1))
			m := do(t, q.Pop())
			do(t, q.Push([]byte("z"), 1))
			do(t, q.Unpop(m))
			got := []string{}
			for range 3 {
				m := do(t, q.Pop())
				if m.Priority != 1 {
					t.Fatalf("priority %v", m.Priority)
				}
				got = append(got, string(m.Body))
			}
			if !slices.Equal(got, []string{"x", "y", "z"}) {
				t.Fatalf("popped %q, want x y z", got)
			}
		})
		t.Run("delay: due time and order kept", func(t *testing.T) {
			q, err := e.b.Delay("unpop_delay", testOptions())
			if err != nil {
				t.Fatal(err)
			}
			at := e.now().Add(-time.Minute).Truncate(time.Millisecond)
			do(t, q.PushAt([]byte("x"), at))
			do(t, q.PushAt([]byte("y"), at))
			m := do(t, q.Pop())
			do(t, q.PushAt([]byte("z"), at))
			do(t, q.Unpop(m))
			got := []string{}
			for range 3 {
				m := do(t, q.Pop())
				if !m.Due.Equal(at) {
					t.Fatalf("due %v, want %v", m.Due, at)
				}
				got = append(got, string(m.Body))
			}
			if !slices.Equal(got, []string{"x", "y", "z"}) {
				t.Fatalf("popped %q, want x y z", got)
			}
		})
		t.Run("a waiter gets the message given back", func(t *testing.T) {
			q, err := e.b.Plain("unpop_wait", testOptions())
			if err != nil {
				t.Fatal(err)
			}
			do(t, q.Push([]byte("w")))
			m := do(t, q.Pop())
			ch, cancel := popWait[Message](q, 10*time.Second)
			defer cancel()
			do(t, q.Unpop(m))
			if r := await(t, ch); r.err != nil || string(r.v.Body) != "w" {
				t.Fatalf("waiter got %q %v", r.v.Body, r.err)
			}
		})
		t.Run("bad input", func(t *testing.T) {
			q1, err := e.b.Plain("unpop_bad1", testOptions())
			if err != nil {
				t.Fatal(err)
			}
			q2, err := e.b.Plain("unpop_bad2", testOptions())
			if err != nil {
				t.Fatal(err)
			}
			wantErr(t, q1.Unpop(Message{Body: []byte("made up")}), ErrInvalid)
			do(t, q1.Push([]byte("m")))
			m := do(t, q1.Pop())
			wantErr(t, q2.Unpop(m), ErrForeign)
			if n := do(t, q2.Length()); n != 0 {
				t.Fatalf("foreign unpop stored a message: length %d", n)
			}
		})
	})
}

// A consumer's delivery of a plain queue gives its message back through
// Release (Unpop); a second Release is refused.
func TestPlainDeliveryReleaseUnpops(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		q, err := e.b.Plain("release_plain", testOptions())
		if err != nil {
			t.Fatal(err)
		}
		do(t, q.Push([]byte("first")))
		got := make(chan *Delivery, 1)
		stop, err := q.Consume(ConsumeOptions{}, func(d *Delivery, done func(error)) {
			select {
			case got <- d:
			default:
			}
			// never done: the handler holds the message
		})
		if err != nil {
			t.Fatal(err)
		}
		d := await(t, got)
		do(t, q.Push([]byte("second")))
		do(t, d.Release())
		wantErr(t, d.Release(), ErrSettled)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = stop(ctx)
		if got := popAll(t, func() (Message, error) { return q.Pop().Do(context.Background()) }); !slices.Equal(got, []string{"first", "second"}) {
			t.Fatalf("after the release: %q, want first second", got)
		}
	})
}
