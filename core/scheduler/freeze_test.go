package scheduler

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/internal/testclock"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// serverPID is the pid of the redis-server admin talks to.
func serverPID(t *testing.T, admin *redis.Client) int {
	t.Helper()
	info, err := admin.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if pid, err := strconv.Atoi(v); err == nil && pid > 0 {
				return pid
			}
		}
	}
	t.Fatal("no process_id in INFO server")
	return 0
}

// A Redis frozen by SIGSTOP across a firing of a 1 s distributed task
// (lock_ttl 30 s, overlap "skip"): the claims the client gave up on (read
// timeout 500 ms) stay in the server's socket buffers and are executed
// when it runs again, recording a claim with a 30 s lease that no process
// runs. Once the engine's own next claim is answered, that orphaned claim
// is dropped (counted and told as missed), so the latest firing due runs
// at once and the schedule goes on; the orphaned firing is not re-run as
// "recovered" when its lease would have passed, and no fire time runs
// twice. Time is the fake clock's (the scripts read it instead of TIME),
// so the bounds do not depend on the machine's speed.
func TestFrozenRedisOrphanedClaimDoesNotBlockFirings(t *testing.T) {
	// same: the server runs again while the orphaned claim's firing is
	// still the latest due. later: the freeze spans three more fire times,
	// and one more claim goes out (and times out) for the latest of them.
	for _, c := range []struct {
		name  string
		extra time.Duration
	}{{"same", 0}, {"later", 3 * time.Second}} {
		t.Run(c.name, func(t *testing.T) { testFrozenRedis(t, c.extra) })
	}
}

func testFrozenRedis(t *testing.T, extra time.Duration) {
	clk := testclock.New()
	srv, st := privateStore(t, clk)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { admin.Close() })
	cl := &cluster{t: t, clk: clk, st: st, ev: &events{}}
	e := cl.add(0)
	var log runLog
	cl.registerOn(0, e, "job", every(t, time.Second), func(o *Options) { o.LockTTL = 30 * time.Second }, log.run)
	cl.advance(time.Second, 100*time.Millisecond)
	if rs := log.all(); len(rs) != 1 {
		t.Fatalf("%d runs before the freeze, want 1", len(rs))
	}

	pid := serverPID(t, admin)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := true
	thaw := func() {
		if frozen {
			frozen = false
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(thaw)
	// The claim of the 2 s firing goes out and times out; two retries too.
	clk.Advance(time.Second)
	awaitFailures(t, e, "job", 1)
	for claimFailures(e, "job") < 3 {
		clk.Advance(100 * time.Millisecond)
		settle(t, e)
	}
	if extra > 0 {
		clk.Advance(extra)
		awaitFailures(t, e, "job", 4)
	}
	thaw()
	thawedAt := clk.Now()

	// The server runs what it had buffered: the first claim is recorded
	// (under the old code a lease until 31.98 s that nobody renews).
	runs := st.keys.SchedulerRuns("job")
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := admin.HLen(context.Background(), runs).Result()
		if err == nil && n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the claims sent while the server was stopped were not executed (HLEN %d, %v)", n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // whatever else the server had buffered

	// The next firing runs within an interval plus a claim retry, not
	// after the orphaned claim's lease (30 s).
	var first ran
	for first.Scheduled.IsZero() {
		if clk.Now().Sub(thawedAt) > 10*time.Second {
			t.Fatalf("no firing ran within 10 s (fake clock) after the server ran again; runs %+v, Info %+v",
				log.all(), do(t, e.Get("job")))
		}
		clk.Advance(100 * time.Millisecond)
		cl.settle()
		if rs := log.all(); len(rs) > 1 {
			first = rs[1]
		}
	}
	if d := first.Scheduled.Sub(thawedAt); d > 3*time.Second {
		t.Errorf("the first firing after the freeze is %v after the server ran again; want the latest due (within 3 s)", d)
	}
	t.Logf("first run after the freeze: fire %v after the thaw, started %v after it (fake clock)",
		first.Scheduled.Sub(thawedAt), clk.Now().Sub(thawedAt))

	// Past the orphaned lease: every firing from the first one after the
	// freeze runs once, nothing is recovered, and the missed firings are
	// counted and told alike.
	cl.advance(35*time.Second, 250*time.Millisecond)
	rs := log.all()
	seen := map[int64]bool{}
	for _, r := range rs {
		if r.Recovered {
			t.Errorf("fire %v re-ran as recovered though no runner died", r.Scheduled.Sub(thawedAt))
		}
		if seen[r.Scheduled.UnixMilli()] {
			t.Errorf("fire %v ran twice", r.Scheduled.Sub(thawedAt))
		}
		seen[r.Scheduled.UnixMilli()] = true
	}
	last := rs[len(rs)-1].Scheduled
	for f := first.Scheduled; !f.After(last); f = f.Add(time.Second) {
		if !seen[f.UnixMilli()] {
			t.Errorf("fire %v (after the freeze) did not run", f.Sub(thawedAt))
		}
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
	t.Logf("after the freeze: run_count %d, missed %d (told %d), skipped %d, late %d", info.RunCount, info.Missed, told, info.Skipped, info.Late)
	if info.Skipped != 0 || (extra > 0) != (info.Missed > 0) || told != info.Missed {
		t.Errorf("Info %+v, %d told missed; want nothing skipped, and the firings missed while the server was stopped (if any) counted and told alike", info, told)
	}
	if n, err := admin.HLen(context.Background(), runs).Result(); err != nil || n != 0 {
		t.Errorf("%d unfinished firings left in the store (%v); want none", n, err)
	}
}

// The Store's side of claim and recover attempts (claim.Owner
// "<base>/<n>"), called directly with the replies of earlier attempts
// thrown away, as a client that gave up on them does; Redis runs them in
// any order.
func TestClaimAttempts(t *testing.T) {
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			clk := testclock.New()
			st := NewRedis(c, testredis.Prefix(t), RedisOptions{Now: clk.Now})
			t.Cleanup(func() { st.Close() })
			sec := every(t, time.Second)
			reg := func(name string) int64 {
				return do(t, st.register(def{Name: name, Kind: KindInterval, Spec: sec.spec, Text: sec.text}).op()).Cursor
			}
			p := reg("same")
			for _, n := range []string{"twice", "chain", "other", "recover"} {
				if q := reg(n); q != p {
					t.Fatalf("records created at %d and %d", p, q)
				}
			}
			clk.Advance(4100 * time.Millisecond) // fire times p+1000 .. p+4000 are due
			f := func(k int64) int64 { return p + k*1000 }
			cl := func(name, owner string, fire int64, missed int64, skip bool) claimResult {
				return do(t, st.claim(claim{Name: name, Fire: fire, Owner: owner, Lease: 30 * time.Second,
					ExpectPrev: p, Missed: missed, Skip: skip, CatchUp: time.Minute, Early: 70 * time.Millisecond}).op())
			}
			hb := func(name, owner string, fire int64) bool {
				return do(t, st.heartbeat(name, fire, owner, 1, 30*time.Second).op()).Held
			}
			rec := func(name string) found { return do(t, st.get(name).op()) }

			// A retry of the same firing takes over what the attempt it
			// follows recorded, and answers as it did.
			cl("same", "a/1", f(1), 0, true)
			if r := cl("same", "a/2", f(1), 0, true); r.Outcome != outcomeClaimed || r.Cursor != p || r.Recount || r.Dropped != 0 {
				t.Errorf("retry of the same firing: %+v; want claimed from cursor %d", r, p)
			}
			if hb("same", "a/1", f(1)) || !hb("same", "a/2", f(1)) {
				t.Errorf("the claim is not the retry's")
			}

			// An attempt sent twice (a client's own retry) is one claim.
			cl("twice", "t/1", f(1), 0, true)
			if r := cl("twice", "t/1", f(1), 0, true); r.Outcome != outcomeClaimed || r.Cursor != p || r.Recount {
				t.Errorf("attempt 1 run twice: %+v; want claimed from cursor %d", r, p)
			}

			// A chain of attempts at later firings: each drops the one
			// before (it never ran); together they count what one claim
			// from the expected cursor would have. Attempts older than one
			// recorded, run late, change nothing.
			cl("chain", "b/1", f(1), 0, true)
			if r := cl("chain", "b/2", f(2), 1, true); r.Outcome != outcomeClaimed || r.Cursor != p || r.Recount {
				t.Errorf("attempt 2: %+v; want claimed from cursor %d (the chain)", r, p)
			}
			if r := cl("chain", "b/3", f(4), 3, true); r.Outcome != outcomeClaimed || r.Cursor != p || r.Recount || r.Dropped != 0 {
				t.Errorf("attempt 3: %+v; want claimed from cursor %d, skipping nothing", r, p)
			}
			for _, late := range []struct {
				owner string
				fire  int64
			}{{"b/2", f(2)}, {"b/1", f(1)}, {"b/1", f(3)}} {
				if r := cl("chain", late.owner, late.fire, 0, true); r.Outcome != outcomeTaken {
					t.Errorf("attempt %s run late: %+v; want taken", late.owner, r)
				}
			}
			if r := rec("chain"); r.Missed != 3 || r.Skipped != 0 || r.Running != 1 || r.Cursor != f(4) {
				t.Errorf("chain: record %+v; want missed 3 (fire times 1-3), one claim (4)", r.record)
			}
			if !hb("chain", "b/3", f(4)) {
				t.Errorf("attempt 3 does not hold its claim")
			}

			// Another process moved the cursor past the dropped attempt:
			// it is counted and reported on its own.
			cl("other", "c/1", f(1), 0, true)
			cl("other", "x/1", f(2), 1, false)
			if r := cl("other", "c/2", f(4), 3, true); r.Outcome != outcomeSkipped || r.Cursor != f(2) || !r.Recount ||
				r.Dropped != 1 || r.DroppedFirst != f(1) || r.DroppedLast != f(1) {
				t.Errorf("attempt 2 after another claim: %+v; want skipped (x runs 2), cursor 2, fire 1 dropped", r)
			}
			if r := rec("other"); r.Missed != 1 || r.Running != 1 {
				t.Errorf("other: record %+v; want the dropped fire counted missed, x's claim alone running", r.record)
			}

			// Recover attempts: a retry takes over what the earlier one
			// took; another process does not.
			do(t, st.claim(claim{Name: "recover", Fire: f(1), Owner: "dead/1", Lease: time.Second, ExpectPrev: p,
				CatchUp: time.Minute, Early: 70 * time.Millisecond}).op())
			clk.Advance(2 * time.Second)
			do(t, st.recover("recover", f(1), "r/1", 30*time.Second).op())
			if r := do(t, st.recover("recover", f(1), "r/2", 30*time.Second).op()); !r.Recovered || r.Attempt != 1 {
				t.Errorf("recover retry: %+v; want recovered", r)
			}
			if r := do(t, st.recover("recover", f(1), "s/1", 30*time.Second).op()); r.Recovered || r.Deadline == 0 {
				t.Errorf("recover by another process: %+v; want the live lease", r)
			}
			if hb("recover", "r/1", f(1)) || !hb("recover", "r/2", f(1)) {
				t.Errorf("the recovered claim is not the retry's")
			}
		})
	}
}
