package scheduler

import (
	"errors"
	"strconv"
	"time"

	"github.com/shieldrt/shieldglobal/internal/backoff"
)

// Distributed tasks: claims, leases, recovery and control messages.
// Fire times are Store-clock Unix ms; heap items are local ns, converted
// with the engine's estimate of the Store's clock (observe).

func (e *Engine) newOwner() string {
	e.seq++
	return e.instance + ":" + strconv.FormatUint(e.seq, 10)
}

// adopt takes a distributed task's schedule, anchor, cursor, status and
// counters from its record and plans its next claim.
func (e *Engine) adopt(t *task, sched Schedule, rec record) {
	if rec.Spec != sched.spec {
		if s, err := parseSpec(rec.Spec); err == nil {
			sched = s
		}
	}
	loc := t.opts.loc
	if sched.kind == KindCron && rec.Timezone != "" {
		if l, err := loadLocation(rec.Timezone); err == nil {
			loc = l
		}
	}
	t.tl = sched.timeline(loc, rec.Anchor)
	if rec.Version >= t.version {
		t.cursor = rec.Cursor
		t.paused, t.disabled = rec.Paused, rec.Disabled
		t.version = rec.Version
	} else {
		// A record read before a control this task applied since: keep
		// the flags that control set, and a cursor it moved.
		t.cursor = max(t.cursor, rec.Cursor)
	}
	t.cache(rec)
	if rec.Orphaned {
		e.scanOrphans(t)
	}
	e.planDist(t)
}

// planDist arms the claim of t's next firing after its cursor. While a
// claim is in flight its reply plans (claimed), and t.next stays the fire
// time being claimed: a re-read of the record that comes in between (an
// Enable's own message makes the issuing process re-read it while its
// apply has already claimed) must not leave the next run unknown.
func (e *Engine) planDist(t *task) {
	e.unschedule(&t.fire)
	if t.paused || t.disabled || t.removed || e.closing {
		t.next = 0
		return
	}
	if t.claiming {
		return
	}
	n := t.tl.next(t.cursor)
	if n == 0 {
		e.dropSpentOnce(t)
		return
	}
	t.next = n
	t.fire.fire = n
	e.scheduleAt(&t.fire, n*int64(time.Millisecond)-e.ahead.Nanoseconds())
}

// dropSpentOnce drops a one-shot task whose firing is settled, unless this
// process runs it or watches another process's run of it (to re-run it if
// that runner dies).
func (e *Engine) dropSpentOnce(t *task) {
	if t.tl.s.kind == KindOnce && t.running == 0 && t.next == 0 && t.probe.h == nil && !t.claiming {
		e.drop(t)
	}
}

// claimDue claims the firing that is due: t.next, or the latest fire time
// already past on the Store's clock if the loop comes late (catch-up).
func (e *Engine) claimDue(t *task) {
	if t.claiming || t.paused || t.disabled || t.removed || e.closing || t.next == 0 {
		return
	}
	now := e.storeNowMs()
	due := t.next
	if last := t.tl.lastBefore(t.cursor, now); last > due {
		due = last
	}
	c := claim{
		Name: t.name, Fire: due, Owner: e.claimOwner(t), Lease: t.opts.LockTTL,
		ExpectPrev: t.cursor, Missed: t.tl.count(t.cursor, due),
		Skip: t.opts.Overlap == OverlapSkip, CatchUp: t.opts.CatchUp,
		Early:    e.ahead + skewTolerance,
		MissOnly: now-due > t.opts.CatchUp.Milliseconds(),
	}
	if t.tl.s.kind == KindOnce {
		c.Keep = e.onceKeep(t)
	}
	t.claiming = true
	submit(e, e.st.claim(c), func(res claimResult, err error, t0, t1 time.Time) {
		e.claimed(t, c, res, err, t0, t1)
	})
}

// claimOwner is the owner of t's next claim: the next attempt of the
// claims since the Store last answered one. Redis may run a claim whose
// reply never came (a frozen server runs what it had buffered); its
// firing never runs here, and the next attempt tells the Store so
// (claim.Owner), instead of leaving a lease that blocks the task and is
// then re-run as if its runner had died.
func (e *Engine) claimOwner(t *task) string {
	if t.claimBase == "" {
		t.claimBase, t.claimTry = e.newOwner(), 0
	}
	t.claimTry++
	return t.claimBase + "/" + strconv.Itoa(t.claimTry)
}

// onceKeep is how long a settled one-shot task's tombstone stays, so that
// late claims and registrations of it see it was settled.
func (e *Engine) onceKeep(t *task) time.Duration {
	return t.opts.CatchUp + t.opts.LockTTL + time.Minute
}

// claimRetry spaces claim attempts while the Store does not answer: 50ms
// doubling to 1s, jittered.
var claimRetry = backoff.Policy{Min: 50 * time.Millisecond, Max: time.Second}

// claimBackoff is the wait before claim attempt n+1.
func claimBackoff(fails int) time.Duration { return claimRetry.Delay(fails) }

// claimed handles a claim's reply.
func (e *Engine) claimed(t *task, c claim, res claimResult, err error, t0, t1 time.Time) {
	t.claiming = false
	if err == nil {
		t.claimBase = "" // answered: earlier attempts are settled
	}
	if e.closing {
		return // a claimed firing's lease lapses; another process re-runs it
	}
	if t.removed {
		// Removed meanwhile (a claimed firing's lease lapses; another
		// process re-runs it). What the claim settled as missed is still
		// told: a one-shot claim's own tombstone may remove the task here
		// before its reply comes.
		if err == nil {
			e.emitMissed(t, res.DroppedFirst, res.DroppedLast, res.Dropped)
			switch res.Outcome {
			case outcomeClaimed, outcomeSkipped:
				e.tellMissed(t, c, res, false)
			case outcomeMissed:
				e.tellMissed(t, c, res, true)
			}
		}
		return
	}
	now := e.nowNs()
	if err != nil {
		t.claimFails++
		if t.claimFails == 1 {
			e.log.Warn("scheduler: store unreachable at a firing", "task", t.name,
				"fire", time.UnixMilli(c.Fire).UTC(), "policy", string(t.opts.OnRedisDown), "error", err)
		}
		if t.opts.OnRedisDown == RedisDownRunLocal && !c.MissOnly {
			t.cursor = c.Fire
			e.startFiring(t, c.Fire, Firing{Local: true, Late: t.late})
			t.late = false
			e.planDist(t)
			return
		}
		t.late = true
		t.fire.fire = c.Fire
		e.schedule(&t.fire, now+claimBackoff(t.claimFails).Nanoseconds())
		return
	}
	e.observe(res.Now, t0, t1)
	t.claimFails = 0
	e.emitMissed(t, res.DroppedFirst, res.DroppedLast, res.Dropped)
	if res.Orphan != 0 {
		e.sendRecover(t, res.Orphan)
	}
	switch res.Outcome {
	case outcomeClaimed:
		e.tellMissed(t, c, res, false)
		t.cursor = c.Fire
		r := e.newRun(t, c.Fire, Firing{Late: t.late})
		r.owner = c.Owner
		t.late = false
		e.schedule(&r.hb, now+t.opts.LockTTL.Nanoseconds()/3)
		if res.Now < c.Fire {
			e.scheduleAt(&r.wait, c.Fire*int64(time.Millisecond))
		} else {
			e.startAttempt(r)
		}
	case outcomeTaken:
		t.cursor = max(res.Cursor, c.Fire)
		t.late = false
		if res.RunDeadline > 0 {
			e.maybeProbe(t, c.Fire, res.RunDeadline)
		}
	case outcomeSkipped:
		e.tellMissed(t, c, res, false)
		t.cursor = c.Fire
		t.late = false
		e.emit(t, Event{Kind: EventSkipped, Firing: Firing{Task: t.name, Scheduled: time.UnixMilli(c.Fire)}})
	case outcomeMissed:
		e.tellMissed(t, c, res, true)
		t.cursor = c.Fire
		t.late = false
	case outcomePaused, outcomeDisabled:
		// The flag is the record's as of the claim. A control applied here
		// since (this process's own resume or enable, issued after the
		// claim ran and applied before its reply came) is newer and
		// stands: the task is planned as that control left it.
		if res.Version >= t.version {
			t.version = res.Version
			if res.Outcome == outcomePaused {
				t.paused = true
			} else {
				t.disabled = true
			}
			t.next = 0
			return
		}
	case outcomeEarly:
		t.fire.fire = c.Fire
		e.schedule(&t.fire, now+res.Wait.Nanoseconds())
		return
	case outcomeUnknown:
		e.resync(t)
		return
	}
	e.planDist(t)
}

// tellMissed tells (EventMissed) the firings that claim c settled as
// missed: the fire times it skipped over between the cursor and c.Fire
// (the Store counted them if its cursor was the one c expected; else it
// reports Recount and this engine counts them), plus c.Fire itself if the
// claim found it too old (fireMissed). Only the claiming process tells
// them, so each missed firing is told once.
func (e *Engine) tellMissed(t *task, c claim, res claimResult, fireMissed bool) {
	prev, n := c.ExpectPrev, c.Missed
	if res.Recount {
		prev, n = res.Cursor, t.tl.count(res.Cursor, c.Fire)
		if n > 0 {
			submit(e, e.st.addMissed(t.name, n), func(struct{}, error, time.Time, time.Time) {})
		}
	}
	var last int64
	if n > 0 {
		last = t.tl.lastBefore(prev, c.Fire-1)
	}
	if fireMissed {
		n, last = n+1, c.Fire
	}
	e.emitMissed(t, t.tl.next(prev), last, n)
}

// probeMargin is how long after a lease deadline a probe looks.
const probeMargin = 5 * time.Millisecond

// maybeProbe arranges to check, once its lease deadline has passed, on a
// firing another process runs, unless this task's next claim comes first
// (claims report lapsed leases anyway).
func (e *Engine) maybeProbe(t *task, fire, deadline int64) {
	if next := t.tl.next(max(t.cursor, fire)); next != 0 && next-e.ahead.Milliseconds() <= deadline {
		return
	}
	t.probe.fire = fire
	e.scheduleAt(&t.probe, deadline*int64(time.Millisecond)+probeMargin.Nanoseconds())
}

// scanOrphans asks the Store for a lapsed firing of t.
func (e *Engine) scanOrphans(t *task) {
	submit(e, e.st.claim(claim{Name: t.name}), func(res claimResult, err error, t0, t1 time.Time) {
		if err == nil && res.Orphan != 0 {
			e.observe(res.Now, t0, t1)
			e.sendRecover(t, res.Orphan)
		}
	})
}

// sendRecover tries to take over firing fire of t, whose runner stopped
// renewing its lease.
func (e *Engine) sendRecover(t *task, fire int64) {
	if t.removed || e.closing || len(t.runners) == 0 || t.recovering == fire {
		return
	}
	// As claims do (claimOwner), a recover whose reply never came is
	// followed by the next attempt under the same base, which takes over
	// what it may have taken (else its lease would block the task until
	// it lapsed, and then be recovered again). One recover of a firing at
	// a time: two attempts in flight could both take it.
	if t.recoverFor != fire || t.recoverBase == "" {
		t.recoverFor, t.recoverBase, t.recoverTry = fire, e.newOwner(), 0
	}
	t.recoverTry++
	owner := t.recoverBase + "/" + strconv.Itoa(t.recoverTry)
	t.recovering = fire
	submit(e, e.st.recover(t.name, fire, owner, t.opts.LockTTL), func(res recoverResult, err error, t0, t1 time.Time) {
		if t.recovering == fire {
			t.recovering = 0
		}
		if err == nil && t.recoverFor == fire {
			t.recoverBase = ""
		}
		if t.removed || e.closing {
			return
		}
		if err != nil {
			t.probe.fire = fire
			e.schedule(&t.probe, e.nowNs()+t.opts.LockTTL.Nanoseconds()/3)
			return
		}
		e.observe(res.Now, t0, t1)
		switch {
		case res.Recovered:
			e.log.Warn("scheduler: re-running a firing whose runner stopped renewing its claim",
				"task", t.name, "fire", time.UnixMilli(fire).UTC(), "attempt", res.Attempt)
			r := e.newRun(t, fire, Firing{Recovered: true})
			r.owner = owner
			r.attempt = max(res.Attempt, 1) - 1
			e.schedule(&r.hb, e.nowNs()+t.opts.LockTTL.Nanoseconds()/3)
			e.startAttempt(r)
		case res.Deadline > 0:
			e.maybeProbe(t, fire, res.Deadline)
		default:
			e.dropSpentOnce(t)
		}
	})
}

// sendHeartbeat renews r's claim.
func (e *Engine) sendHeartbeat(r *run) {
	t := r.task
	if r.lost || r.gone {
		return
	}
	submit(e, e.st.heartbeat(t.name, r.fire, r.owner, max(r.attempt, 1), t.opts.LockTTL),
		func(res heartbeatResult, err error, t0, t1 time.Time) {
			if r.gone {
				return
			}
			if err != nil {
				e.schedule(&r.hb, e.nowNs()+min(t.opts.LockTTL/6, time.Second).Nanoseconds())
				return
			}
			e.observe(res.Now, t0, t1)
			if !res.Held {
				r.lost = true
				e.log.Warn("scheduler: lost the claim of a running firing (its lease passed); another process may run it",
					"task", t.name, "fire", time.UnixMilli(r.fire).UTC())
				return
			}
			e.schedule(&r.hb, e.nowNs()+t.opts.LockTTL.Nanoseconds()/3)
		})
}

// sendFinish writes r's outcome to the Store, retrying while it does not
// answer (the claim keeps being renewed meanwhile).
func (e *Engine) sendFinish(r *run, runErr error) {
	t := r.task
	f := finish{Name: t.name, Fire: r.fire, Owner: r.owner, Manual: r.base.Manual,
		Started: (r.first + e.storeOffset()) / int64(time.Millisecond), Late: r.base.Late,
		Once: t.tl.s.kind == KindOnce, Keep: e.onceKeep(t)}
	if runErr != nil {
		f.Fail, f.Err = true, runErr.Error()
	}
	if f.Manual {
		f.Fire, f.Owner = 0, ""
	}
	var send func()
	send = func() {
		submit(e, e.st.finish(f), func(res finishResult, err error, t0, t1 time.Time) {
			if err != nil {
				r.finishFails++
				if r.finishFails == 1 {
					e.log.Warn("scheduler: could not record a finished run; retrying", "task", t.name,
						"fire", time.UnixMilli(r.fire).UTC(), "error", err)
				}
				r.wait.kind = itemFinish
				r.retry = send
				e.schedule(&r.wait, e.nowNs()+claimBackoff(r.finishFails).Nanoseconds())
				return
			}
			e.observe(res.Record.Now, t0, t1)
			if !res.Held {
				e.log.Warn("scheduler: a firing finished after another process took its claim over; not counted",
					"task", t.name, "fire", time.UnixMilli(r.fire).UTC())
			}
			if res.Found {
				t.cache(res.Record)
			}
			e.runEnded(r)
			if f.Once && !f.Manual && res.Held {
				e.drop(t)
			}
		})
	}
	send()
}

// onControl handles a control message from the Store.
func (e *Engine) onControl(c controlMsg) {
	if e.closing {
		return
	}
	switch c.Op {
	case ctlResync:
		for _, t := range e.tasks {
			if t.distributed() {
				e.resync(t)
			}
		}
	case ctlUpdate:
		if t := e.tasks[c.Name]; t != nil && t.distributed() {
			e.resync(t)
		}
	case ctlTrigger:
		if t := e.tasks[c.Name]; t != nil && t.distributed() {
			e.onTrigger(t, c.ID, e.newOwner(), 0)
		}
	default:
		if t := e.tasks[c.Name]; t != nil && t.distributed() {
			e.applyControl(c, false)
		}
	}
}

// resync re-reads t's record (re-creating it if the Store lost it) and
// follows it.
func (e *Engine) resync(t *task) {
	if t.syncing || t.removed {
		return
	}
	// At most one re-read a second per task, so a record that keeps
	// vanishing cannot spin the engine.
	if now := e.nowNs(); t.lastSync != 0 && now-t.lastSync < int64(time.Second) {
		e.schedule(&t.sync, t.lastSync+int64(time.Second))
		return
	}
	t.lastSync = e.nowNs()
	t.syncing = true
	retry := func() { e.schedule(&t.sync, e.nowNs()+time.Second.Nanoseconds()) }
	submit(e, e.st.get(t.name), func(f found, err error, t0, t1 time.Time) {
		if t.removed {
			t.syncing = false
			return
		}
		if err != nil {
			t.syncing = false
			retry()
			return
		}
		e.observe(f.Now, t0, t1)
		if f.Found {
			t.syncing = false
			e.adopt(t, t.tl.s, f.record)
			return
		}
		d := e.def(t.name, t.tl.s, *t.opts)
		d.Anchor, d.Cursor = t.tl.anchor, t.cursor
		submit(e, e.st.register(d), func(reg registered, err error, t0, t1 time.Time) {
			t.syncing = false
			if t.removed {
				return
			}
			if err != nil {
				if errors.Is(err, ErrKindConflict) {
					e.log.Warn("scheduler: the store holds another kind of task under this name; dropping it here", "task", t.name, "error", err)
					e.drop(t)
					return
				}
				retry()
				return
			}
			e.observe(reg.Now, t0, t1)
			if reg.Done {
				e.drop(t) // a one-shot task that ran
				return
			}
			e.adopt(t, t.tl.s, reg.record)
		})
	})
}
