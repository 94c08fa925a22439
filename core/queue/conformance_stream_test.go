package queue

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
)

func mustReliable(t *testing.T, e env, name string, o Options) Reliable {
	t.Helper()
	q, err := e.b.Reliable(name, o)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestReliableConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		t.Run("push pop ack", func(t *testing.T) {
			q := mustReliable(t, e, "basic", testOptions())
			id := do(t, q.Push([]byte("a")))
			if id == "" {
				t.Fatal("empty id")
			}
			d := do(t, q.Pop())
			if d.ID != id || string(d.Body) != "a" || d.Deliveries != 1 || d.EnqueuedAt.IsZero() {
				t.Fatalf("delivery %+v, want id %s body a deliveries 1", d, id)
			}
			wantErr(t, q.Pop(), ErrEmpty)
			st := do(t, q.Stats())
			if st.Length != 1 || st.InFlight != 1 || st.Ready != 0 || st.Consumers != 1 {
				t.Fatalf("stats in flight %+v", st)
			}
			do(t, d.Ack())
			if !d.Settled() {
				t.Fatal("not settled after ack")
			}
			wantErr(t, d.Ack(), ErrSettled)
			wantErr(t, q.Nack(d, 0), ErrSettled)
			wantErr(t, q.Extend(d), ErrSettled)
			if n := do(t, q.Length()); n != 0 {
				t.Fatalf("length %d after ack", n)
			}
		})
		t.Run("batch and full", func(t *testing.T) {
			o := testOptions()
			o.MaxLength = 3
			q := mustReliable(t, e, "full", o)
			ids := do(t, q.PushBatch([][]byte{[]byte("1"), []byte("2")}))
			if len(ids) != 2 {
				t.Fatalf("ids %v", ids)
			}
			wantErr(t, q.PushBatch([][]byte{[]byte("3"), []byte("4")}), ErrFull)
			do(t, q.Push([]byte("3")))
			d := do(t, q.Pop())
			wantErr(t, q.Push([]byte("4")), ErrFull) // in flight still counts
			do(t, d.Ack())
			do(t, q.Push([]byte("4")))
			got := []string{}
			for {
				d, err := q.Pop().Do(t.Context())
				if errors.Is(err, ErrEmpty) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(d.Body))
				do(t, d.Ack())
			}
			if !slices.Equal(got, []string{"2", "3", "4"}) {
				t.Fatalf("popped %q", got)
			}
		})
		t.Run("nack redelivers and dead-letters", func(t *testing.T) {
			q := mustReliable(t, e, "nack", testOptions()) // max retries 2: 3 deliveries
			do(t, q.Push([]byte("x")))
			d1 := do(t, q.Pop())
			if r := do(t, q.Nack(d1, 0)); r.DeadLettered {
				t.Fatal("first nack dead-lettered")
			}
			wantErr(t, d1.Nack(0), ErrSettled)
			d2 := do(t, q.Pop())
			if d2.ID != d1.ID || d2.Deliveries != 2 {
				t.Fatalf("redelivery %+v", d2)
			}
			do(t, d2.Nack(200*time.Millisecond))
			wantErr(t, q.Pop(), ErrEmpty)
			if st := do(t, q.Stats()); st.Retrying != 1 || st.InFlight != 0 || st.Length != 1 || st.Nacked != 2 {
				t.Fatalf("stats while retrying %+v", st)
			}
			e.advance(250 * time.Millisecond)
			d3 := do(t, q.Pop())
			if d3.Deliveries != 3 {
				t.Fatalf("third delivery %+v", d3)
			}
			if r := do(t, d3.Nack(0)); !r.DeadLettered {
				t.Fatal("last nack did not dead-letter")
			}
			wantErr(t, q.Pop(), ErrEmpty)
			if n := do(t, q.Length()); n != 0 {
				t.Fatalf("length %d after dead-lettering", n)
			}
			dl := q.DeadLetters()
			if n := do(t, dl.Length()); n != 1 {
				t.Fatalf("dead letters %d", n)
			}
			letters := do(t, dl.Range(0, 10))
			if len(letters) != 1 || letters[0].MessageID != d1.ID || string(letters[0].Body) != "x" ||
				letters[0].Deliveries != 3 || letters[0].ID == "" || letters[0].At.IsZero() {
				t.Fatalf("letters %+v", letters)
			}
			if st := do(t, q.Stats()); st.DeadLetters != 1 || st.DeadLettered != 1 {
				t.Fatalf("stats %+v", st)
			}
			do(t, dl.Requeue(letters[0].ID))
			wantErr(t, dl.Requeue(letters[0].ID), ErrNotFound)
			d4 := do(t, q.Pop())
			if string(d4.Body) != "x" || d4.Deliveries != 1 {
				t.Fatalf("requeued delivery %+v", d4)
			}
			do(t, d4.Ack())
		})
		t.Run("release does not count", func(t *testing.T) {
			q := mustReliable(t, e, "release", testOptions())
			do(t, q.Push([]byte("x")))
			d := do(t, q.Pop())
			do(t, q.Release(d))
			wantErr(t, q.Release(d), ErrSettled)
			d2 := do(t, q.Pop())
			if d2.Deliveries != 1 || d2.ID != d.ID {
				t.Fatalf("after release %+v", d2)
			}
			do(t, d2.Ack())
		})
		t.Run("visibility timeout reclaims", func(t *testing.T) {
			o := testOptions()
			o.VisibilityTimeout = 100 * time.Millisecond
			q := mustReliable(t, e, "vis", o)
			do(t, q.Push([]byte("x")))
			d1 := do(t, q.Pop())
			e.advance(60 * time.Millisecond)
			do(t, d1.Extend())
			e.advance(60 * time.Millisecond)
			wantErr(t, q.Pop(), ErrEmpty) // extended: still d1's
			e.advance(60 * time.Millisecond)
			d2 := do(t, q.Pop())
			if d2.ID != d1.ID || d2.Deliveries != 2 {
				t.Fatalf("reclaimed %+v", d2)
			}
			wantErr(t, d1.Extend(), ErrNotHeld)
			wantErr(t, d1.Nack(0), ErrNotHeld)
			do(t, d2.Extend())
			if st := do(t, q.Stats()); st.Reclaimed != 1 {
				t.Fatalf("stats %+v", st)
			}
			do(t, d2.Ack())
		})
		t.Run("reclaims past max retries dead-letter", func(t *testing.T) {
			o := testOptions()
			o.VisibilityTimeout = 50 * time.Millisecond
			q := mustReliable(t, e, "poison", o)
			do(t, q.Push([]byte("p")))
			for i := 1; i <= 3; i++ {
				d := do(t, q.Pop())
				if d.Deliveries != i {
					t.Fatalf("delivery %d: %+v", i, d)
				}
				e.advance(80 * time.Millisecond) // the consumer "died"
			}
			wantErr(t, q.Pop(), ErrEmpty)
			if n := do(t, q.DeadLetters().Length()); n != 1 {
				t.Fatalf("dead letters %d", n)
			}
		})
		t.Run("dead letters: disabled, max length, requeue all, purge", func(t *testing.T) {
			o := testOptions()
			o.MaxRetries = 0
			o.DeadLetter.MaxLength = 2
			q := mustReliable(t, e, "dlq", o)
			for i := 0; i < 3; i++ {
				do(t, q.Push([]byte(fmt.Sprint(i))))
				do(t, do(t, q.Pop()).Nack(0))
			}
			dl := q.DeadLetters()
			letters := do(t, dl.Range(0, 10))
			if len(letters) != 2 || string(letters[0].Body) != "1" || string(letters[1].Body) != "2" {
				t.Fatalf("letters %+v", letters)
			}
			if got := do(t, dl.Range(1, 10)); len(got) != 1 || string(got[0].Body) != "2" {
				t.Fatalf("range(1) %+v", got)
			}
			if got := do(t, dl.Range(5, 10)); len(got) != 0 {
				t.Fatalf("range(5) %+v", got)
			}
			wantErr(t, dl.Range(-1, 1), ErrInvalid)
			if st := do(t, q.Stats()); st.DeadDropped != 1 {
				t.Fatalf("stats %+v", st)
			}
			if n := do(t, dl.RequeueAll()); n != 2 {
				t.Fatalf("requeued %d", n)
			}
			if n := do(t, q.Length()); n != 2 {
				t.Fatalf("length %d", n)
			}
			for i := 0; i < 2; i++ {
				do(t, do(t, q.Pop()).Nack(0))
			}
			if n := do(t, dl.Purge()); n != 2 {
				t.Fatalf("purged %d", n)
			}

			o.DeadLetter.Enabled = false
			q2 := mustReliable(t, e, "dlq-off", o)
			do(t, q2.Push([]byte("x")))
			if r := do(t, do(t, q2.Pop()).Nack(0)); !r.DeadLettered {
				t.Fatal("not dead-lettered")
			}
			if n := do(t, q2.DeadLetters().Length()); n != 0 {
				t.Fatalf("dead letters %d with dead letters disabled", n)
			}
			if st := do(t, q2.Stats()); st.DeadDropped != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
		t.Run("requeue into a full queue", func(t *testing.T) {
			o := testOptions()
			o.MaxRetries = 0
			o.MaxLength = 1
			q := mustReliable(t, e, "requeue-full", o)
			do(t, q.Push([]byte("a")))
			do(t, do(t, q.Pop()).Nack(0))
			do(t, q.Push([]byte("b")))
			letters := do(t, q.DeadLetters().Range(0, 1))
			wantErr(t, q.DeadLetters().Requeue(letters[0].ID), ErrFull)
			n := wantErr(t, q.DeadLetters().RequeueAll(), ErrFull)
			if n != 0 {
				t.Fatalf("requeued %d into a full queue", n)
			}
		})
		t.Run("message ttl", func(t *testing.T) {
			o := testOptions()
			o.MessageTTL = e.span(50 * time.Millisecond)
			q := mustReliable(t, e, "ttl", o)
			do(t, q.Push([]byte("old")))
			e.advance(e.span(120 * time.Millisecond))
			do(t, q.Push([]byte("new")))
			d := do(t, q.Pop())
			if string(d.Body) != "new" {
				t.Fatalf("popped %q", d.Body)
			}
			do(t, d.Ack())
			if st := do(t, q.Stats()); st.Expired != 1 || st.Length != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
		t.Run("purge", func(t *testing.T) {
			q := mustReliable(t, e, "purge", testOptions())
			do(t, q.PushBatch([][]byte{[]byte("1"), []byte("2")}))
			d := do(t, q.Pop())
			if n := do(t, q.Purge()); n != 2 {
				t.Fatalf("purged %d", n)
			}
			wantErr(t, d.Ack(), ErrNotHeld)
			wantErr(t, q.Pop(), ErrEmpty)
			do(t, q.Push([]byte("3")))
			if d := do(t, q.Pop()); string(d.Body) != "3" {
				t.Fatalf("after purge %q", d.Body)
			}
		})
		t.Run("foreign handles and bad input", func(t *testing.T) {
			a := mustReliable(t, e, "a", testOptions())
			b := mustReliable(t, e, "b", testOptions())
			do(t, a.Push([]byte("x")))
			d := do(t, a.Pop())
			wantErr(t, b.Ack(d), ErrForeign)
			wantErr(t, b.Nack(d, 0), ErrForeign)
			wantErr(t, b.Extend(d), ErrForeign)
			wantErr(t, b.Release(d), ErrForeign)
			wantErr(t, a.Nack(d, -time.Second), ErrInvalid)
			wantErr(t, a.Ack(nil), ErrInvalid)
			do(t, a.Ack(d))
			bq, _ := e.b.Broadcast("bq", testOptions())
			g, _ := bq.Group("g")
			wantErr(t, g.Ack(d), ErrForeign)
			if _, err := e.b.Plain("a", testOptions()); !errors.Is(err, ErrConflict) {
				t.Fatalf("reopen as plain: %v", err)
			}
		})
		t.Run("waiters get pushes and reclaims", func(t *testing.T) {
			o := testOptions()
			o.VisibilityTimeout = 100 * time.Millisecond
			q := mustReliable(t, e, "wait", o)
			ch, _ := popWait[*Delivery](q, time.Minute)
			do(t, q.Push([]byte("x")))
			r := await(t, ch)
			if r.err != nil || string(r.v.Body) != "x" {
				t.Fatalf("got %+v %v", r.v, r.err)
			}
			ch2, _ := popWait[*Delivery](q, time.Minute)
			e.advance(150 * time.Millisecond) // r.v is abandoned
			r2 := await(t, ch2)
			if r2.err != nil || r2.v.ID != r.v.ID || r2.v.Deliveries != 2 {
				t.Fatalf("reclaimed %+v %v", r2.v, r2.err)
			}
			do(t, r2.v.Ack())
			ch3, _ := popWait[*Delivery](q, time.Minute)
			do(t, q.Push([]byte("y")))
			d := await(t, ch3).v
			do(t, d.Nack(100*time.Millisecond))
			ch4, _ := popWait[*Delivery](q, time.Minute)
			e.advance(120 * time.Millisecond)
			if r := await(t, ch4); r.err != nil || r.v.ID != d.ID || r.v.Deliveries != 2 {
				t.Fatalf("retried %+v %v", r.v, r.err)
			}
		})
		t.Run("consume acks, retries and dead-letters", func(t *testing.T) {
			o := testOptions()
			o.MaxRetries = 1
			q := mustReliable(t, e, "consume", o)
			const n = 100
			var mu sync.Mutex
			seen := map[string]int{}
			var failures []error
			fin := make(chan struct{})
			stop, err := q.Consume(ConsumeOptions{Concurrency: 8, OnError: func(err error) {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
			}}, func(d *Delivery, done func(error)) {
				mu.Lock()
				seen[string(d.Body)]++
				c := seen[string(d.Body)]
				total := 0
				for _, v := range seen {
					total += v
				}
				if total == n+1 { // "bad" is delivered twice, then dead-lettered
					close(fin)
				}
				mu.Unlock()
				if string(d.Body) == "bad" {
					go done(fmt.Errorf("attempt %d failed", c))
					return
				}
				go done(nil)
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n-1; i++ {
				do(t, q.Push([]byte(fmt.Sprint(i))))
			}
			do(t, q.Push([]byte("bad")))
			await(t, fin)
			deadline := time.Now().Add(10 * time.Second)
			for do(t, q.DeadLetters().Length()) != 1 || do(t, q.Length()) != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("dead letters %d, length %d", do(t, q.DeadLetters().Length()), do(t, q.Length()))
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for k, c := range seen {
				if k != "bad" && c != 1 {
					t.Fatalf("message %s handled %d times", k, c)
				}
			}
			var herr *HandlerError
			if len(failures) != 2 || !errors.As(failures[0], &herr) || herr.ID == "" {
				t.Fatalf("failures %v", failures)
			}
		})
		t.Run("stop releases what is in flight", func(t *testing.T) {
			q := mustReliable(t, e, "stop", testOptions())
			do(t, q.PushBatch([][]byte{[]byte("1"), []byte("2"), []byte("3")}))
			started := make(chan *Delivery, 3)
			stop, _ := q.Consume(ConsumeOptions{Concurrency: 3}, func(d *Delivery, done func(error)) {
				started <- d // never done: the handlers hang
			})
			for i := 0; i < 3; i++ {
				await(t, started)
			}
			ctx, cancel := contextWithTimeout(50 * time.Millisecond)
			defer cancel()
			if err := stop(ctx); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for i := 0; i < 3; i++ {
				d := do(t, q.Pop())
				if d.Deliveries != 1 {
					t.Fatalf("released delivery counted: %+v", d)
				}
				got[string(d.Body)] = true
				do(t, d.Ack())
			}
			if len(got) != 3 {
				t.Fatalf("got %v", got)
			}
		})
	})
}

func TestBroadcastConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		join := func(t *testing.T, q Broadcast, name string) Group {
			t.Helper()
			g, err := q.Group(name)
			if err != nil {
				t.Fatal(err)
			}
			do(t, g.Join())
			return g
		}
		drain := func(t *testing.T, g Group) []string {
			t.Helper()
			var out []string
			for {
				d, err := g.Pop().Do(t.Context())
				if errors.Is(err, ErrEmpty) {
					return out
				}
				if err != nil {
					t.Fatal(err)
				}
				if d.Group != g.Name() {
					t.Fatalf("delivery group %q, want %q", d.Group, g.Name())
				}
				out = append(out, string(d.Body))
				do(t, d.Ack())
			}
		}
		t.Run("every group gets every message", func(t *testing.T) {
			q, _ := e.b.Broadcast("events", testOptions())
			a, b := join(t, q, "a"), join(t, q, "b")
			for i := 0; i < 3; i++ {
				do(t, q.Push([]byte(fmt.Sprint(i))))
			}
			late := join(t, q, "late")
			do(t, q.Push([]byte("3")))
			if got := drain(t, a); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
				t.Fatalf("a got %q", got)
			}
			if got := drain(t, late); !slices.Equal(got, []string{"3"}) {
				t.Fatalf("late got %q", got)
			}
			st := do(t, q.Stats())
			if len(st.Groups) != 3 || st.Groups[1].Name != "b" || st.Groups[1].Ready != 4 {
				t.Fatalf("stats %+v", st)
			}
			if got := drain(t, b); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
				t.Fatalf("b got %q", got)
			}
			do(t, q.Push([]byte("4"))) // trims what every group acknowledged
			if n := do(t, q.Length()); n != 1 {
				t.Fatalf("length %d after all acked, want 1", n)
			}
			if st := do(t, q.Stats()); st.Trimmed != 0 {
				t.Fatalf("acknowledged entries counted as trimmed: %+v", st)
			}
		})
		t.Run("max length trims the oldest, counted", func(t *testing.T) {
			o := testOptions()
			o.MaxLength = 3
			q, _ := e.b.Broadcast("trim", o)
			g := join(t, q, "slow")
			for i := 0; i < 5; i++ {
				do(t, q.Push([]byte(fmt.Sprint(i))))
			}
			if got := drain(t, g); !slices.Equal(got, []string{"2", "3", "4"}) {
				t.Fatalf("got %q", got)
			}
			if st := do(t, q.Stats()); st.Trimmed != 2 || st.Length != 3 {
				t.Fatalf("stats %+v", st)
			}
		})
		t.Run("retries and dead letters per group", func(t *testing.T) {
			o := testOptions()
			o.MaxRetries = 0
			q, _ := e.b.Broadcast("dead", o)
			a, b := join(t, q, "a"), join(t, q, "b")
			do(t, q.Push([]byte("x")))
			da := do(t, a.Pop())
			if r := do(t, da.Nack(0)); !r.DeadLettered {
				t.Fatal("not dead-lettered")
			}
			letters := do(t, q.DeadLetters().Range(0, 10))
			if len(letters) != 1 || letters[0].Group != "a" {
				t.Fatalf("letters %+v", letters)
			}
			if got := drain(t, b); !slices.Equal(got, []string{"x"}) {
				t.Fatalf("b got %q", got)
			}
			do(t, q.DeadLetters().Requeue(letters[0].ID))
			if got := drain(t, a); !slices.Equal(got, []string{"x"}) {
				t.Fatalf("a got %q after requeue", got)
			}
			if got := drain(t, b); len(got) != 0 {
				t.Fatalf("b got %q: a requeue is for its group only", got)
			}
		})
		t.Run("remove group", func(t *testing.T) {
			q, _ := e.b.Broadcast("remove", testOptions())
			join(t, q, "gone")
			if !do(t, q.RemoveGroup("gone")) {
				t.Fatal("remove reported no group")
			}
			if do(t, q.RemoveGroup("gone")) {
				t.Fatal("second remove reported a group")
			}
			do(t, q.Push([]byte("x")))
			do(t, q.Push([]byte("y")))
			if n := do(t, q.Length()); n > 1 {
				t.Fatalf("length %d: entries kept for no group", n)
			}
		})
		t.Run("subscribe", func(t *testing.T) {
			q, _ := e.b.Broadcast("sub", testOptions())
			const n = 50
			var mu sync.Mutex
			seen := map[string][]string{}
			fin := make(chan struct{})
			var stops []StopFunc
			for _, grp := range []string{"ui", "achievements", "log"} {
				stop, err := q.Subscribe(t.Context(), grp, ConsumeOptions{Concurrency: 2}, func(d *Delivery, done func(error)) {
					mu.Lock()
					seen[d.Group] = append(seen[d.Group], string(d.Body))
					total := 0
					for _, v := range seen {
						total += len(v)
					}
					if total == 3*n {
						close(fin)
					}
					mu.Unlock()
					done(nil)
				})
				if err != nil {
					t.Fatal(err)
				}
				stops = append(stops, stop)
			}
			for i := 0; i < n; i++ {
				do(t, q.Push([]byte(fmt.Sprint(i))))
			}
			await(t, fin)
			for _, s := range stops {
				if err := s(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			for grp, got := range seen {
				sort.Strings(got)
				if len(got) != n || len(slices.Compact(got)) != n {
					t.Fatalf("group %s saw %d messages (%d distinct)", grp, len(got), len(slices.Compact(got)))
				}
			}
		})
		t.Run("bad input", func(t *testing.T) {
			q, _ := e.b.Broadcast("bad", testOptions())
			if _, err := q.Group(""); !errors.Is(err, ErrInvalid) {
				t.Fatalf("empty group: %v", err)
			}
		})
	})
}
