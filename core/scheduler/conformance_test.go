package scheduler

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testclock"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// The conformance suite: the distributed protocol (several engines, the
// "processes", on one Store) on every backend — memory, standalone Redis,
// Cluster and Sentinel — driven by one fake clock (Redis scripts read it
// instead of TIME), so no test sleeps; Redis replies are awaited.

type backend struct {
	name  string
	store func(t *testing.T, clk *testclock.Clock) Store
}

func backends(t *testing.T) []backend {
	bs := []backend{{"memory", func(t *testing.T, clk *testclock.Clock) Store { return NewMemory(clk.Now) }}}
	for name, c := range testredis.Backends(t) {
		bs = append(bs, backend{name, func(t *testing.T, clk *testclock.Clock) Store {
			st := NewRedis(c, testredis.Prefix(t), RedisOptions{Now: clk.Now})
			t.Cleanup(func() { st.Close() })
			return st
		}})
	}
	slices.SortFunc(bs, func(a, b backend) int { return strings.Compare(a.name, b.name) })
	return bs
}

// cluster is a set of engines ("processes") on one Store and one fake
// clock, each seeing the clock through its own offset.
type cluster struct {
	t   *testing.T
	clk *testclock.Clock
	st  Store
	es  []*Engine
	rec *recorder
	ev  *events
}

// ran is a recorded firing with the index of the engine that ran it.
type ran struct {
	Firing
	engine int
}

func newCluster(t *testing.T, b backend, offsets ...time.Duration) *cluster {
	clk := testclock.New()
	cl := &cluster{t: t, clk: clk, st: b.store(t, clk), rec: newRecorder(), ev: &events{}}
	for range offsets {
		cl.add(offsets[len(cl.es)])
	}
	return cl
}

func (cl *cluster) add(offset time.Duration) *Engine {
	e, err := New(Config{Store: cl.st, Clock: testclock.Offset(cl.clk, offset), Events: cl.ev.add,
		Log: slog.New(slog.NewTextHandler(testWriter{cl.t}, nil))})
	if err != nil {
		cl.t.Fatal(err)
	}
	cl.t.Cleanup(func() { closeEngine(cl.t, e) })
	cl.es = append(cl.es, e)
	return e
}

// register registers the task on every engine (as each process does at
// start); run gets the engine index.
func (cl *cluster) register(name string, s Schedule, o func(*Options), run func(i int, f Firing, done func(error))) {
	for i, e := range cl.es {
		cl.registerOn(i, e, name, s, o, run)
	}
}

func (cl *cluster) registerOn(i int, e *Engine, name string, s Schedule, o func(*Options), run func(i int, f Firing, done func(error))) Info {
	opts := e.DefaultOptions()
	opts.Distributed = true
	if o != nil {
		o(&opts)
	}
	return do(cl.t, e.Register(Task{Name: name, Schedule: s, Options: opts, Run: func(f Firing, done func(error)) { run(i, f, done) }}))
}

// advance moves the clock by d in steps, letting every engine catch up
// after each step.
func (cl *cluster) advance(d, step time.Duration) {
	for left := d; left > 0; left -= step {
		cl.clk.Advance(min(step, left))
		cl.settle()
	}
}

func (cl *cluster) settle() {
	for range 2 {
		for _, e := range cl.es {
			settle(cl.t, e)
		}
	}
}

// log records runs; a RunFunc for register.
type runLog struct {
	mu   sync.Mutex
	runs []ran
	hold func(f Firing) bool
	held []func(error)
	fail func(f Firing) error
}

func (l *runLog) run(i int, f Firing, done func(error)) {
	l.mu.Lock()
	l.runs = append(l.runs, ran{f, i})
	hold := l.hold != nil && l.hold(f)
	var err error
	if l.fail != nil {
		err = l.fail(f)
	}
	if hold {
		l.held = append(l.held, done)
	}
	l.mu.Unlock()
	if !hold {
		done(err)
	}
}

func (l *runLog) all() []ran {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ran(nil), l.runs...)
}

func (l *runLog) release() {
	l.mu.Lock()
	h := l.held
	l.held = nil
	l.mu.Unlock()
	for _, d := range h {
		d(nil)
	}
}

// byFire counts runs per fire time.
func byFire(rs []ran) map[int64][]ran {
	m := map[int64][]ran{}
	for _, r := range rs {
		m[r.Scheduled.UnixMilli()] = append(m[r.Scheduled.UnixMilli()], r)
	}
	return m
}

func every(t testing.TB, d time.Duration) Schedule {
	s, err := Every(d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wantEachOnce checks that the runs cover every fire time of a 100ms
// interval from first to last exactly once, except those in twice.
func wantEachOnce(t *testing.T, rs []ran, period time.Duration, twice map[int64]bool) {
	t.Helper()
	m := byFire(rs)
	var fires []int64
	for f := range m {
		fires = append(fires, f)
	}
	slices.Sort(fires)
	if len(fires) < 2 {
		t.Fatalf("only %d fire times ran", len(fires))
	}
	for f := fires[0]; f <= fires[len(fires)-1]; f += period.Milliseconds() {
		want := 1
		if twice[f] {
			want = 2
		}
		if got := len(m[f]); got != want {
			t.Errorf("fire time %s ran %d times, want %d: %+v", time.UnixMilli(f).UTC().Format("15:04:05.000"), got, want, m[f])
		}
	}
	for f := range m {
		if (f-fires[0])%period.Milliseconds() != 0 {
			t.Errorf("fire time %d is off the schedule", f)
		}
	}
}

func TestConformance(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Run("ExactlyOnceAcrossEnginesWithSkew", func(t *testing.T) { testExactlyOnce(t, b) })
			t.Run("KilledRunnerIsRecovered", func(t *testing.T) { testKilledRunner(t, b) })
			t.Run("RegisterSemantics", func(t *testing.T) { testRegisterSemantics(t, b) })
			t.Run("PauseResumeRemoveEverywhere", func(t *testing.T) { testControl(t, b) })
			t.Run("DisableEnableEverywhere", func(t *testing.T) { testDisable(t, b) })
			t.Run("EnableHeardLate", func(t *testing.T) { testEnableHeardLate(t, b) })
			t.Run("EnableMessageBeforeApply", func(t *testing.T) { testEnableMessageBeforeApply(t, b) })
			t.Run("StaleControlMessage", func(t *testing.T) { testStaleControlMessage(t, b) })
			t.Run("RereadWhileClaiming", func(t *testing.T) { testRereadWhileClaiming(t, b) })
			t.Run("LateClaimReplyAfterResume", func(t *testing.T) { testLateClaimReplyAfterResume(t, b) })
			t.Run("RestartKeepsCounters", func(t *testing.T) { testRestart(t, b) })
			t.Run("CatchUp", func(t *testing.T) { testCatchUp(t, b) })
			t.Run("Overlap", func(t *testing.T) { testOverlap(t, b) })
			t.Run("RetriesTiedToTheFiring", func(t *testing.T) { testRetries(t, b) })
			t.Run("OneShotRunsOnceAndIsRemoved", func(t *testing.T) { testOnce(t, b) })
			t.Run("CronInTimezone", func(t *testing.T) { testCronZone(t, b) })
			t.Run("LateStartIsLate", func(t *testing.T) { testLateStart(t, b) })
			t.Run("MissedFiringsOfAClaimAreTold", func(t *testing.T) { testMissedByClaim(t, b) })
			t.Run("GoneTellsTheRegistrants", func(t *testing.T) { testGone(t, b) })
			t.Run("TriggerAnyRunsOnceInOneHolder", func(t *testing.T) { testTriggerAny(t, b) })
		})
	}
}

// Three engines with clocks 1 s apart run one 100 ms interval task: each
// fire time runs once, at its fire time on the Store's clock.
func testExactlyOnce(t *testing.T, b backend) {
	cl := newCluster(t, b, -time.Second, 0, time.Second)
	var log runLog
	cl.register("hb", every(t, 100*time.Millisecond), nil, log.run)
	cl.advance(3*time.Second, 10*time.Millisecond)
	rs := log.all()
	if len(rs) < 25 {
		t.Fatalf("%d runs in 3 s of a 100 ms interval", len(rs))
	}
	wantEachOnce(t, rs, 100*time.Millisecond, nil)
	if t.Failed() {
		for _, r := range rs {
			t.Logf("ran %d on %d", r.Scheduled.UnixMilli()%100000, r.engine)
		}
		for _, ev := range cl.ev.all {
			t.Logf("event %s %d", ev.Kind, ev.Firing.Scheduled.UnixMilli()%100000)
		}
	}
	engines := map[int]bool{}
	for _, r := range rs {
		engines[r.engine] = true
		if r.Attempt != 1 || r.Recovered || r.Late {
			t.Errorf("run %+v: want a plain first attempt", r)
		}
	}
	info := do(t, cl.es[0].Get("hb"))
	if info.RunCount != int64(len(rs)) || info.Missed != 0 || info.Skipped != 0 || !info.Distributed {
		t.Errorf("Info = %+v; want run_count %d, nothing missed or skipped", info, len(rs))
	}
	t.Logf("%d runs by engines %v", len(rs), engines)
}

// An engine killed while running a firing (it stops renewing its claim)
// has that firing re-run elsewhere once its lease passes; nothing else
// runs twice and nothing is missed.
func testKilledRunner(t *testing.T, b backend) {
	cl := newCluster(t, b, -time.Second, 0, time.Second)
	var log runLog
	var victim int64
	log.hold = func(f Firing) bool { return f.Scheduled.UnixMilli() == victim && !f.Recovered }
	cl.register("hb", every(t, 100*time.Millisecond), func(o *Options) {
		o.LockTTL = 300 * time.Millisecond
		o.Overlap = OverlapAllow
	}, log.run)
	info := do(t, cl.es[0].Get("hb"))
	victim = info.NextRun.Add(500 * time.Millisecond).UnixMilli()
	cl.advance(700*time.Millisecond, 10*time.Millisecond)
	var killed = -1
	for _, r := range log.all() {
		if r.Scheduled.UnixMilli() == victim {
			killed = r.engine
		}
	}
	if killed < 0 {
		t.Fatalf("the victim firing did not start")
	}
	cl.es[killed].kill()
	alive := slices.Delete(slices.Clone(cl.es), killed, killed+1)
	cl.es = alive
	cl.advance(2*time.Second, 10*time.Millisecond)
	rs := log.all()
	wantEachOnce(t, rs, 100*time.Millisecond, map[int64]bool{victim: true})
	var rerun *ran
	for i, r := range rs {
		if r.Scheduled.UnixMilli() == victim && r.Recovered {
			rerun = &rs[i]
		}
	}
	if rerun == nil || rerun.engine == killed || rerun.Attempt != 1 {
		t.Fatalf("victim re-run = %+v; want a Recovered first attempt on another engine", rerun)
	}
}

func testRegisterSemantics(t *testing.T, b backend) {
	cl := newCluster(t, b, 0, 0)
	var log runLog
	hourly := mustCron(t, "0 * * * *")
	first := cl.registerOn(0, cl.es[0], "job", hourly, nil, log.run)
	cl.advance(time.Minute, time.Minute)
	again := cl.registerOn(1, cl.es[1], "job", hourly, nil, log.run)
	if again.NextRun != first.NextRun || again.Schedule != "0 * * * *" {
		t.Fatalf("same schedule: %+v, first %+v; want unchanged", again, first)
	}
	// Another schedule of the same kind updates it everywhere.
	daily := mustCron(t, "0 3 * * *")
	upd := cl.registerOn(1, cl.es[1], "job", daily, nil, log.run)
	if upd.Schedule != "0 3 * * *" || upd.NextRun.Hour() != 3 {
		t.Fatalf("update: %+v", upd)
	}
	awaitInfo(t, cl, 0, "job", func(i Info) bool { return i.Schedule == "0 3 * * *" && i.NextRun.Equal(upd.NextRun) })
	// Another kind is refused, by the Store and by a process holding it.
	if _, err := cl.es[0].Register(Task{Name: "job", Schedule: every(t, time.Second), Options: distOpts(cl.es[0]), Run: noop}).Do(t.Context()); !errors.Is(err, ErrKindConflict) {
		t.Fatalf("other kind: %v; want ErrKindConflict", err)
	}
	e3 := cl.add(0)
	if _, err := e3.Register(Task{Name: "job", Schedule: every(t, time.Second), Options: distOpts(e3), Run: noop}).Do(t.Context()); !errors.Is(err, ErrKindConflict) {
		t.Fatalf("other kind in a new process: %v; want ErrKindConflict", err)
	}
	// A process that never registered it can read it.
	info := do(t, e3.Get("job"))
	if info.Registered || info.Schedule != "0 3 * * *" || !info.Distributed {
		t.Fatalf("remote Get: %+v", info)
	}
	if _, err := e3.Get("nope").Do(t.Context()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(nope): %v", err)
	}
}

func distOpts(e *Engine) Options {
	o := e.DefaultOptions()
	o.Distributed = true
	return o
}

func noop(f Firing, done func(error)) { done(nil) }

// awaitInfo waits (settling the cluster) until engine i's Info of name
// satisfies ok.
func awaitInfo(t *testing.T, cl *cluster, i int, name string, ok func(Info) bool) Info {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		cl.settle()
		info, err := cl.es[i].Get(name).Do(t.Context())
		if err == nil && ok(info) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine %d: Info(%q) = %+v, %v; condition not met within 5s", i, name, info, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// Pause in one process stops the task in all; resume restarts it from
// now; remove deletes it everywhere.
func testControl(t *testing.T, b backend) {
	cl := newCluster(t, b, 0, 0, 0)
	var log runLog
	cl.register("hb", every(t, 100*time.Millisecond), nil, log.run)
	cl.advance(500*time.Millisecond, 10*time.Millisecond)
	before := len(log.all())
	do(t, cl.es[2].Pause("hb"))
	// Every engine hears it on the control channel (not only from the
	// record, which its next claim would read).
	for i, e := range cl.es {
		awaitLocal(t, e, func() bool { tk := e.tasks["hb"]; return tk != nil && tk.paused }, fmt.Sprintf("engine %d paused", i))
	}
	cl.advance(time.Second, 10*time.Millisecond)
	if n := len(log.all()); n != before {
		t.Fatalf("%d runs while paused", n-before)
	}
	do(t, cl.es[1].Resume("hb"))
	// As with the pause: a registered task's Info is its engine's view,
	// which the control channel brings up to date (on a cluster, later
	// than the engine that resumed it fires).
	for i, e := range cl.es {
		awaitLocal(t, e, func() bool { tk := e.tasks["hb"]; return tk != nil && !tk.paused }, fmt.Sprintf("engine %d resumed", i))
	}
	cl.advance(500*time.Millisecond, 10*time.Millisecond)
	after := len(log.all())
	if after-before < 4 {
		t.Fatalf("%d runs in 500ms after resume", after-before)
	}
	info := do(t, cl.es[0].Get("hb"))
	if info.Status != StatusActive || info.Missed != 0 {
		t.Fatalf("after resume: %+v (firings while paused are not missed)", info)
	}
	do(t, cl.es[0].Remove("hb"))
	for i, e := range cl.es {
		awaitLocal(t, e, func() bool { return e.tasks["hb"] == nil }, fmt.Sprintf("engine %d removed", i))
	}
	cl.advance(500*time.Millisecond, 10*time.Millisecond)
	if n := len(log.all()); n != after {
		t.Fatalf("%d runs after remove", n-after)
	}
	for _, e := range cl.es {
		if _, err := e.Get("hb").Do(t.Context()); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get after remove: %v", err)
		}
	}
	if _, err := cl.es[0].Pause("hb").Do(t.Context()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Pause after remove: %v", err)
	}
}

// A process restart keeps last_run and run_count.
func testRestart(t *testing.T, b backend) {
	cl := newCluster(t, b, 0)
	var log runLog
	cl.register("hb", every(t, 100*time.Millisecond), nil, log.run)
	cl.advance(550*time.Millisecond, 10*time.Millisecond)
	closeEngine(t, cl.es[0])
	before := do(t, cl.es[0].st.get("hb").op())
	if before.RunCount != 5 || before.LastRun == 0 {
		t.Fatalf("record after 5 runs: %+v", before.record)
	}
	cl.es = nil
	e := cl.add(0)
	info := cl.registerOn(0, e, "hb", every(t, 100*time.Millisecond), nil, log.run)
	if info.RunCount != 5 || info.LastRun.UnixMilli() != before.LastRun {
		t.Fatalf("after restart: %+v; want run_count 5, last_run %d", info, before.LastRun)
	}
	cl.advance(200*time.Millisecond, 10*time.Millisecond)
	if info := do(t, e.Get("hb")); info.RunCount != 7 {
		t.Fatalf("run_count %d after two more runs", info.RunCount)
	}
}

// Every process down across firings: the latest missed firing runs once if
// within catch_up, the others are counted as missed.
func testCatchUp(t *testing.T, b backend) {
	cl := newCluster(t, b, 0)
	var log runLog
	sec := every(t, time.Second)
	catch := func(o *Options) { o.CatchUp = 5 * time.Second }
	cl.register("hb", sec, catch, log.run)
	cl.advance(2*time.Second, 100*time.Millisecond) // runs 2
	cl.es[0].kill()
	cl.es = nil
	cl.clk.Advance(10*time.Second + 500*time.Millisecond) // 10 firings while down
	e := cl.add(0)
	cl.registerOn(0, e, "hb", sec, catch, log.run)
	cl.settle()
	rs := log.all()
	if len(rs) != 3 {
		t.Fatalf("%d runs; want 2 before and 1 catch-up", len(rs))
	}
	last := rs[2]
	if want := rs[1].Scheduled.Add(10 * time.Second); !last.Scheduled.Equal(want) {
		t.Fatalf("catch-up ran %v; want the latest missed firing %v", last.Scheduled, want)
	}
	info := do(t, e.Get("hb"))
	if info.Missed != 9 || info.RunCount != 3 {
		t.Fatalf("Info %+v; want missed 9, run_count 3", info)
	}
	// Down for longer than catch_up: nothing runs, all are missed.
	e.kill()
	cl.es = nil
	cl.clk.Advance(20 * time.Second)
	e = cl.add(0)
	cl.registerOn(0, e, "hb", sec, catch, log.run)
	cl.settle()
	info = do(t, e.Get("hb"))
	if n := len(log.all()); n != 4 || info.Missed != 9+19 {
		// The 20th firing (within catch_up) runs; 19 are missed.
		t.Fatalf("after 20 s down: %d runs, Info %+v; want 4 runs, missed 28", n, info)
	}
	// catch_up 0: a restart after a missed firing runs nothing.
	e.kill()
	cl.es = nil
	cl.clk.Advance(1200 * time.Millisecond)
	e = cl.add(0)
	cl.registerOn(0, e, "hb", sec, func(o *Options) { o.CatchUp = 0 }, log.run)
	cl.settle()
	if n := len(log.all()); n != 4 {
		t.Fatalf("catch_up 0 ran a missed firing (%d runs): %+v", n, log.all())
	}
	if info := do(t, e.Get("hb")); info.Missed != 29 {
		t.Fatalf("missed %d; want 29", info.Missed)
	}
}

// Overlap skip: a firing during a run (in any process) is skipped and
// counted; allow runs it alongside.
func testOverlap(t *testing.T, b backend) {
	for _, ov := range []Overlap{OverlapSkip, OverlapAllow} {
		t.Run(string(ov), func(t *testing.T) {
			cl := newCluster(t, b, 0, 0)
			var log runLog
			var first int64
			log.hold = func(f Firing) bool {
				if first == 0 {
					first = f.Scheduled.UnixMilli()
				}
				return f.Scheduled.UnixMilli() == first
			}
			cl.register("slow", every(t, 100*time.Millisecond), func(o *Options) { o.Overlap = ov }, log.run)
			cl.advance(450*time.Millisecond, 10*time.Millisecond)
			n := len(log.all())
			info := do(t, cl.es[0].Get("slow"))
			if ov == OverlapSkip && (n != 1 || info.Skipped != 3) {
				t.Fatalf("skip: %d runs, skipped %d; want 1 run and 3 skipped", n, info.Skipped)
			}
			if ov == OverlapAllow && (n != 4 || info.Skipped != 0) {
				t.Fatalf("allow: %d runs, skipped %d; want 4 runs", n, info.Skipped)
			}
			log.release()
			cl.advance(200*time.Millisecond, 10*time.Millisecond)
			if len(log.all()) != n+2 {
				t.Fatalf("after the slow run ended: %d runs; want %d", len(log.all()), n+2)
			}
		})
	}
}

// A failed firing is retried after retry_delay with the same Scheduled;
// a firing that fails every attempt is counted failed and the schedule
// goes on.
func testRetries(t *testing.T, b backend) {
	cl := newCluster(t, b, 0, 0)
	var log runLog
	boom := errors.New("boom")
	fails := map[int64]int{}
	log.fail = func(f Firing) error {
		ms := f.Scheduled.UnixMilli()
		fails[ms]++
		if len(fails) == 1 && f.Attempt < 3 {
			return boom // the first firing succeeds at its third attempt
		}
		if len(fails) == 2 {
			return boom // the second fails every attempt
		}
		return nil
	}
	cl.register("flaky", every(t, 10*time.Second), func(o *Options) {
		o.MaxRetries, o.RetryDelay = 2, time.Second
	}, log.run)
	cl.advance(12*time.Second, 100*time.Millisecond)
	rs := log.all()
	if len(rs) != 3 {
		t.Fatalf("%d attempts of the first firing; want 3", len(rs))
	}
	for i, r := range rs {
		if r.Attempt != i+1 || !r.Scheduled.Equal(rs[0].Scheduled) {
			t.Fatalf("attempt %d: %+v; want the same firing", i+1, r)
		}
	}
	info := do(t, cl.es[1].Get("flaky"))
	if info.RunCount != 1 || info.Failed != 0 || info.Status != StatusActive {
		t.Fatalf("after a retried success: %+v", info)
	}
	cl.advance(10*time.Second, 100*time.Millisecond)
	info = do(t, cl.es[0].Get("flaky"))
	if info.RunCount != 2 || info.Failed != 1 || info.Status != StatusError || info.LastError != "boom" {
		t.Fatalf("after a failed firing: %+v; want status error, failed 1", info)
	}
	cl.advance(10*time.Second, 100*time.Millisecond)
	info = do(t, cl.es[0].Get("flaky"))
	if info.RunCount != 3 || info.Status != StatusActive {
		t.Fatalf("the schedule did not go on after a failure: %+v", info)
	}
	var kinds []EventKind
	for _, k := range cl.ev.kinds() {
		if k == EventBefore || k == EventAfter || k == EventFailed {
			kinds = append(kinds, k)
		}
	}
	want := []EventKind{"before", "failed", "before", "failed", "before", "after",
		"before", "failed", "before", "failed", "before", "failed", "before", "after"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %v; want %v", kinds, want)
	}
}

// A distributed one-shot task runs once across processes and is removed
// from all of them.
func testOnce(t *testing.T, b backend) {
	cl := newCluster(t, b, 0, 0, 0)
	var log runLog
	s := mustAfter(t, 500*time.Millisecond)
	cl.register("reward", s, nil, log.run)
	cl.advance(300*time.Millisecond, 10*time.Millisecond)
	cl.register("reward", s, nil, log.run) // same schedule: a no-op, not a new delay
	cl.advance(400*time.Millisecond, 10*time.Millisecond)
	if rs := log.all(); len(rs) != 1 || rs[0].Scheduled.Sub(testclock.New().Now()) != 500*time.Millisecond {
		t.Fatalf("runs %+v; want one, 500ms after the first registration", rs)
	}
	for i := range cl.es {
		deadline := time.Now().Add(5 * time.Second)
		for {
			cl.settle()
			_, err := cl.es[i].Get("reward").Do(t.Context())
			if errors.Is(err, ErrNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("engine %d still has the one-shot task: %v", i, err)
			}
		}
	}
	// The runner of a one-shot firing dies mid-run: another process, which
	// kept watching the firing, re-runs it after the lease.
	var held runLog
	held.hold = func(f Firing) bool { return !f.Recovered }
	cl.register("bonus", mustAfter(t, 100*time.Millisecond), func(o *Options) { o.LockTTL = 300 * time.Millisecond }, held.run)
	cl.advance(200*time.Millisecond, 10*time.Millisecond)
	first := held.all()
	if len(first) != 1 {
		t.Fatalf("one-shot runs %+v", first)
	}
	cl.es[first[0].engine].kill()
	cl.es = slices.Delete(slices.Clone(cl.es), first[0].engine, first[0].engine+1)
	cl.advance(500*time.Millisecond, 10*time.Millisecond)
	if rs := held.all(); len(rs) != 2 || !rs[1].Recovered || !rs[1].Scheduled.Equal(first[0].Scheduled) {
		t.Fatalf("one-shot re-run %+v; want the same firing recovered once", rs)
	}
	// at: in the past within catch_up runs at once.
	at := At(cl.clk.Now().Add(-time.Second))
	cl.registerOn(0, cl.es[0], "late", at, nil, log.run)
	cl.settle()
	if rs := log.all(); len(rs) != 2 || rs[1].Task != "late" {
		t.Fatalf("a past at: within catch_up did not run: %+v", rs)
	}
	// An at: older than catch_up does not run: it is counted and told as
	// missed, and removed everywhere (a tombstone, as after a run).
	stale := At(cl.clk.Now().Add(-2 * time.Minute))
	cl.register("stale", stale, nil, log.run)
	for i, e := range cl.es {
		awaitLocal(t, e, func() bool { return e.tasks["stale"] == nil }, fmt.Sprintf("engine %d dropped stale", i))
		if _, err := e.Get("stale").Do(t.Context()); !errors.Is(err, ErrNotFound) {
			t.Fatalf("engine %d: Get(stale) = %v; want ErrNotFound", i, err)
		}
	}
	toldStale := func() (told int) {
		cl.ev.mu.Lock()
		defer cl.ev.mu.Unlock()
		for _, ev := range cl.ev.all {
			if ev.Kind == EventMissed && ev.Firing.Task == "stale" && ev.Count == 1 && ev.Firing.Scheduled.Equal(time.UnixMilli(stale.at)) {
				told++
			}
		}
		return told
	}
	// The claimant tells the miss when its claim's reply comes, which can
	// be after the claim's tombstone removed the task everywhere.
	for deadline := time.Now().Add(5 * time.Second); toldStale() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	cl.settle()
	if told := toldStale(); told != 1 || len(log.all()) != 2 {
		t.Fatalf("stale at: told missed %d times, runs %+v", told, log.all())
	}
	// A delay of 0 runs at once, without the clock moving, in one process.
	cl.register("now", mustAfter(t, 0), nil, log.run)
	cl.settle()
	if rs := log.all(); len(rs) != 3 || rs[2].Task != "now" || !rs[2].Scheduled.Equal(cl.clk.Now()) {
		t.Fatalf("once(0) runs %+v; want one run, now", rs)
	}
}

// A firing whose run starts more than LateAfter after its scheduled time
// is Late and counted so, whatever delayed it: here every process stalled
// (the clock jumps past the fire time) and the firing is still within
// catch_up when a process claims it.
func testLateStart(t *testing.T, b backend) {
	cl := newCluster(t, b, 0, 0)
	var log runLog
	cl.register("job", every(t, 10*time.Second), nil, log.run)
	cl.advance(10*time.Second, 100*time.Millisecond)
	cl.clk.Advance(12 * time.Second) // the 20 s firing is claimed at 22 s
	cl.settle()
	rs := log.all()
	if len(rs) != 2 || rs[0].Late || !rs[1].Late {
		t.Fatalf("runs %+v; want the first on time and the second late", rs)
	}
	if info := do(t, cl.es[1].Get("job")); info.Late != 1 || info.RunCount != 2 || info.Missed != 0 {
		t.Fatalf("Info %+v; want late 1, nothing missed", info)
	}
}

// Firings a successful claim counts as missed (the process comes late:
// it claims the latest firing within catch_up and counts those before)
// are told as missed events to the process whose claim counted them.
func testMissedByClaim(t *testing.T, b backend) {
	cl := newCluster(t, b, 0, 0)
	var log runLog
	cl.register("hb", every(t, time.Second), func(o *Options) { o.CatchUp = 5 * time.Second }, log.run)
	cl.advance(time.Second, 100*time.Millisecond)
	start := log.all()[0].Scheduled
	cl.clk.Advance(3500 * time.Millisecond) // 2 s and 3 s are missed, 4 s runs
	cl.settle()
	rs := log.all()
	if len(rs) != 2 || !rs[1].Scheduled.Equal(start.Add(3*time.Second)) {
		t.Fatalf("runs %+v; want the latest firing to run", rs)
	}
	info := do(t, cl.es[0].Get("hb"))
	var told int64
	var missed []Event
	cl.ev.mu.Lock()
	for _, ev := range cl.ev.all {
		if ev.Kind == EventMissed {
			told += ev.Count
			missed = append(missed, ev)
		}
	}
	cl.ev.mu.Unlock()
	if info.Missed != 2 || told != info.Missed || len(missed) != 1 ||
		!missed[0].Firing.Scheduled.Equal(start.Add(time.Second)) || !missed[0].Last.Equal(start.Add(2*time.Second)) {
		t.Fatalf("missed %d, missed events %+v; want one event for the 2 missed firings from %v", info.Missed, missed, start.Add(time.Second))
	}
}

// gones counts Task.Gone calls per registration.
type gones struct {
	mu sync.Mutex
	n  map[string]int
}

func (g *gones) fn(key string) func() {
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.n == nil {
			g.n = map[string]int{}
		}
		g.n[key]++
	}
}

func (g *gones) count(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n[key]
}

// awaitGone waits (settling the cluster) until every key was told once.
func awaitGone(t *testing.T, cl *cluster, g *gones, keys ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		cl.settle()
		ok := true
		for _, k := range keys {
			if c := g.count(k); c > 1 {
				t.Fatalf("%s: Gone called %d times", k, c)
			} else if c == 0 {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Gone not called for all of %v within 5s: %v", keys, g.n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Every process that registered a distributed task is told (Task.Gone)
// when it is removed by another process, and when its one-shot firing
// ran in another process; a registration replaced by a later one of the
// same owner, or detached, is not told.
func testGone(t *testing.T, b backend) {
	cl := newCluster(t, b, 0, 0, 0)
	var g gones
	var log runLog
	reg := func(i int, name string, s Schedule, key string) {
		o := distOpts(cl.es[i])
		o.LockTTL = 300 * time.Millisecond
		do(t, cl.es[i].Register(Task{Name: name, Schedule: s, Options: o, Gone: g.fn(key),
			Run: func(f Firing, done func(error)) { log.run(i, f, done) }}))
	}
	hb := every(t, 100*time.Millisecond)
	for i := range cl.es {
		reg(i, "hb", hb, fmt.Sprintf("hb/%d", i))
	}
	reg(0, "hb", hb, "hb/0-again") // replaces hb/0
	cl.advance(300*time.Millisecond, 10*time.Millisecond)
	do(t, cl.es[2].Remove("hb"))
	awaitGone(t, cl, &g, "hb/0-again", "hb/1", "hb/2")
	if n := g.count("hb/0"); n != 0 {
		t.Fatalf("a replaced registration was told %d times", n)
	}
	// A one-shot task runs in one process; all three are told.
	s := mustAfter(t, 100*time.Millisecond)
	for i := range cl.es {
		reg(i, "bonus", s, fmt.Sprintf("bonus/%d", i))
	}
	cl.advance(200*time.Millisecond, 10*time.Millisecond)
	awaitGone(t, cl, &g, "bonus/0", "bonus/1", "bonus/2")
	// Detach is not a removal: nobody is told.
	reg(1, "solo", hb, "solo/1")
	cl.es[1].Detach("")
	cl.advance(100*time.Millisecond, 10*time.Millisecond)
	do(t, cl.es[0].Remove("solo"))
	cl.settle()
	if n := g.count("solo/1"); n != 0 {
		t.Fatalf("a detached registration was told %d times", n)
	}
	// A local task removed here tells its registrant; a record removed
	// behind this process's back (no control message) is dropped here by
	// Remove, which tells it too.
	do(t, cl.es[0].Register(Task{Name: "mine", Schedule: hb, Options: cl.es[0].DefaultOptions(), Gone: g.fn("mine"), Run: noop}))
	do(t, cl.es[0].Remove("mine"))
	awaitGone(t, cl, &g, "mine")
	reg(0, "ghost", hb, "ghost")
	forgetRecord(t, cl.st, "ghost")
	do(t, cl.es[0].Remove("ghost")) // the Store has no record; the engine still had it
	awaitGone(t, cl, &g, "ghost")
}

// Cron fire times follow the task's zone, identically in every process.
func testCronZone(t *testing.T, b backend) {
	cl := newCluster(t, b, 0, 0)
	var log runLog
	daily := mustCron(t, "0 8 * * *")
	cl.register("morning", daily, func(o *Options) { o.Timezone = "Asia/Shanghai" }, log.run)
	info := do(t, cl.es[1].Get("morning"))
	// 08:00 in Shanghai is 00:00 UTC; the clock starts at 2025-01-01 00:00 UTC.
	if want := time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC); !info.NextRun.Equal(want) || info.Timezone != "Asia/Shanghai" {
		t.Fatalf("NextRun %v (%s); want %v", info.NextRun, info.Timezone, want)
	}
	cl.advance(48*time.Hour, time.Hour)
	if n := len(log.all()); n != 2 {
		t.Fatalf("%d runs in two days", n)
	}
}

func mustCron(t testing.TB, expr string) Schedule {
	t.Helper()
	s, err := Cron(expr)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustAfter(t testing.TB, d time.Duration) Schedule {
	t.Helper()
	s, err := After(d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// forgetRecord deletes a task's record from the Store without telling any
// engine (as if the control message were lost).
func forgetRecord(t *testing.T, st Store, name string) {
	switch st := st.(type) {
	case *Memory:
		st.mu.Lock()
		delete(st.tasks, name)
		st.mu.Unlock()
	case *Redis:
		if err := st.c.Del(t.Context(), st.taskKeys(name)...).Err(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("store %T", st)
	}
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// awaitLocal waits until cond, run on e's loop, holds (a control message
// is delivered asynchronously on Redis).
func awaitLocal(t *testing.T, e *Engine, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok := false
		if err := e.call(func() { ok = cond() }); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
