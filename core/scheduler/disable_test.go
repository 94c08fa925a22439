package scheduler

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Disable in one process takes a distributed task off the schedule in all
// of them: it stays registered with its counters, shows disabled, never
// fires, stays disabled for a process that registers it again (a
// restart), and Enable resumes it from the next fire time without
// catching up (nothing is counted missed).
func testDisable(t *testing.T, b backend) {
	cl := newCluster(t, b, 0, 0, 0)
	var log runLog
	hb := every(t, 100*time.Millisecond)
	cl.register("hb", hb, nil, log.run)
	cl.advance(500*time.Millisecond, 10*time.Millisecond)
	before := len(log.all())
	if before < 4 {
		t.Fatalf("%d runs in 500ms", before)
	}
	do(t, cl.es[2].Disable("hb"))
	for i, e := range cl.es {
		awaitLocal(t, e, func() bool { tk := e.tasks["hb"]; return tk != nil && tk.disabled }, fmt.Sprintf("engine %d disabled", i))
	}
	cl.advance(time.Second, 10*time.Millisecond)
	if n := len(log.all()); n != before {
		t.Fatalf("%d runs while disabled", n-before)
	}
	for i, e := range cl.es {
		info := do(t, e.Get("hb"))
		if info.Status != StatusDisabled || !info.NextRun.IsZero() || info.RunCount != int64(before) || !info.Registered {
			t.Fatalf("engine %d: %+v; want disabled, no next run, run_count %d", i, info, before)
		}
	}
	// Pause and resume do not enable it.
	do(t, cl.es[0].Pause("hb"))
	do(t, cl.es[0].Resume("hb"))
	cl.advance(300*time.Millisecond, 10*time.Millisecond)
	if n := len(log.all()); n != before {
		t.Fatalf("%d runs after pause+resume of a disabled task", n-before)
	}
	// A restarted process finds it disabled in the Store.
	closeEngine(t, cl.es[0])
	cl.es = cl.es[1:]
	e := cl.add(0)
	if info := cl.registerOn(0, e, "hb", hb, nil, log.run); info.Status != StatusDisabled || info.RunCount != int64(before) {
		t.Fatalf("registered again: %+v; want disabled with run_count %d", info, before)
	}
	cl.advance(500*time.Millisecond, 10*time.Millisecond)
	if n := len(log.all()); n != before {
		t.Fatalf("%d runs while disabled, after a restart", n-before)
	}
	// Enable: the next run is the first fire time after now; no catch-up.
	enabledAt := cl.clk.Now()
	do(t, cl.es[1].Enable("hb"))
	for i, e := range cl.es {
		awaitLocal(t, e, func() bool { tk := e.tasks["hb"]; return tk != nil && !tk.disabled && tk.next != 0 }, fmt.Sprintf("engine %d enabled", i))
	}
	cl.advance(500*time.Millisecond, 10*time.Millisecond)
	rs := log.all()[before:]
	if len(rs) < 4 {
		t.Fatalf("%d runs in 500ms after enable", len(rs))
	}
	for _, r := range rs {
		if !r.Scheduled.After(enabledAt) || r.Late {
			t.Fatalf("run after enable scheduled at %v (enabled at %v), late %v: a disabled period was caught up", r.Scheduled, enabledAt, r.Late)
		}
	}
	info := do(t, cl.es[0].Get("hb"))
	if info.Status != StatusActive || info.Missed != 0 || info.RunCount != int64(before+len(rs)) {
		t.Fatalf("after enable: %+v; want active, missed 0, run_count %d", info, before+len(rs))
	}
	// Enable of a task that is not disabled changes nothing; of an unknown one is ErrNotFound.
	do(t, cl.es[0].Enable("hb"))
	if _, err := cl.es[0].Disable("nope").Do(t.Context()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Disable of an unknown task: %v", err)
	}
}

// A local task: disable and enable in its process.
func TestLocalDisable(t *testing.T) {
	e, clk, _ := newLocal(t)
	var log runLog
	run := func(f Firing, done func(error)) { log.run(0, f, done) }
	do(t, e.Register(Task{Name: "hb", Schedule: every(t, time.Second), Options: e.DefaultOptions(), Run: run}))
	tickLocal(t, e, clk, 3*time.Second, time.Second)
	do(t, e.Disable("hb"))
	tickLocal(t, e, clk, 5*time.Second, time.Second)
	info := do(t, e.Get("hb"))
	if len(log.all()) != 3 || info.Status != StatusDisabled || !info.NextRun.IsZero() || info.RunCount != 3 {
		t.Fatalf("disabled: %d runs, %+v", len(log.all()), info)
	}
	list := do(t, e.List())
	if len(list) != 1 || list[0].Status != StatusDisabled {
		t.Fatalf("List: %+v", list)
	}
	// Paused and disabled: enable leaves it paused, resume then starts it.
	do(t, e.Pause("hb"))
	do(t, e.Enable("hb"))
	if info := do(t, e.Get("hb")); info.Status != StatusPaused {
		t.Fatalf("paused, disabled, enabled: %+v", info)
	}
	tickLocal(t, e, clk, 2*time.Second, time.Second)
	do(t, e.Resume("hb"))
	enabledAt := clk.Now()
	tickLocal(t, e, clk, 2*time.Second, time.Second)
	rs := log.all()
	if len(rs) != 5 || !rs[3].Scheduled.After(enabledAt) {
		t.Fatalf("after enable: %+v; want 2 more runs after %v", rs, enabledAt)
	}
	if info := do(t, e.Get("hb")); info.Status != StatusActive || info.Missed != 0 || info.RunCount != 5 {
		t.Fatalf("after enable: %+v", info)
	}
}

// A process that hears an Enable late (its control message delayed past
// the next fire time) still runs the first fire time after the enable: it
// follows the record's cursor, not its own now. The enable comes from a
// process that does not run the task (a control script).
func testEnableHeardLate(t *testing.T, b backend) {
	cl := newCluster(t, b, 0, 0)
	var log runLog
	sec := every(t, time.Second)
	node, ctl := cl.es[0], cl.es[1]
	cl.registerOn(0, node, "hb", sec, nil, log.run)
	cl.advance(2500*time.Millisecond, 100*time.Millisecond)
	do(t, ctl.Disable("hb"))
	awaitLocal(t, node, func() bool { tk := node.tasks["hb"]; return tk != nil && tk.disabled }, "node disabled")
	cl.advance(2*time.Second, 100*time.Millisecond)
	before := len(log.all())
	// The node stops hearing control messages.
	node.unsub()
	enabledAt := cl.clk.Now()
	do(t, ctl.Enable("hb"))
	cl.advance(1200*time.Millisecond, 100*time.Millisecond) // past the next fire time (4.5 s -> 5.7 s)
	if n := len(log.all()); n != before {
		t.Fatalf("%d runs before the node heard the enable", n-before)
	}
	// The message arrives now.
	if err := node.call(func() { node.onControl(controlMsg{Op: ctlEnable, Name: "hb"}) }); err != nil {
		t.Fatal(err)
	}
	cl.advance(100*time.Millisecond, 10*time.Millisecond)
	rs := log.all()[before:]
	if len(rs) != 1 {
		t.Fatalf("%d runs once the node heard the enable; want the first fire time after it", len(rs))
	}
	if first := rs[0].Scheduled; !first.After(enabledAt) || first.After(enabledAt.Add(time.Second)) {
		t.Fatalf("ran %v; want the first fire time after the enable at %v", first, enabledAt)
	}
	if info := do(t, ctl.Get("hb")); info.Missed != 0 || info.Status != StatusActive {
		t.Fatalf("after enable: %+v", info)
	}
}

// The issuing process can hear its own Enable's control message before
// Enable applies it locally (the message travels on another connection).
// The message path re-reads the record asynchronously; Enable, applying
// next and finding the task enabled already, must still plan its next
// firing, so a next_run read right after Enable returns is set.
func testEnableMessageBeforeApply(t *testing.T, b backend) {
	cl, node := heartbeat(t, b, 2)
	do(t, node.Disable("hb"))
	node.unsub()                 // deliver the message by hand, first
	do(t, cl.es[1].Enable("hb")) // the Store's side of node's Enable
	var next int64
	if err := node.call(func() {
		node.onControl(controlMsg{Op: ctlEnable, Name: "hb"})
		node.applyControl(controlMsg{Op: ctlEnable, Name: "hb", issued: true}, false)
		next = node.tasks["hb"].next
	}); err != nil {
		t.Fatal(err)
	}
	if next == 0 {
		t.Fatal("enabled, but no next firing planned")
	}
}

// A control message older than a control the process applied since (its
// own Disable's message delayed past its own Enable) changes nothing: the
// task stays enabled and planned. Before messages carried the record's
// version, the late disable took the task off the schedule here while the
// Store said enabled.
func testStaleControlMessage(t *testing.T, b backend) {
	_, node := heartbeat(t, b, 2)
	node.unsub() // its messages are delivered by hand, late
	do(t, node.Disable("hb"))
	var disabledAt int64
	if err := node.call(func() { disabledAt = node.tasks["hb"].version }); err != nil {
		t.Fatal(err)
	}
	do(t, node.Enable("hb"))
	var next int64
	var disabled bool
	if err := node.call(func() {
		node.onControl(controlMsg{Op: ctlDisable, Name: "hb", Version: disabledAt})
		tk := node.tasks["hb"]
		next, disabled = tk.next, tk.disabled
	}); err != nil {
		t.Fatal(err)
	}
	if disabled || next == 0 {
		t.Fatalf("a stale disable applied after the enable: disabled %v, next %d", disabled, next)
	}
	if info := do(t, node.Get("hb")); info.Status != StatusActive {
		t.Fatalf("after the stale message: %+v", info)
	}
}

// A re-read of the record that comes while a claim is in flight keeps the
// fire time being claimed as the next run; the claim's reply plans the
// one after. In a process that enables a task, the Enable's own message
// starts such a re-read while the issued apply plans and claims at once
// (the first fire time is within the claim-ahead window). Before, the
// re-read cleared the next run, and a next run read right after Enable
// returned was nil until the claim's reply came (scheduler_spec.lua,
// "disables and enables", Redis and Cluster under load).
func testRereadWhileClaiming(t *testing.T, b backend) {
	_, node := heartbeat(t, b, 1)
	var planned int64
	if err := node.call(func() {
		tk := node.tasks["hb"]
		planned = tk.next
		tk.claiming = true // as claimDue leaves it, the claim's reply not yet come
		tk.lastSync = 0
		node.resync(tk)
	}); err != nil {
		t.Fatal(err)
	}
	awaitLocal(t, node, func() bool { return !node.tasks["hb"].syncing }, "the re-read came")
	var next int64
	if err := node.call(func() {
		tk := node.tasks["hb"]
		next = tk.next
		tk.claiming = false
		node.planDist(tk)
	}); err != nil {
		t.Fatal(err)
	}
	if planned == 0 || next != planned {
		t.Fatalf("next run %d after a re-read during a claim; want the claimed fire time %d", next, planned)
	}
	if info := do(t, node.Get("hb")); info.NextRun.UnixMilli() != planned {
		t.Fatalf("Get after the claim: next run %v, want %d", info.NextRun, planned)
	}
}

// A claim's reply that found the task paused (or disabled), coming after
// this process applied a resume (or enable) issued since, leaves the task
// active and planned: a claim sent before a pause, run by the Store after
// it, its reply slower than the pause and the resume that followed. Before
// claim replies carried the record's version, the reply set the flag
// again: the task stayed paused in this process while the Store said
// active, and the resume's message, of a version it had applied, changed
// nothing.
func testLateClaimReplyAfterResume(t *testing.T, b backend) {
	for _, c := range []struct {
		off, on func(*Engine, string) *store.Op[struct{}]
		found   outcome
	}{
		{(*Engine).Pause, (*Engine).Resume, outcomePaused},
		{(*Engine).Disable, (*Engine).Enable, outcomeDisabled},
	} {
		_, node := heartbeat(t, b, 1)
		node.unsub() // no control messages: only the replies
		do(t, c.off(node, "hb"))
		var offVersion, fire int64
		if err := node.call(func() { offVersion = node.tasks["hb"].version; fire = node.tasks["hb"].cursor + 1000 }); err != nil {
			t.Fatal(err)
		}
		// The Store's answer to a claim that runs after the pause: the
		// flag, and the version of the control that set it.
		res := do(t, node.st.claim(claim{Name: "hb", Fire: fire, Owner: "late/1", Lease: time.Second,
			CatchUp: time.Minute, Early: time.Hour}).op())
		if res.Outcome != c.found || res.Version != offVersion || offVersion == 0 {
			t.Fatalf("claim after the control: outcome %d version %d; want %d and %d", res.Outcome, res.Version, c.found, offVersion)
		}
		do(t, c.on(node, "hb"))
		var next int64
		var paused, disabled bool
		if err := node.call(func() {
			tk := node.tasks["hb"]
			fire := tk.next
			tk.claiming = true // the claim sent before the pause; its reply comes now
			node.claimed(tk, claim{Name: "hb", Fire: fire},
				claimResult{Outcome: c.found, Version: offVersion, Cursor: tk.cursor}, nil, time.Now(), time.Now())
			next, paused, disabled = tk.next, tk.paused, tk.disabled
		}); err != nil {
			t.Fatal(err)
		}
		if paused || disabled || next == 0 {
			t.Fatalf("outcome %d of version %d after the task was turned back on: paused %v, disabled %v, next %d",
				c.found, offVersion, paused, disabled, next)
		}
		if info := do(t, node.Get("hb")); info.Status != StatusActive || info.NextRun.IsZero() {
			t.Fatalf("after the late reply: %+v", info)
		}
	}
}

// heartbeat returns a cluster of n engines whose first registered "hb", a
// distributed task every second, and has run it for 1.5 s.
func heartbeat(t *testing.T, b backend, n int) (*cluster, *Engine) {
	cl := newCluster(t, b, make([]time.Duration, n)...)
	var log runLog
	node := cl.es[0]
	cl.registerOn(0, node, "hb", every(t, time.Second), nil, log.run)
	cl.advance(1500*time.Millisecond, 100*time.Millisecond)
	return cl, node
}
