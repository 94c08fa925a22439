package scheduler

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/internal/testclock"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// Real time and Redis TIME: three engines ("processes") whose clocks are
// -1 s, 0 and +1 s off run one distributed 100 ms interval task for 3 s;
// the engine running one chosen firing is killed mid-run (it stops
// renewing its claim). Every fire time in the window runs once, except the
// victim, which runs twice: once on the killed engine, once recovered
// elsewhere after its lease. A fire time that every engine reached too late
// (a machine starved of CPU for over a period: docs/scheduler.md, Misfires)
// may instead be missed, but then it is told: one missed event of one
// engine stands for it, and it did not run. And a fire time whose runner,
// starved for longer than the lease, lost its claim (it logs so) may run
// twice, the second run flagged recovered: at least once, as documented.
func TestRealTimeExactlyOnce(t *testing.T) {
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			st := NewRedis(c, testredis.Prefix(t), RedisOptions{})
			t.Cleanup(func() { st.Close() })
			var (
				mu     sync.Mutex
				runs   []ran
				missed []Event
				lapsed = &lapses{fires: map[int64]bool{}}
				late   []time.Duration
				victim int64
				killed = -1
			)
			var es []*Engine
			kill := make(chan int, 1)
			for i, off := range []time.Duration{-time.Second, 0, time.Second} {
				e, err := New(Config{Store: st, Clock: offsetClock{off}, Log: slog.New(lapsed), Events: func(ev Event) {
					if ev.Kind == EventMissed {
						mu.Lock()
						missed = append(missed, ev)
						mu.Unlock()
					}
				}})
				if err != nil {
					t.Fatal(err)
				}
				es = append(es, e)
				o := e.DefaultOptions()
				o.Distributed, o.LockTTL, o.Overlap = true, 500*time.Millisecond, OverlapAllow
				do(t, e.Register(Task{Name: "hb", Schedule: every(t, 100*time.Millisecond), Options: o, Run: func(f Firing, done func(error)) {
					mu.Lock()
					runs = append(runs, ran{f, i})
					if !f.Recovered {
						late = append(late, time.Since(f.Scheduled)) // Scheduled is on Redis TIME
					}
					if victim == 0 && len(runs) == 8 {
						victim, killed = f.Scheduled.UnixMilli(), i
						mu.Unlock()
						kill <- i
						return // never done: the engine dies mid-run
					}
					mu.Unlock()
					done(nil)
				}}))
			}
			stop := time.After(3 * time.Second)
		loop:
			for {
				select {
				case i := <-kill:
					es[i].kill()
				case <-stop:
					break loop
				}
			}
			end := time.Now()
			// Pause from one process reaches the others over the control
			// channel (logged, not asserted: timing belongs to benchmarks).
			live := (killed + 1) % len(es)
			t0 := time.Now()
			do(t, es[live].Pause("hb"))
			for i, e := range es {
				if i != killed {
					awaitLocal(t, e, func() bool { tk := e.tasks["hb"]; return tk != nil && tk.paused }, "paused")
				}
			}
			t.Logf("pause applied in every live process after %v", time.Since(t0))
			for i, e := range es {
				if i != killed {
					closeEngine(t, e)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			// Firings claimed at the very end may be left to lapse by Close.
			var in []ran
			for _, r := range runs {
				if r.Scheduled.Before(end.Add(-time.Second)) {
					in = append(in, r)
				}
			}
			twice := map[int64]bool{victim: true}
			for f, rs := range byFire(in) {
				if lapsed.has(f) && slices.ContainsFunc(rs, func(r ran) bool { return r.Recovered }) {
					twice[f] = true
				}
			}
			told := wantEachOnceOrTold(t, in, missed, 100*time.Millisecond, twice)
			for _, r := range byFire(in)[victim] {
				if r.Recovered && r.engine == killed {
					t.Errorf("the killed engine recovered its own firing")
				}
			}
			slices.Sort(late)
			t.Logf("%d runs, %d fire times missed and told, %d run twice after a lapsed claim; start lateness (real clock vs Redis TIME) p50 %v max %v",
				len(in), told, len(twice)-1, late[len(late)/2], late[len(late)-1])
		})
	}
}

// lapses is a slog.Handler that keeps the fire times of the firings whose
// runner logged that it lost their claim.
type lapses struct {
	mu    sync.Mutex
	fires map[int64]bool
}

func (l *lapses) Enabled(context.Context, slog.Level) bool { return true }
func (l *lapses) Handle(_ context.Context, rec slog.Record) error {
	if !strings.Contains(rec.Message, "lost the claim of a running firing") &&
		!strings.Contains(rec.Message, "finished after another process took its claim over") {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "fire" {
			l.mu.Lock()
			l.fires[a.Value.Time().UnixMilli()] = true
			l.mu.Unlock()
		}
		return true
	})
	return nil
}
func (l *lapses) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lapses) WithGroup(string) slog.Handler      { return l }

func (l *lapses) has(f int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fires[f]
}

// wantEachOnceOrTold is wantEachOnce over the fire times from the first run
// of rs to its last, where a fire time may instead be missed if a missed
// event told it: told once (by one engine), and then not run at all. It
// returns how many fire times of the window were told missed.
func wantEachOnceOrTold(t *testing.T, rs []ran, missed []Event, period time.Duration, twice map[int64]bool) int {
	t.Helper()
	told := map[int64]int{}
	for _, ev := range missed {
		n := int64(0)
		for f := ev.Firing.Scheduled; !f.After(ev.Last); f = f.Add(period) {
			told[f.UnixMilli()]++
			n++
		}
		if n != ev.Count {
			t.Errorf("a missed event from %v to %v counts %d firings, its span holds %d", ev.Firing.Scheduled, ev.Last, ev.Count, n)
		}
	}
	m := byFire(rs)
	var fires []int64
	for f := range m {
		fires = append(fires, f)
	}
	slices.Sort(fires)
	if len(fires) < 2 {
		t.Fatalf("only %d fire times ran", len(fires))
	}
	n := 0
	for f := fires[0]; f <= fires[len(fires)-1]; f += period.Milliseconds() {
		want := 1
		if twice[f] {
			want = 2
		}
		switch got := len(m[f]); {
		case told[f] > 0 && (got > 0 || told[f] > 1):
			t.Errorf("fire time %s ran %d times and was told missed %d times", time.UnixMilli(f).UTC().Format("15:04:05.000"), got, told[f])
		case told[f] > 0:
			n++
		case got != want:
			t.Errorf("fire time %s ran %d times, want %d (and no missed event told it): %+v", time.UnixMilli(f).UTC().Format("15:04:05.000"), got, want, m[f])
		}
	}
	for f := range m {
		if (f-fires[0])%period.Milliseconds() != 0 {
			t.Errorf("fire time %d is off the schedule", f)
		}
	}
	return n
}

// privateStore is a Store on a private server the test may stop, on the
// fake clock; its client does not retry, so an outage is seen at once.
func privateStore(t *testing.T, clk *testclock.Clock) (*testredis.Server, *Redis) {
	srv := testredis.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	st := NewRedis(c, testredis.Prefix(t), RedisOptions{Now: clk.Now})
	t.Cleanup(func() { st.Close() })
	return srv, st
}

// claimFailures reports how many claims of task in a row the Store did
// not answer.
func claimFailures(e *Engine, task string) int {
	n := 0
	_ = e.call(func() {
		if t := e.tasks[task]; t != nil {
			n = t.claimFails
		}
	})
	return n
}

func awaitFailures(t *testing.T, e *Engine, task string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for claimFailures(e, task) < n {
		settle(t, e)
		if time.Now().After(deadline) {
			t.Fatalf("the engine saw %d failed claims, want %d", claimFailures(e, task), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Redis stopped across a firing. "wait": the firing runs once Redis is
// back (here a restart that lost every key: the engine re-creates the
// record, keeping its cursor) if within catch_up, counted late; else it is
// counted missed. "run_local": it runs at once, locally.
func TestRedisDownAtAFiring(t *testing.T) {
	for _, c := range []struct {
		name    string
		policy  RedisDown
		down    time.Duration // how long after the firing Redis comes back
		wantRun bool
	}{
		{"wait/within-catch-up", RedisDownWait, 2 * time.Second, true},
		{"wait/beyond-catch-up", RedisDownWait, 7 * time.Second, false},
		{"run_local", RedisDownRunLocal, 2 * time.Second, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := testclock.New()
			srv, st := privateStore(t, clk)
			cl := &cluster{t: t, clk: clk, st: st, ev: &events{}}
			e := cl.add(0)
			var log runLog
			cl.registerOn(0, e, "job", every(t, 10*time.Second), func(o *Options) {
				o.CatchUp, o.OnRedisDown = 5*time.Second, c.policy
			}, log.run)
			cl.advance(10*time.Second, 500*time.Millisecond)
			if n := len(log.all()); n != 1 {
				t.Fatalf("%d runs before the outage", n)
			}
			srv.Stop()
			cl.advance(10*time.Second, 500*time.Millisecond) // the second firing comes due
			awaitFailures(t, e, "job", 1)
			if c.policy == RedisDownRunLocal {
				rs := log.all()
				if len(rs) != 2 || !rs[1].Local {
					t.Fatalf("run_local: runs %+v; want the second firing run locally", rs)
				}
				srv.Start()
				return
			}
			if n := len(log.all()); n != 1 {
				t.Fatalf("wait: %d runs while Redis is down", n)
			}
			cl.advance(c.down-500*time.Millisecond, 500*time.Millisecond)
			srv.Start()
			deadline := time.Now().Add(10 * time.Second)
			for {
				cl.clk.Advance(50 * time.Millisecond) // retries come every <= 1 s
				cl.settle()
				info, err := e.Get("job").Do(t.Context())
				if err == nil && (info.RunCount+info.Missed) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no outcome after Redis came back: %+v, %v", info, err)
				}
			}
			rs := log.all()
			info := do(t, e.Get("job"))
			if c.wantRun {
				if len(rs) != 2 || !rs[1].Late || !rs[1].Scheduled.Equal(rs[0].Scheduled.Add(10*time.Second)) {
					t.Fatalf("runs %+v; want the second firing, late", rs)
				}
				if info.Late != 1 || info.RunCount != 1 {
					t.Fatalf("Info %+v; want late 1 on the re-created record", info)
				}
			} else if len(rs) != 1 || info.Missed != 1 || info.RunCount != 0 {
				t.Fatalf("runs %d, Info %+v; want the firing counted missed", len(rs), info)
			}
			// The schedule goes on.
			cl.advance(10*time.Second, 500*time.Millisecond)
			if n := len(log.all()); n != len(rs)+1 {
				t.Fatalf("%d runs after recovery; want %d", n, len(rs)+1)
			}
		})
	}
}

// Redis stopped across several firings of a 1 s task ("wait"): once it is
// back, the latest firing within catch_up runs, late, and the firings
// before it, which that claim counts as missed, are told as missed events
// (not only added to the stored counter).
func TestRedisDownMissedFiringsAreTold(t *testing.T) {
	clk := testclock.New()
	srv, st := privateStore(t, clk)
	cl := &cluster{t: t, clk: clk, st: st, ev: &events{}}
	e := cl.add(0)
	var log runLog
	cl.registerOn(0, e, "job", every(t, time.Second), func(o *Options) { o.CatchUp = 5 * time.Second }, log.run)
	cl.advance(time.Second, 100*time.Millisecond)
	if n := len(log.all()); n != 1 {
		t.Fatalf("%d runs before the outage", n)
	}
	srv.Stop()
	cl.advance(time.Second, 100*time.Millisecond)
	awaitFailures(t, e, "job", 1)
	cl.advance(2500*time.Millisecond, 500*time.Millisecond) // 2 s, 3 s and 4 s come due
	srv.Start()
	deadline := time.Now().Add(10 * time.Second)
	for len(log.all()) < 2 {
		cl.clk.Advance(50 * time.Millisecond)
		cl.settle()
		if time.Now().After(deadline) {
			t.Fatalf("no run after Redis came back")
		}
	}
	rs := log.all()
	if !rs[1].Late {
		t.Fatalf("the run after the outage %+v is not late", rs[1])
	}
	info := do(t, e.Get("job"))
	var told int64
	cl.ev.mu.Lock()
	for _, ev := range cl.ev.all {
		if ev.Kind == EventMissed {
			told += ev.Count
		}
	}
	cl.ev.mu.Unlock()
	if info.Missed == 0 || told != info.Missed {
		t.Fatalf("missed %d counted, %d told by missed events; want them equal and > 0 (runs %+v)", info.Missed, told, rs)
	}
}

// A claim whose round trip waits out an outage (the server paused: the
// client waits instead of failing, as go-redis does while it retries)
// returns a firing that starts long after its fire time: it is Late and
// counted so, though no claim failed.
func TestClaimThatWaitedOutAnOutageIsLate(t *testing.T) {
	clk := testclock.New()
	srv := testredis.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 4 * time.Second})
	t.Cleanup(func() { c.Close() })
	st := NewRedis(c, testredis.Prefix(t), RedisOptions{Now: clk.Now})
	t.Cleanup(func() { st.Close() })
	cl := &cluster{t: t, clk: clk, st: st, ev: &events{}}
	e := cl.add(0)
	var log runLog
	cl.registerOn(0, e, "job", every(t, 10*time.Second), nil, log.run)
	cl.advance(19500*time.Millisecond, 500*time.Millisecond) // ran at 10 s
	if err := c.Do(t.Context(), "CLIENT", "PAUSE", "1500", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(500 * time.Millisecond) // the claim of the 20 s firing goes out
	for deadline := time.Now().Add(time.Second); !e.inflightNow(); {
		if time.Now().After(deadline) {
			t.Fatal("the claim did not go out")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Advance(3 * time.Second) // the claim is answered at 23 s
	cl.settle()
	rs := log.all()
	if claimFailures(e, "job") != 0 || len(rs) != 2 || rs[0].Late || !rs[1].Late {
		t.Fatalf("runs %+v (claim failures %d); want the second run late", rs, claimFailures(e, "job"))
	}
	if info := do(t, e.Get("job")); info.Late != 1 {
		t.Fatalf("Info %+v; want late 1", info)
	}
}
