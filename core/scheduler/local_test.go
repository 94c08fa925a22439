package scheduler

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testclock"
)

// Local (non-distributed) tasks: the engine alone, on a fake clock.

func newLocal(t *testing.T) (*Engine, *testclock.Clock, *events) {
	clk := testclock.New()
	ev := &events{}
	e, err := New(Config{Clock: clk, Events: ev.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeEngine(t, e) })
	return e, clk, ev
}

func tickLocal(t *testing.T, e *Engine, clk *testclock.Clock, d, by time.Duration) {
	for left := d; left > 0; left -= by {
		clk.Advance(min(by, left))
		settle(t, e)
	}
}

func TestLocalIntervalAndCron(t *testing.T) {
	e, clk, _ := newLocal(t)
	var log runLog
	run := func(f Firing, done func(error)) { log.run(0, f, done) }
	do(t, e.Register(Task{Name: "hb", Schedule: every(t, time.Minute), Options: e.DefaultOptions(), Run: run}))
	do(t, e.Register(Task{Name: "quarter", Schedule: mustCron(t, "*/15 * * * *"), Options: e.DefaultOptions(), Run: run}))
	tickLocal(t, e, clk, time.Hour, time.Minute)
	m := map[string]int{}
	for _, r := range log.all() {
		m[r.Task]++
		if r.Task == "quarter" && r.Scheduled.Minute()%15 != 0 {
			t.Errorf("quarter fired at %v", r.Scheduled)
		}
	}
	if m["hb"] != 60 || m["quarter"] != 4 {
		t.Fatalf("runs %v; want 60 hb and 4 quarter", m)
	}
	info := do(t, e.Get("quarter"))
	if info.RunCount != 4 || info.Distributed || !info.NextRun.Equal(clk.Now().Add(15*time.Minute)) {
		t.Fatalf("Info %+v", info)
	}
	list := do(t, e.List())
	if len(list) != 2 || list[0].Name != "hb" || list[1].Name != "quarter" {
		t.Fatalf("List %+v", list)
	}
}

// The same schedule again is a no-op: the anchor and next run stay.
func TestLocalReregister(t *testing.T) {
	e, clk, _ := newLocal(t)
	s := every(t, time.Minute)
	a := do(t, e.Register(Task{Name: "hb", Schedule: s, Options: e.DefaultOptions(), Run: noop}))
	clk.Advance(30 * time.Second)
	b := do(t, e.Register(Task{Name: "hb", Schedule: s, Options: e.DefaultOptions(), Run: noop}))
	if !a.NextRun.Equal(b.NextRun) {
		t.Fatalf("re-register moved next run %v -> %v", a.NextRun, b.NextRun)
	}
	c := do(t, e.Register(Task{Name: "hb", Schedule: every(t, 2*time.Minute), Options: e.DefaultOptions(), Run: noop}))
	if c.Schedule != "120000" || !c.NextRun.Equal(clk.Now().Add(2*time.Minute)) {
		t.Fatalf("update: %+v", c)
	}
}

// A stalled loop (here: a clock jump) runs the latest missed firing once
// and counts the others; beyond catch_up nothing runs.
func TestLocalCatchUp(t *testing.T) {
	e, clk, ev := newLocal(t)
	var log runLog
	o := e.DefaultOptions()
	o.CatchUp = 5 * time.Minute
	do(t, e.Register(Task{Name: "hb", Schedule: every(t, time.Minute), Options: o, Run: func(f Firing, done func(error)) { log.run(0, f, done) }}))
	clk.Advance(10*time.Minute + 30*time.Second)
	settle(t, e)
	rs := log.all()
	if len(rs) != 1 || !rs[0].Scheduled.Equal(testclock.New().Now().Add(10*time.Minute)) {
		t.Fatalf("runs %+v; want the 10th firing only", rs)
	}
	if info := do(t, e.Get("hb")); info.Missed != 9 {
		t.Fatalf("missed %d; want 9", info.Missed)
	}
	clk.Advance(time.Hour)
	settle(t, e)
	if info := do(t, e.Get("hb")); len(log.all()) != 2 || info.Missed != 9+59 {
		t.Fatalf("after an hour's jump: %d runs, missed %d", len(log.all()), info.Missed)
	}
	var missed []Event
	ev.mu.Lock()
	for _, x := range ev.all {
		if x.Kind == EventMissed {
			missed = append(missed, x)
		}
	}
	ev.mu.Unlock()
	start := testclock.New().Now()
	if len(missed) != 2 || missed[0].Count != 9 || !missed[0].Firing.Scheduled.Equal(start.Add(time.Minute)) ||
		!missed[0].Last.Equal(start.Add(9*time.Minute)) || missed[1].Count != 59 {
		t.Fatalf("missed events %+v; want 9 from the 1st to the 9th firing, then 59", missed)
	}
}

func TestLocalOverlapTriggerPause(t *testing.T) {
	e, clk, ev := newLocal(t)
	var log runLog
	log.hold = func(f Firing) bool { return f.Attempt == 1 && !f.Manual && len(log.runs) == 1 }
	run := func(f Firing, done func(error)) { log.run(0, f, done) }
	do(t, e.Register(Task{Name: "slow", Schedule: every(t, time.Second), Options: e.DefaultOptions(), Run: run}))
	tickLocal(t, e, clk, 3*time.Second, time.Second)
	if info := do(t, e.Get("slow")); info.Skipped != 2 || info.Running != 1 {
		t.Fatalf("skip: %+v", info)
	}
	do(t, e.Trigger("slow")) // a manual run ignores overlap
	settle(t, e)
	if rs := log.all(); len(rs) != 2 || !rs[1].Manual {
		t.Fatalf("trigger: %+v", rs)
	}
	log.release()
	settle(t, e)
	do(t, e.Pause("slow"))
	tickLocal(t, e, clk, 5*time.Second, time.Second)
	if info := do(t, e.Get("slow")); len(log.all()) != 2 || info.Status != StatusPaused || !info.NextRun.IsZero() {
		t.Fatalf("paused: %d runs, %+v", len(log.all()), info)
	}
	do(t, e.Resume("slow"))
	tickLocal(t, e, clk, 2*time.Second, time.Second)
	if info := do(t, e.Get("slow")); len(log.all()) != 4 || info.RunCount != 4 || info.Skipped != 2 {
		t.Fatalf("resumed: %d runs, %+v", len(log.all()), info)
	}
	skipped := 0
	for _, k := range ev.kinds() {
		if k == EventSkipped {
			skipped++
		}
	}
	if skipped != 2 {
		t.Fatalf("%d skipped events", skipped)
	}
	do(t, e.Remove("slow"))
	if _, err := e.Get("slow").Do(t.Context()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Remove: %v", err)
	}
}

// A one-shot task runs once and is removed; a panicking run is an error.
func TestLocalOnceAndPanic(t *testing.T) {
	e, clk, ev := newLocal(t)
	var runs atomic.Int32
	do(t, e.Register(Task{Name: "boom", Schedule: mustAfter(t, time.Second), Options: func() Options {
		o := e.DefaultOptions()
		o.MaxRetries = 0
		return o
	}(), Run: func(f Firing, done func(error)) {
		runs.Add(1)
		panic("oops")
	}}))
	tickLocal(t, e, clk, 3*time.Second, time.Second)
	if runs.Load() != 1 {
		t.Fatalf("%d runs", runs.Load())
	}
	if _, err := e.Get("boom").Do(t.Context()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("one-shot still registered: %v", err)
	}
	var failed *Event
	ev.mu.Lock()
	for i := range ev.all {
		if ev.all[i].Kind == EventFailed {
			failed = &ev.all[i]
		}
	}
	ev.mu.Unlock()
	if failed == nil || !failed.Final || failed.Err == nil {
		t.Fatalf("failed event %+v", failed)
	}
}

// Several owners share a task (one firing runs in one of them, in turn);
// Detach drops an owner, and the last one's detach stops the task.
func TestOwnersAndDetach(t *testing.T) {
	e, clk, _ := newLocal(t)
	var a, b atomic.Int32
	s := every(t, time.Second)
	do(t, e.Register(Task{Name: "hb", Schedule: s, Options: e.DefaultOptions(), Owner: "vm1", Run: func(f Firing, done func(error)) { a.Add(1); done(nil) }}))
	do(t, e.Register(Task{Name: "hb", Schedule: s, Options: e.DefaultOptions(), Owner: "vm2", Run: func(f Firing, done func(error)) { b.Add(1); done(nil) }}))
	tickLocal(t, e, clk, 4*time.Second, time.Second)
	if a.Load() != 2 || b.Load() != 2 {
		t.Fatalf("runs %d/%d; want 2/2", a.Load(), b.Load())
	}
	e.Detach("vm1")
	settle(t, e) // the detach is applied before the clock moves (a loaded loop ran a due firing first once)
	tickLocal(t, e, clk, 2*time.Second, time.Second)
	if a.Load() != 2 || b.Load() != 4 {
		t.Fatalf("after detach: %d/%d", a.Load(), b.Load())
	}
	e.Detach("vm2")
	settle(t, e)
	if _, err := e.Get("hb").Do(t.Context()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("task survived its last owner: %v", err)
	}
}

// Close waits for runs in progress, gives up pending retries, and then
// refuses work.
func TestClose(t *testing.T) {
	clk := testclock.New()
	e, err := New(Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var held func(error)
	do(t, e.Register(Task{Name: "slow", Schedule: every(t, time.Second), Options: e.DefaultOptions(),
		Run: func(f Firing, done func(error)) { held = done }}))
	clk.Advance(time.Second)
	settle(t, e)
	closed := make(chan error)
	go func() { closed <- e.Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v with a run in progress", err)
	case <-time.After(50 * time.Millisecond):
	}
	held(nil)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := e.Register(Task{Name: "x", Schedule: every(t, time.Second), Options: e.DefaultOptions(), Run: noop}).Do(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Register after Close: %v", err)
	}
	// A run that never ends: Close gives up when ctx does.
	e2, _ := New(Config{Clock: clk})
	do(t, e2.Register(Task{Name: "stuck", Schedule: every(t, time.Second), Options: e2.DefaultOptions(),
		Run: func(f Firing, done func(error)) {}}))
	clk.Advance(time.Second)
	settle(t, e2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e2.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a stuck run: %v", err)
	}
}

// One-shot tasks that are due at once run at registration, without the
// clock moving: once(0), and an at: time already past but within
// catch_up (which starts late, so it is marked Late). One past catch_up
// is counted missed, with a missed event. All three are removed after.
func TestLocalOnceDueAtOnce(t *testing.T) {
	e, clk, ev := newLocal(t)
	var log runLog
	run := func(f Firing, done func(error)) { log.run(0, f, done) }
	now := clk.Now()
	o := e.DefaultOptions()
	o.CatchUp = time.Minute
	do(t, e.Register(Task{Name: "now", Schedule: mustAfter(t, 0), Options: o, Run: run}))
	do(t, e.Register(Task{Name: "past", Schedule: At(now.Add(-30 * time.Second)), Options: o, Run: run}))
	do(t, e.Register(Task{Name: "stale", Schedule: At(now.Add(-2 * time.Minute)), Options: o, Run: run}))
	settle(t, e)
	got := map[string]ran{}
	for _, r := range log.all() {
		if _, dup := got[r.Task]; dup {
			t.Fatalf("%s ran twice", r.Task)
		}
		got[r.Task] = r
	}
	if r, ok := got["now"]; !ok || !r.Scheduled.Equal(now) || r.Late {
		t.Errorf("once(0): %+v, ran %v; want a run scheduled now, not late", r, ok)
	}
	if r, ok := got["past"]; !ok || !r.Scheduled.Equal(now.Add(-30*time.Second)) || !r.Late {
		t.Errorf("a past at: within catch_up: %+v, ran %v; want a late run at its time", r, ok)
	}
	if _, ok := got["stale"]; ok {
		t.Errorf("an at: older than catch_up ran")
	}
	var missed []Event
	ev.mu.Lock()
	for _, x := range ev.all {
		if x.Kind == EventMissed {
			missed = append(missed, x)
		}
	}
	ev.mu.Unlock()
	if len(missed) != 1 || missed[0].Firing.Task != "stale" || missed[0].Count != 1 ||
		!missed[0].Firing.Scheduled.Equal(now.Add(-2*time.Minute)) || !missed[0].Last.Equal(missed[0].Firing.Scheduled) {
		t.Errorf("missed events %+v; want one for stale", missed)
	}
	for _, name := range []string{"now", "past", "stale"} {
		if _, err := e.Get(name).Do(t.Context()); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s still registered after its one firing: %v", name, err)
		}
	}
}

// A firing that starts more than LateAfter after its scheduled time is
// Late, whatever delayed it (here a stalled loop: the clock jumps), and
// counted in Info.Late; one on time is not.
func TestLocalLateStart(t *testing.T) {
	e, clk, _ := newLocal(t)
	var log runLog
	do(t, e.Register(Task{Name: "job", Schedule: every(t, 10*time.Second), Options: e.DefaultOptions(),
		Run: func(f Firing, done func(error)) { log.run(0, f, done) }}))
	tickLocal(t, e, clk, 10*time.Second, time.Second)
	clk.Advance(12 * time.Second) // the 20 s firing starts at 22 s
	settle(t, e)
	rs := log.all()
	if len(rs) != 2 || rs[0].Late || !rs[1].Late {
		t.Fatalf("runs %+v; want the first on time and the second late", rs)
	}
	if info := do(t, e.Get("job")); info.Late != 1 || info.RunCount != 2 {
		t.Fatalf("Info %+v; want late 1", info)
	}
}
