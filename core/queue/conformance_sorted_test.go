package queue

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"
)

func bodies(msgs []Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

func popAll(t *testing.T, pop func() (Message, error)) []string {
	t.Helper()
	var out []string
	for {
		m, err := pop()
		if errors.Is(err, ErrEmpty) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(m.Body))
	}
}

func TestPlainConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		t.Run("fifo", func(t *testing.T) {
			q, err := e.b.Plain("fifo", testOptions())
			if err != nil {
				t.Fatal(err)
			}
			do(t, q.Push([]byte("a")))
			do(t, q.Push([]byte("b")))
			do(t, q.PushBatch([][]byte{[]byte("c"), []byte("d")}))
			do(t, q.PushBatch(nil))
			if n := do(t, q.Length()); n != 4 {
				t.Fatalf("length %d, want 4", n)
			}
			got := popAll(t, func() (Message, error) { return q.Pop().Do(t.Context()) })
			if !slices.Equal(got, []string{"a", "b", "c", "d"}) {
				t.Fatalf("popped %q", got)
			}
			wantErr(t, q.Pop(), ErrEmpty)
		})
		t.Run("bodies are opaque bytes", func(t *testing.T) {
			q, _ := e.b.Plain("bytes", testOptions())
			in := []string{"", ":", "12:34", "\x00\xff\n", "{\"a\":1}"}
			for _, s := range in {
				do(t, q.Push([]byte(s)))
			}
			got := popAll(t, func() (Message, error) { return q.Pop().Do(t.Context()) })
			if !slices.Equal(got, in) {
				t.Fatalf("popped %q, want %q", got, in)
			}
		})
		t.Run("max length refuses whole batches", func(t *testing.T) {
			o := testOptions()
			o.MaxLength = 3
			q, _ := e.b.Plain("full", o)
			do(t, q.PushBatch([][]byte{[]byte("1"), []byte("2")}))
			wantErr(t, q.PushBatch([][]byte{[]byte("3"), []byte("4")}), ErrFull)
			do(t, q.Push([]byte("3")))
			wantErr(t, q.Push([]byte("4")), ErrFull)
			if n := do(t, q.Length()); n != 3 {
				t.Fatalf("length %d, want 3", n)
			}
		})
		t.Run("purge", func(t *testing.T) {
			q, _ := e.b.Plain("purge", testOptions())
			do(t, q.PushBatch([][]byte{[]byte("1"), []byte("2")}))
			if n := do(t, q.Purge()); n != 2 {
				t.Fatalf("purged %d, want 2", n)
			}
			wantErr(t, q.Pop(), ErrEmpty)
		})
		t.Run("message ttl", func(t *testing.T) {
			o := testOptions()
			o.MessageTTL = e.span(50 * time.Millisecond)
			q, _ := e.b.Plain("ttl", o)
			do(t, q.Push([]byte("old")))
			e.advance(e.span(120 * time.Millisecond))
			do(t, q.Push([]byte("new")))
			got := popAll(t, func() (Message, error) { return q.Pop().Do(t.Context()) })
			if !slices.Equal(got, []string{"new"}) {
				t.Fatalf("popped %q, want only new", got)
			}
			if st := do(t, q.Stats()); st.Expired != 1 {
				t.Fatalf("stats %+v, want Expired 1", st)
			}
		})
		t.Run("waiters are served in order", func(t *testing.T) {
			q, _ := e.b.Plain("waiters", testOptions())
			var chans []<-chan result[Message]
			for i := 0; i < 3; i++ {
				ch, _ := popWait[Message](q, time.Minute)
				chans = append(chans, ch)
			}
			for i := 0; i < 3; i++ {
				do(t, q.Push([]byte(fmt.Sprint(i))))
			}
			for i, ch := range chans {
				r := await(t, ch)
				if r.err != nil || string(r.v.Body) != fmt.Sprint(i) {
					t.Fatalf("waiter %d got %q, %v", i, r.v.Body, r.err)
				}
			}
		})
		t.Run("wait timeout", func(t *testing.T) {
			q, _ := e.b.Plain("timeout", testOptions())
			ch, cancel := popWait[Message](q, 50*time.Millisecond)
			e.advance(60 * time.Millisecond)
			r := await(t, ch)
			if !errors.Is(r.err, ErrTimeout) {
				t.Fatalf("got %v, want ErrTimeout", r.err)
			}
			if cancel() {
				t.Fatal("cancel after the timeout reported a withdrawal")
			}
		})
		t.Run("cancelled wait loses nothing", func(t *testing.T) {
			q, _ := e.b.Plain("cancel", testOptions())
			ch, cancel := popWait[Message](q, time.Minute)
			if !cancel() {
				t.Fatal("cancel of a pending wait returned false")
			}
			if cancel() {
				t.Fatal("second cancel returned true")
			}
			do(t, q.Push([]byte("kept")))
			quiet(t, ch, 50*time.Millisecond)
			if m := do(t, q.Pop()); string(m.Body) != "kept" {
				t.Fatalf("popped %q", m.Body)
			}
		})
		t.Run("bad input", func(t *testing.T) {
			q, _ := e.b.Plain("bad", testOptions())
			ch, _ := popWait[Message](q, -time.Second)
			if r := await(t, ch); !errors.Is(r.err, ErrInvalid) {
				t.Fatalf("negative timeout: %v", r.err)
			}
			if _, err := e.b.Plain("", testOptions()); !errors.Is(err, ErrInvalid) {
				t.Fatalf("empty name: %v", err)
			}
			if _, err := e.b.Plain("}x", testOptions()); !errors.Is(err, ErrInvalid) {
				t.Fatalf("name starting with }: %v", err)
			}
			o := testOptions()
			o.MaxLength = 0
			if _, err := e.b.Plain("zero", o); !errors.Is(err, ErrInvalid) {
				t.Fatalf("max_length 0: %v", err)
			}
			if _, err := e.b.Delay("bad", testOptions()); !errors.Is(err, ErrConflict) {
				t.Fatalf("same name as another kind: %v", err)
			}
			o = testOptions()
			o.MaxLength = 7
			if _, err := e.b.Plain("bad", o); !errors.Is(err, ErrConflict) {
				t.Fatalf("same name with other options: %v", err)
			}
			if q2, err := e.b.Plain("bad", testOptions()); err != nil || q2 != q {
				t.Fatalf("reopen: %v, same object %v", err, q2 == q)
			}
		})
		t.Run("consume", func(t *testing.T) {
			q, _ := e.b.Plain("consume", testOptions())
			const n = 200
			var mu sync.Mutex
			seen := map[string]int{}
			all := make(chan struct{})
			stop, err := q.Consume(ConsumeOptions{Concurrency: 4}, func(d *Delivery, done func(error)) {
				mu.Lock()
				seen[string(d.Body)]++
				if len(seen) == n {
					close(all)
				}
				mu.Unlock()
				go done(nil)
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				do(t, q.Push([]byte(fmt.Sprint(i))))
			}
			await(t, all)
			if err := stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			for k, c := range seen {
				if c != 1 {
					t.Fatalf("message %s handled %d times", k, c)
				}
			}
			if n := do(t, q.Length()); n != 0 {
				t.Fatalf("%d left", n)
			}
		})
	})
}

func TestDelayConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		t.Run("due order", func(t *testing.T) {
			// On Redis advance sleeps in real time: the gaps leave a loaded
			// machine a second or more between the steps (150 and 300 ms
			// gaps made "x" due too early once).
			q, _ := e.b.Delay("due", testOptions())
			do(t, q.Push([]byte("x"), 4000*time.Millisecond))
			do(t, q.Push([]byte("y"), 1000*time.Millisecond))
			do(t, q.Push([]byte("z"), 0))
			do(t, q.PushAt([]byte("past"), e.now().Add(-time.Hour)))
			got := popAll(t, func() (Message, error) { return q.Pop().Do(t.Context()) })
			if !slices.Equal(got, []string{"past", "z"}) {
				t.Fatalf("popped %q, want past, z", got)
			}
			if p, r := do(t, q.Pending()), do(t, q.Ready()); p != 2 || r != 0 {
				t.Fatalf("pending %d ready %d, want 2 0", p, r)
			}
			e.advance(1300 * time.Millisecond)
			if r := do(t, q.Ready()); r != 1 {
				t.Fatalf("ready %d, want 1", r)
			}
			m := do(t, q.Pop())
			if string(m.Body) != "y" || m.Due.IsZero() || m.EnqueuedAt.IsZero() {
				t.Fatalf("popped %+v, want y with due and enqueue times", m)
			}
			wantErr(t, q.Pop(), ErrEmpty)
			e.advance(3000 * time.Millisecond)
			if m := do(t, q.Pop()); string(m.Body) != "x" {
				t.Fatalf("popped %q, want x", m.Body)
			}
			st := do(t, q.Stats())
			if st.Length != 0 || st.Pending != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
		t.Run("equal due times are fifo", func(t *testing.T) {
			q, _ := e.b.Delay("fifo", testOptions())
			at := e.now().Add(-time.Minute)
			for i := 0; i < 20; i++ {
				do(t, q.PushAt([]byte(fmt.Sprint(i)), at))
			}
			got := popAll(t, func() (Message, error) { return q.Pop().Do(t.Context()) })
			for i, g := range got {
				if g != fmt.Sprint(i) {
					t.Fatalf("popped %q", got)
				}
			}
		})
		t.Run("a waiter wakes at the due time", func(t *testing.T) {
			q, _ := e.b.Delay("wake", testOptions())
			ch, _ := popWait[Message](q, time.Minute)
			do(t, q.Push([]byte("later"), time.Hour))
			do(t, q.Push([]byte("soon"), 100*time.Millisecond))
			if e.memory {
				quiet(t, ch, 10*time.Millisecond)
			}
			e.advance(100 * time.Millisecond)
			r := await(t, ch)
			if r.err != nil || string(r.v.Body) != "soon" {
				t.Fatalf("got %q %v", r.v.Body, r.err)
			}
		})
		t.Run("ttl counts from the due time", func(t *testing.T) {
			o := testOptions()
			o.MessageTTL = e.span(100 * time.Millisecond)
			q, _ := e.b.Delay("ttl", o)
			do(t, q.Push([]byte("kept"), e.span(150*time.Millisecond)))
			do(t, q.PushAt([]byte("stale"), e.now().Add(-time.Hour)))
			e.advance(e.span(160 * time.Millisecond))
			got := popAll(t, func() (Message, error) { return q.Pop().Do(t.Context()) })
			if !slices.Equal(got, []string{"kept"}) {
				t.Fatalf("popped %q", got)
			}
			if st := do(t, q.Stats()); st.Expired != 1 {
				t.Fatalf("expired %d, want 1", st.Expired)
			}
		})
		t.Run("bad input", func(t *testing.T) {
			q, _ := e.b.Delay("bad", testOptions())
			wantErr(t, q.Push([]byte("x"), -time.Millisecond), ErrInvalid)
			o := testOptions()
			o.MaxLength = 1
			f, _ := e.b.Delay("full", o)
			do(t, f.Push([]byte("x"), time.Hour))
			wantErr(t, f.PushAt([]byte("y"), e.now()), ErrFull)
		})
	})
}

func TestPriorityConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		t.Run("smallest first, fifo among equals", func(t *testing.T) {
			q, _ := e.b.Priority("order", testOptions())
			push := func(body string, p float64) { do(t, q.Push([]byte(body), p)) }
			push("a5", 5)
			push("b1", 1)
			push("c5", 5)
			push("d1", 1)
			push("e10", 10)
			push("f-1", -1)
			push("inf", math.Inf(1))
			push("-inf", math.Inf(-1))
			got := popAll(t, func() (Message, error) { return q.Pop().Do(t.Context()) })
			want := []string{"-inf", "f-1", "b1", "d1", "a5", "c5", "e10", "inf"}
			if !slices.Equal(got, want) {
				t.Fatalf("popped %q, want %q", got, want)
			}
		})
		t.Run("priorities keep full precision", func(t *testing.T) {
			q, _ := e.b.Priority("precision", testOptions())
			big := math.Pow(2, 60)
			ps := []float64{big + 256, big, 0.1 + 0.2, 0.3, math.SmallestNonzeroFloat64, 0, -math.SmallestNonzeroFloat64}
			for _, p := range ps {
				do(t, q.Push([]byte(fmt.Sprint(p)), p))
			}
			slices.Sort(ps)
			for _, p := range ps {
				m := do(t, q.Pop())
				if m.Priority != p || string(m.Body) != fmt.Sprint(p) {
					t.Fatalf("popped %q with priority %v, want %v", m.Body, m.Priority, p)
				}
			}
		})
		t.Run("waiters", func(t *testing.T) {
			q, _ := e.b.Priority("wait", testOptions())
			ch, _ := popWait[Message](q, time.Minute)
			do(t, q.Push([]byte("x"), 3))
			if r := await(t, ch); r.err != nil || string(r.v.Body) != "x" || r.v.Priority != 3 {
				t.Fatalf("got %+v %v", r.v, r.err)
			}
		})
		t.Run("bad input", func(t *testing.T) {
			q, _ := e.b.Priority("bad", testOptions())
			wantErr(t, q.Push([]byte("x"), math.NaN()), ErrInvalid)
			if n := do(t, q.Length()); n != 0 {
				t.Fatalf("length %d after a refused push", n)
			}
		})
	})
}
