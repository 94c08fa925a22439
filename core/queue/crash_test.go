package queue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// process is one simulated process: its own client, bus and backend, so
// that it can die (its client closed) without the others noticing.
type process struct {
	c   redis.UniversalClient
	bus *pubsub.Redis
	b   *Redis
}

// newClient connects a new client to deployment name ("redis", "cluster",
// "sentinel").
func newClient(t *testing.T, name string) redis.UniversalClient {
	switch name {
	case "cluster":
		return testredis.Cluster(t)
	case "sentinel":
		return testredis.Sentinel(t)
	}
	return testredis.Standalone(t)
}

// newProcess opens a process with its own client to deployment name under
// prefix.
func newProcess(t *testing.T, name, prefix, consumer string) *process {
	t.Helper()
	own := newClient(t, name)
	p := &process{c: own, bus: pubsub.NewRedis(own, prefix, pubsub.Events{})}
	p.b = NewRedis(own, prefix, p.bus, RedisOptions{Consumer: consumer})
	p.b.t = fastTiming()
	t.Cleanup(p.close)
	return p
}

func (p *process) close() {
	p.b.Close()
	p.bus.Close()
	p.c.Close()
}

// die makes the process vanish: nothing it still holds is released.
func (p *process) die() { p.c.Close() }

func TestReclaimAfterAConsumerGoesSilent(t *testing.T) {
	forEachRedis(t, func(t *testing.T, e env) {
		o := testOptions()
		o.VisibilityTimeout = time.Second
		a := mustReliable(t, e, "silent", o)
		b, _ := e.second(t).Reliable("silent", o)
		for i := 0; i < 5; i++ {
			do(t, a.Push([]byte(fmt.Sprint(i))))
		}
		var held []*Delivery
		for i := 0; i < 5; i++ {
			held = append(held, do(t, a.Pop()))
		}
		silentSince := time.Now() // a stops extending from here on

		got := make(chan *Delivery, 5)
		stop, _ := b.Consume(ConsumeOptions{Concurrency: 5}, func(d *Delivery, done func(error)) {
			got <- d
			done(nil)
		})
		defer stop(context.Background())
		var worst time.Duration
		ids := map[string]bool{}
		for i := 0; i < 5; i++ {
			d := await(t, got)
			worst = max(worst, time.Since(silentSince))
			if d.Deliveries != 2 {
				t.Fatalf("reclaimed delivery %+v, want deliveries 2", d)
			}
			ids[d.ID] = true
		}
		for _, d := range held {
			if !ids[d.ID] {
				t.Fatalf("message %s not reclaimed", d.ID)
			}
			wantErr(t, d.Extend(), ErrNotHeld)
		}
		t.Logf("visibility timeout %v: last message reclaimed %v after its holder went silent", o.VisibilityTimeout, worst)
		if st := do(t, b.Stats()); st.Reclaimed != 5 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestManyConsumersOneDiesMidMessage(t *testing.T) {
	const n = 10000
	for _, name := range sortedNames(testredis.Backends(t)) {
		t.Run(name, func(t *testing.T) {
			prefix := testredis.Prefix(t)
			o := testOptions()
			o.VisibilityTimeout = time.Second
			o.MaxLength = 2 * n
			o.MaxRetries = 10

			var mu sync.Mutex
			processed := map[string]int{}
			victimHeld := map[string]bool{}
			var dead atomic.Bool
			var procs []*process
			var stops []StopFunc
			for i := 0; i < 3; i++ {
				p := newProcess(t, name, prefix, fmt.Sprintf("consumer-%d", i))
				procs = append(procs, p)
				q, _ := p.b.Reliable("work", o)
				victim := i == 2
				var seen atomic.Int64
				stop, err := q.Consume(ConsumeOptions{
					Concurrency: 8,
					Block:       time.Second,
					Alive:       func() bool { return !victim || !dead.Load() },
				}, func(d *Delivery, done func(error)) {
					if victim {
						mu.Lock()
						victimHeld[string(d.Body)] = true
						mu.Unlock()
						if dead.Load() {
							return // a dead process finishes nothing
						}
						if seen.Add(1) == 1000 {
							dead.Store(true) // dies in the middle of this message
							procs[2].die()
							return
						}
					}
					mu.Lock()
					processed[string(d.Body)]++
					mu.Unlock()
					done(nil)
				})
				if err != nil {
					t.Fatal(err)
				}
				stops = append(stops, stop)
			}
			producer := newProcess(t, name, prefix, "producer")
			pq, _ := producer.b.Reliable("work", o)
			batch := make([][]byte, 0, 100)
			for i := 0; i < n; i++ {
				batch = append(batch, []byte(fmt.Sprint(i)))
				if len(batch) == cap(batch) {
					do(t, pq.PushBatch(batch))
					batch = batch[:0]
				}
			}
			deadline := time.Now().Add(2 * time.Minute)
			for {
				mu.Lock()
				done := len(processed)
				mu.Unlock()
				st := do(t, pq.Stats())
				if done == n && st.Length == 0 {
					if st.InFlight != 0 || st.Retrying != 0 || st.DeadLettered != 0 {
						t.Fatalf("left over: %+v", st)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("processed %d of %d; stats %+v", done, n, st)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !dead.Load() {
				t.Fatal("the victim never died: it got fewer than 1000 messages")
			}
			for _, s := range stops[:2] {
				if err := s(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			dups := 0
			for m, k := range processed {
				if k > 1 {
					dups++
					if !victimHeld[m] {
						t.Fatalf("message %s processed %d times but the dead consumer never held it", m, k)
					}
				}
			}
			st := do(t, pq.Stats())
			t.Logf("%d messages, all processed; %d duplicates (all held by the dead consumer); %d reclaimed", n, dups, st.Reclaimed)
		})
	}
}

// TestBroadcastGroupOfflineCatchesUp: three groups in three processes; one
// group is offline for part of the run and catches up; each group sees
// every message exactly once.
func TestBroadcastGroupOfflineCatchesUp(t *testing.T) {
	const n = 2000
	run := func(t *testing.T, open func(i int) Backend) {
		o := testOptions()
		o.MaxLength = 2 * n
		var mu sync.Mutex
		seen := map[string]map[string]int{}
		count := func() int {
			mu.Lock()
			defer mu.Unlock()
			total := 0
			for _, m := range seen {
				total += len(m)
			}
			return total
		}
		handler := func(d *Delivery, done func(error)) {
			mu.Lock()
			if seen[d.Group] == nil {
				seen[d.Group] = map[string]int{}
			}
			seen[d.Group][string(d.Body)]++
			mu.Unlock()
			done(nil)
		}
		groups := []string{"ui", "achievements", "audit"}
		stops := map[string]StopFunc{}
		for i, g := range groups {
			q, _ := open(i).Broadcast("game_events", o)
			stop, err := q.Subscribe(context.Background(), g, ConsumeOptions{Concurrency: 4}, handler)
			if err != nil {
				t.Fatal(err)
			}
			stops[g] = stop
		}
		producer, _ := open(3).Broadcast("game_events", o)
		for i := 0; i < n; i++ {
			if i == n/4 {
				if err := stops["audit"](context.Background()); err != nil { // goes offline
					t.Fatal(err)
				}
			}
			if i == 3*n/4 { // comes back, in a new process
				q, _ := open(4).Broadcast("game_events", o)
				stop, err := q.Subscribe(context.Background(), "audit", ConsumeOptions{Concurrency: 4}, handler)
				if err != nil {
					t.Fatal(err)
				}
				stops["audit"] = stop
			}
			do(t, producer.Push([]byte(fmt.Sprint(i))))
		}
		deadline := time.Now().Add(time.Minute)
		for count() < 3*n {
			if time.Now().After(deadline) {
				t.Fatalf("saw %d of %d", count(), 3*n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, s := range stops {
			if err := s(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, g := range groups {
			if len(seen[g]) != n {
				t.Fatalf("group %s saw %d distinct messages, want %d", g, len(seen[g]), n)
			}
			for m, k := range seen[g] {
				if k != 1 {
					t.Fatalf("group %s saw message %s %d times", g, m, k)
				}
			}
		}
		st := do(t, producer.Stats())
		if st.Trimmed != 0 || !slices.EqualFunc(st.Groups, groups, func(s Stats, _ string) bool { return s.InFlight == 0 && s.Ready == 0 }) {
			t.Fatalf("stats %+v", st)
		}
	}
	t.Run("memory", func(t *testing.T) {
		b := NewMemory(MemoryOptions{})
		t.Cleanup(func() { b.Close() })
		run(t, func(int) Backend { return b })
	})
	for _, name := range sortedNames(testredis.Backends(t)) {
		t.Run(name, func(t *testing.T) {
			prefix := testredis.Prefix(t)
			run(t, func(i int) Backend { return newProcess(t, name, prefix, fmt.Sprintf("p%d", i)).b })
		})
	}
}
