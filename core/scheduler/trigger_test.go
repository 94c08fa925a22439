package scheduler

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// awaitTrigger waits (settling the cluster) until trigger id is no longer
// pending, and returns its state.
func awaitTrigger(t *testing.T, cl *cluster, from *Engine, name, id string) TriggerState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cl.settle()
		st := do(t, from.TriggerStatus(name, id))
		if !st.Pending {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("trigger %s of %q still pending after 10s", id, name)
		}
		time.Sleep(time.Millisecond)
	}
}

// A trigger sent by an engine that registered nothing (the admin CLI) runs
// the task exactly once, in one of the two engines that registered it, as
// a manual run counted in run_count; a paused task runs too. A trigger of
// a task no engine holds is claimed by none and lapses with its window.
func testTriggerAny(t *testing.T, b backend) {
	cl := newCluster(t, b, 0, 0, 0)
	var log runLog
	hourly := mustCron(t, "0 * * * *")
	cl.registerOn(0, cl.es[0], "job", hourly, nil, log.run)
	cl.registerOn(1, cl.es[1], "job", hourly, nil, log.run)
	cli := cl.es[2]
	const n = 6
	runners := map[string]bool{}
	for i := range n {
		if i == n-1 {
			do(t, cl.es[0].Pause("job"))
		}
		id := do(t, cli.TriggerAny("job", time.Minute))
		st := awaitTrigger(t, cl, cli, "job", id)
		if st.Runner == "" {
			t.Fatalf("trigger %d: claimed by nobody: %+v", i, st)
		}
		runners[st.Runner] = true
		awaitInfo(t, cl, 2, "job", func(info Info) bool { return info.RunCount == int64(i+1) })
		rs := log.all()
		if len(rs) != i+1 {
			t.Fatalf("after trigger %d: %d runs, want %d: %+v", i, len(rs), i+1, rs)
		}
		r := rs[i]
		if !r.Manual || r.Attempt != 1 || r.Late || r.Recovered {
			t.Fatalf("trigger %d ran as %+v; want a manual first attempt", i, r)
		}
		if !strings.HasPrefix(st.Runner, cl.es[r.engine].Instance()+":") {
			t.Fatalf("trigger %d: runner %q, but engine %d (%s) ran it", i, st.Runner, r.engine, cl.es[r.engine].Instance())
		}
	}
	if len(runners) != n {
		t.Fatalf("%d distinct runner ids for %d triggers", len(runners), n)
	}
	// Nothing else runs later (no second claim of any trigger).
	cl.advance(time.Second, 100*time.Millisecond)
	if rs := log.all(); len(rs) != n {
		t.Fatalf("%d runs after %d triggers", len(rs), n)
	}

	// Bad input and unknown tasks.
	if _, err := cli.TriggerAny("nope", time.Minute).Do(t.Context()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("TriggerAny(nope): %v; want ErrNotFound", err)
	}
	for _, w := range []time.Duration{0, -time.Second, MaxTriggerWindow + time.Millisecond} {
		if _, err := cli.TriggerAny("job", w).Do(t.Context()); !errors.Is(err, ErrInvalid) {
			t.Fatalf("TriggerAny window %v: %v; want ErrInvalid", w, err)
		}
	}
	do(t, cl.es[0].Register(Task{Name: "here", Schedule: hourly, Options: cl.es[0].DefaultOptions(), Run: noop}))
	if _, err := cl.es[0].TriggerAny("here", time.Minute).Do(t.Context()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("TriggerAny of a local task: %v; want ErrInvalid", err)
	}

	// A record whose only holder closed: the trigger is sent, nobody
	// claims it, and it lapses with its window (the Store's clock on the
	// memory backend, Redis's PX on Redis).
	gone := cl.add(0)
	cl.registerOn(3, gone, "orphan", hourly, nil, log.run)
	closeEngine(t, gone)
	cl.es = cl.es[:3]
	// (2 s: a loaded machine still reads it pending before Redis expires it.)
	id := do(t, cli.TriggerAny("orphan", 2*time.Second))
	cl.settle()
	if st := do(t, cli.TriggerStatus("orphan", id)); !st.Pending {
		t.Fatalf("trigger with no holder: %+v; want pending until its window passes", st)
	}
	cl.clk.Advance(3 * time.Second)
	if st := awaitTrigger(t, cl, cli, "orphan", id); st.Runner != "" {
		t.Fatalf("trigger with no holder: %+v; want lapsed", st)
	}
	if rs := log.all(); len(rs) != n {
		t.Fatalf("%d runs after a trigger nobody holds", len(rs)-n)
	}
}

// The Store's side of a trigger: the first claim wins, a second attempt of
// the same owner (its first reply lost) finds it won, another owner finds
// it taken; a trigger of a task with no record is not sent.
func TestTriggerClaimOnEveryBackend(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			cl := newCluster(t, b, 0)
			cl.registerOn(0, cl.es[0], "job", mustCron(t, "0 * * * *"), nil, func(int, Firing, func(error)) {})
			// The record stays; no engine holds the task, so only the
			// test claims its triggers.
			cl.es[0].Detach("")
			awaitLocal(t, cl.es[0], func() bool { return cl.es[0].tasks["job"] == nil }, "job dropped")
			st := cl.st
			if ok := do(t, st.sendTrigger("nope", "x", time.Minute).op()); ok {
				t.Fatal("trigger of a task with no record was sent")
			}
			if !do(t, st.sendTrigger("job", "t1", time.Minute).op()) {
				t.Fatal("trigger not sent")
			}
			if r := do(t, st.triggerState("job", "t1").op()); r.State != trigPending {
				t.Fatalf("state before any claim: %+v", r)
			}
			for _, c := range []struct{ owner, want string }{{"a/1", "a/1"}, {"a/1", "a/1"}, {"b/1", "a/1"}} {
				if r := do(t, st.claimTrigger("job", "t1", c.owner).op()); r.State != trigClaimed || r.Owner != c.want {
					t.Fatalf("claim by %s: %+v; want claimed by %s", c.owner, r, c.want)
				}
			}
			if r := do(t, st.triggerState("job", "t1").op()); r.State != trigClaimed || r.Owner != "a/1" {
				t.Fatalf("state after the claims: %+v", r)
			}
			if r := do(t, st.claimTrigger("job", "unknown", "a/1").op()); r.State != trigUnknown {
				t.Fatalf("claim of an unknown trigger: %+v", r)
			}
		})
	}
}
