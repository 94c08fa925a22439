package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// task is a registered task; owned by the loop. It is what every
// registered task keeps on the heap (100 000 of them are common), so parts
// most tasks share or never use are not in it: options are interned
// (Engine.intern), the state of a distributed task is allocated for those
// only, and the first runner is stored inline.
type task struct {
	name    string
	opts    *resolved // shared by the tasks with the same options: never change it in place
	tl      timeline  // the schedule (tl.s) resolved for the task's zone and anchor
	runners []runner
	owners  []string  // the runners' owners; replaced, never changed in place (events share it)
	rr      int       // next runner, round robin
	one     [1]runner // runners' storage while there is one (the common case)

	paused   bool // (the flags side by side: the struct fits a smaller size class)
	disabled bool // Disable; apart from paused: the task fires when neither is set
	// version: the record's version of the last control applied or record
	// adopted (distributed tasks); older control messages are stale.
	version int64
	removed bool
	fire    item // the next firing (distributed: its claim)
	next    int64
	running int
	stats   counters

	*distState // distributed tasks only; nil for a local one
}

// distributed reports whether t is a distributed task.
func (t *task) distributed() bool { return t.distState != nil }

// distState is what only a distributed task needs.
type distState struct {
	probe       item   // a check on another process's run of a firing
	sync        item   // a retry of resync
	cursor      int64  // the Store's cursor as last seen
	claiming    bool   // a claim is in flight
	claimFails  int    // consecutive claims the Store did not answer
	claimBase   string // owner base of the claim attempts since the last reply (claim.Owner)
	claimTry    int    // the latest attempt under claimBase
	recovering  int64  // the firing a recover is in flight for
	recoverFor  int64  // the firing of recoverBase: its recovers got no reply
	recoverBase string
	recoverTry  int
	late        bool  // the pending firing waited for the Store
	syncing     bool  // a register or get to re-read the record is in flight
	lastSync    int64 // local ns of the latest resync
}

type runner struct {
	owner string
	run   RunFunc
	gone  func() // Task.Gone
}

// counters are a task's figures: this process's for a local task, the
// Store's (as last read) for a distributed one.
type counters struct {
	lastRun, runCount, missed, skipped, late, failed int64
	lastErr                                          string
	errored                                          bool
}

// msTime is a Unix ms time, zero for 0.
func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func (c counters) fill(info *Info) {
	if c.lastRun != 0 {
		info.LastRun = time.UnixMilli(c.lastRun).UTC()
	}
	info.RunCount, info.Missed, info.Skipped, info.Late, info.Failed = c.runCount, c.missed, c.skipped, c.late, c.failed
	info.LastError = c.lastErr
	if c.errored && info.Status == StatusActive {
		info.Status = StatusError
	}
}

// cache takes a record's figures and status.
func (t *task) cache(r record) {
	t.stats = counters{lastRun: r.LastRun, runCount: r.RunCount, missed: r.Missed, skipped: r.Skipped,
		late: r.Late, failed: r.Failed, lastErr: r.LastError, errored: r.Errored}
}

func (t *task) info() Info {
	info := Info{Name: t.name, Kind: t.tl.s.kind, Schedule: t.tl.s.text, Distributed: t.distributed(),
		Running: t.running, Registered: true, Status: StatusActive}
	if t.tl.s.kind == KindCron {
		info.Timezone = t.opts.loc.String()
	}
	switch {
	case t.disabled:
		info.Status = StatusDisabled
	case t.paused:
		info.Status = StatusPaused
	case t.next != 0:
		info.NextRun = time.UnixMilli(t.next).UTC()
	}
	t.stats.fill(&info)
	return info
}

// infos lists every task, by name.
func (e *Engine) infos() []Info {
	out := make([]Info, 0, len(e.tasks))
	for _, t := range e.tasks {
		out = append(out, t.info())
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// install registers or updates a task on the loop. reg is the Store's
// record for a distributed task (nil for a local one).
func (e *Engine) install(tk Task, opts resolved, reg *registered) (Info, error) {
	if e.closing {
		return Info{}, ErrClosed
	}
	dist := reg != nil
	if dist && reg.Done {
		// A one-shot task that already ran (in some process): nothing to
		// schedule until its tombstone expires.
		return Info{Name: tk.Name, Kind: KindOnce, Schedule: tk.Schedule.text, Status: StatusActive,
			Distributed: true, RunCount: reg.RunCount, LastRun: msTime(reg.LastRun)}, nil
	}
	t := e.tasks[tk.Name]
	if t != nil && t.tl.s.kind != tk.Schedule.kind {
		return Info{}, fmt.Errorf("%w: task %q is a %s task, not %s", ErrKindConflict, tk.Name, t.tl.s.kind, tk.Schedule.kind)
	}
	var keep []runner
	if t != nil && t.distributed() != dist {
		// Switching between local and distributed: start afresh, keeping
		// the other owners' registrations (they are not gone).
		keep = slices.Clone(t.runners)
		e.discard(t)
		t = nil
	}
	sched := tk.Schedule
	if dist && reg.Spec != sched.spec {
		// Another process's registration won a race; follow the Store.
		if s, err := parseSpec(reg.Spec); err == nil {
			sched = s
		}
	}
	if t == nil {
		t = &task{name: tk.Name}
		t.fire = item{kind: itemFire, task: t, idx: -1}
		if dist {
			t.distState = &distState{}
			t.probe = item{kind: itemProbe, task: t, idx: -1}
			t.sync = item{kind: itemResync, task: t, idx: -1}
		}
		t.runners = t.one[:0]
		if keep != nil {
			t.runners = keep
		}
		e.listOwners(t)
		e.tasks[tk.Name] = t
		e.setName(tk.Name, dist)
	}
	same := t.tl.s.kind != "" && t.tl.s.spec == sched.spec && t.opts.loc.String() == opts.loc.String()
	t.opts = e.intern(opts)
	e.addRunner(t, runner{owner: tk.Owner, run: tk.Run, gone: tk.Gone})
	if !dist {
		if same {
			return t.info(), nil // same schedule: nothing moves
		}
		now := e.nowNs() / int64(time.Millisecond)
		t.tl = sched.timeline(opts.loc, now)
		after := now
		if sched.kind == KindOnce {
			// A one-shot time at or before now is due at once: it runs if
			// within catch_up, else it counts as missed (fireLocal).
			after = min(t.tl.once(), now) - 1
		}
		e.planLocal(t, after)
		return t.info(), nil
	}
	e.calibrate(tk.Name)
	e.adopt(t, sched, reg.record)
	return t.info(), nil
}

// addRunner adds r to t, replacing the same owner's earlier one.
func (e *Engine) addRunner(t *task, r runner) {
	for i := range t.runners {
		if t.runners[i].owner == r.owner {
			t.runners[i] = r
			return
		}
	}
	t.runners = append(t.runners, r)
	e.listOwners(t)
}

// listOwners takes a new snapshot of t's runners' owners. The snapshot of
// a single owner is shared by all its tasks (Event.Owners is read-only):
// one slice per owner, not one per task.
func (e *Engine) listOwners(t *task) {
	switch len(t.runners) {
	case 0:
		t.owners = nil
	case 1:
		o := t.runners[0].owner
		solo, ok := e.solo[o]
		if !ok {
			solo = []string{o}
			e.solo[o] = solo
		}
		t.owners = solo
	default:
		t.owners = make([]string, len(t.runners))
		for i, r := range t.runners {
			t.owners[i] = r.owner
		}
	}
}

// intern returns the shared copy of o: tasks registered with the same
// options (nearly all of them, usually) point at one. Past maxInterned
// distinct options a task gets its own copy, so odd callers cannot grow
// the table without bound.
func (e *Engine) intern(o resolved) *resolved {
	if p, ok := e.opts[o]; ok {
		return p
	}
	p := &o
	if len(e.opts) < maxInterned {
		e.opts[o] = p
	}
	return p
}

// maxInterned bounds Engine.opts.
const maxInterned = 1024

// pick returns the runner of the next firing (round robin).
func (t *task) pick() RunFunc {
	r := t.runners[t.rr%len(t.runners)]
	t.rr++
	return r.run
}

// planLocal arms a local task's next firing after `after` (local ms).
func (e *Engine) planLocal(t *task, after int64) {
	e.unschedule(&t.fire)
	t.next = 0
	if t.paused || t.disabled || t.removed {
		return
	}
	n := t.tl.next(after)
	if n == 0 {
		if t.tl.s.kind == KindOnce && t.running == 0 {
			e.drop(t)
		}
		return
	}
	t.next = n
	t.fire.fire = n
	e.schedule(&t.fire, n*int64(time.Millisecond))
}

// handle runs a due item.
func (e *Engine) handle(it *item, now int64) {
	switch it.kind {
	case itemFire:
		if it.task.distributed() {
			e.claimDue(it.task)
		} else {
			e.fireLocal(it.task, it.fire, now/int64(time.Millisecond))
		}
	case itemStart, itemRetry:
		e.startAttempt(it.run)
	case itemHeartbeat:
		e.sendHeartbeat(it.run)
	case itemProbe:
		e.sendRecover(it.task, it.fire)
	case itemFinish:
		it.run.retry()
	case itemResync:
		e.resync(it.task)
	}
}

// fireLocal handles a local task's firing at fire (local ms), now being
// nowMs: the catch-up rule if the loop comes late past later fire times.
func (e *Engine) fireLocal(t *task, fire, nowMs int64) {
	run := fire
	if n := t.tl.next(fire); (n != 0 && n <= nowMs) || nowMs-fire > t.opts.CatchUp.Milliseconds() {
		last, before := t.tl.latest(fire-1, nowMs, t.opts.CatchUp.Milliseconds())
		if before > 0 {
			t.stats.missed += before
			end := nowMs // the missed ones are [fire, last) or, if none runs, [fire, nowMs]
			if last != 0 {
				end = last - 1
			}
			e.emitMissed(t, fire, t.tl.lastBefore(fire-1, end), before)
		}
		run = last
	}
	if run != 0 {
		e.startFiring(t, run, Firing{})
		if t.removed {
			return
		}
	}
	after := max(run, fire)
	if run == 0 {
		after = nowMs
	}
	e.planLocal(t, after)
}

// startFiring starts a firing of t unless Overlap skips it. base carries
// the firing's flags (Late, Local, Recovered, Manual).
func (e *Engine) startFiring(t *task, fire int64, base Firing) {
	if t.running > 0 && t.opts.Overlap == OverlapSkip && !t.distributed() && !base.Manual {
		t.stats.skipped++
		e.emit(t, Event{Kind: EventSkipped, Firing: Firing{Task: t.name, Scheduled: time.UnixMilli(fire)}})
		return
	}
	e.startAttempt(e.newRun(t, fire, base))
}

// run is one firing in progress in this process: its attempts, its
// retries, and for a distributed task its claim.
type run struct {
	task        *task
	fire        int64
	base        Firing // flags
	attempt     int
	gen         uint64 // attempt generation: a stale done is ignored; it keeps counting when the run is reused
	settled     uint64 // the latest generation whose done was handled: a second call of a done is ignored
	owner       string // the claim's owner id (distributed)
	first       int64  // start of the first attempt: local ns
	started     int64  // start of the current attempt: local ns
	lastErr     error
	lost        bool   // another process took the claim over
	ended       bool   // no more attempts; finishing
	gone        bool   // finished and released
	retry       func() // itemFinish: send the finish again
	finishFails int
	wait        item // itemStart or itemRetry
	hb          item // itemHeartbeat
}

// maxFree bounds the ended runs kept for reuse.
const maxFree = 1024

func (e *Engine) newRun(t *task, fire int64, base Firing) *run {
	base.Task, base.Scheduled = t.name, time.UnixMilli(fire)
	var r *run
	if n := len(e.free); n > 0 {
		r = e.free[n-1]
		e.free[n-1] = nil
		e.free = e.free[:n-1]
		*r = run{gen: r.gen}
	} else {
		r = &run{}
	}
	r.task, r.fire, r.base = t, fire, base
	r.wait = item{kind: itemStart, task: t, run: r, idx: -1}
	r.hb = item{kind: itemHeartbeat, task: t, run: r, idx: -1}
	t.running++
	e.runs++
	return r
}

// startAttempt calls the task's RunFunc for the next attempt of r.
func (e *Engine) startAttempt(r *run) {
	t := r.task
	if r.ended {
		return
	}
	if len(t.runners) == 0 || (r.attempt > 0 && (t.removed || e.closing)) {
		// Nobody left to run it, or a retry of a removed task: give up.
		e.endRun(r, r.lastErr)
		return
	}
	r.attempt++
	r.gen++
	r.started = e.nowNs()
	if r.first == 0 {
		r.first = r.started
		if !r.base.Manual && e.firingNowMs(t)-r.fire > LateAfter.Milliseconds() {
			r.base.Late = true
		}
	}
	f := r.base
	f.Attempt = r.attempt
	e.emit(t, Event{Kind: EventBefore, Firing: f})
	gen := r.gen
	e.callRun(t.pick(), f, func(err error) { e.postDone(r, gen, err) })
}

// firingNowMs is now on the clock t's fire times are on: the Store's (as
// estimated) for a distributed task, the local one otherwise.
func (e *Engine) firingNowMs(t *task) int64 {
	if t.distributed() {
		return e.storeNowMs()
	}
	return e.nowNs() / int64(time.Millisecond)
}

// callRun calls fn, turning a panic into the attempt's error.
func (e *Engine) callRun(fn RunFunc, f Firing, done func(error)) {
	defer func() {
		if p := recover(); p != nil {
			done(fmt.Errorf("scheduler: task %q panicked: %v", f.Task, p))
		}
	}()
	fn(f, done)
}

// attemptDone handles the end of an attempt: the first call of its done.
func (e *Engine) attemptDone(r *run, gen uint64, err error) {
	if gen != r.gen || gen == r.settled || r.ended {
		return
	}
	r.settled = gen
	t := r.task
	now := e.nowNs()
	f := r.base
	f.Attempt = r.attempt
	ev := Event{Firing: f, Started: time.Unix(0, r.started), Duration: time.Duration(now - r.started)}
	if err == nil {
		ev.Kind = EventAfter
		e.emit(t, ev)
		e.endRun(r, nil)
		return
	}
	r.lastErr = err
	final := r.attempt > t.opts.MaxRetries || r.lost || t.removed || e.closing || f.Manual
	ev.Kind, ev.Err, ev.Final = EventFailed, err, final
	e.emit(t, ev)
	if final {
		e.endRun(r, err)
		return
	}
	r.wait.kind = itemRetry
	e.schedule(&r.wait, now+t.opts.RetryDelay.Nanoseconds())
}

// endRun counts a finished firing (in the Store for a distributed task).
func (e *Engine) endRun(r *run, err error) {
	if r.ended {
		return
	}
	r.ended = true
	t := r.task
	e.unschedule(&r.wait)
	if !t.distributed() || r.base.Local {
		e.unschedule(&r.hb)
		if !t.distributed() {
			t.stats.runCount++
			t.stats.lastRun = r.first / int64(time.Millisecond)
			if r.base.Late {
				t.stats.late++
			}
			if err != nil {
				t.stats.failed++
				t.stats.lastErr, t.stats.errored = err.Error(), true
			} else {
				t.stats.errored = false
			}
		}
		e.runEnded(r)
		return
	}
	e.sendFinish(r, err)
}

// runEnded releases r's place; a one-shot task that has nothing left is
// dropped.
func (e *Engine) runEnded(r *run) {
	t := r.task
	if r.gone {
		return
	}
	r.gone = true
	e.unschedule(&r.hb)
	e.unschedule(&r.wait)
	t.running--
	e.runs--
	if t.tl.s.kind == KindOnce && !r.base.Manual && !t.removed && t.running == 0 && t.next == 0 {
		e.drop(t)
	}
	// A local run is referenced by nothing once it ended (its items are
	// off the heaps, a late done carries an older gen), so it is reused:
	// one allocation less per firing. A distributed one may still have
	// Store replies on the way.
	if !t.distributed() && len(e.free) < maxFree {
		e.free = append(e.free, r)
	}
}

// drop removes t from this process (not from the Store) and tells its
// registrants (Task.Gone), once.
func (e *Engine) drop(t *task) {
	gone := !t.removed
	e.discard(t)
	if gone {
		for _, r := range t.runners {
			if r.gone != nil {
				r.gone()
			}
		}
	}
}

// discard removes t from this process without telling its registrants.
func (e *Engine) discard(t *task) {
	if e.tasks[t.name] == t {
		delete(e.tasks, t.name)
		e.deleteName(t.name)
	}
	t.removed = true
	t.next = 0
	e.unschedule(&t.fire)
	if t.distributed() {
		e.unschedule(&t.probe)
		e.unschedule(&t.sync)
	}
}

// trigger starts a manual run of a task registered here.
func (e *Engine) trigger(name string) bool {
	t := e.tasks[name]
	if t == nil || e.closing {
		return false
	}
	e.startFiring(t, e.nowNs()/int64(time.Millisecond), Firing{Manual: true})
	return true
}

// detach drops owner's runners.
func (e *Engine) detach(owner string) {
	delete(e.solo, owner) // tasks keep the snapshot they hold
	for _, t := range e.tasks {
		n := len(t.runners)
		t.runners = slices.DeleteFunc(t.runners, func(r runner) bool { return r.owner == owner })
		if len(t.runners) != n {
			e.listOwners(t)
		}
		if len(t.runners) == 0 {
			e.drop(t)
		}
	}
}

// applyControl applies a pause, resume, disable, enable or remove to the
// task here (resume and enable restart it from now, unless the other flag
// still holds it); it
// reports whether the task is registered here. local is true for a
// control of a local task (no Store involved).
func (e *Engine) applyControl(c controlMsg, local bool) bool {
	t := e.tasks[c.Name]
	if t == nil || (local && t.distributed()) {
		return false
	}
	if c.Version != 0 {
		// A message older than what this task applied (its own issuer's
		// apply came first, or a later control's did) changes nothing;
		// the issuer applies its own control even when its message came
		// first, to plan what the message path left to a re-read.
		if c.Version < t.version || c.Version == t.version && !c.issued {
			return true
		}
		t.version = c.Version
	}
	switch c.Op {
	case ctlPause:
		t.paused = true
		t.next = 0
		e.unschedule(&t.fire)
	case ctlDisable:
		t.disabled = true
		t.next = 0
		e.unschedule(&t.fire)
	case ctlResume, ctlEnable:
		if c.Op == ctlResume && !t.paused || c.Op == ctlEnable && !t.disabled {
			if c.issued && t.distributed() && !t.paused && !t.disabled && t.next == 0 {
				// This process heard its own control message first, and
				// the message path is still re-reading the record: plan
				// from now, as the issuing path does, so the caller sees
				// the next run as soon as its call returns.
				t.cursor = max(t.cursor, e.storeNowMs())
				e.planDist(t)
			}
			return true
		}
		if c.Op == ctlResume {
			t.paused = false
		} else {
			t.disabled = false
		}
		if t.paused || t.disabled {
			return true // the other flag still holds it
		}
		switch {
		case t.distributed() && c.Op == ctlEnable && !c.issued:
			// The Store moved the record's cursor to its now when it
			// enabled the task: follow the record rather than this
			// process's now, which is later when the message came late,
			// so every process runs the first fire time after the enable.
			t.lastSync = 0
			e.resync(t)
		case t.distributed():
			t.cursor = max(t.cursor, e.storeNowMs())
			e.planDist(t)
		default:
			e.planLocal(t, e.nowNs()/int64(time.Millisecond))
		}
	case ctlRemove:
		e.drop(t)
	}
	return true
}

// beginClose stops new firings and waits (through idleCh) for the runs.
func (e *Engine) beginClose(idle chan struct{}) {
	e.closing = true
	for _, t := range e.tasks {
		e.unschedule(&t.fire)
		if t.distributed() {
			e.unschedule(&t.probe)
		}
		t.next = 0
	}
	// Pending retries are given up now; their firings count as failed.
	var waiting []*run
	for _, it := range append(slices.Clone(e.heap.items), e.sheap.items...) {
		if it.kind == itemRetry || it.kind == itemStart {
			waiting = append(waiting, it.run)
		}
	}
	for _, r := range waiting {
		if r.attempt == 0 {
			// Claimed but not started: let its lease lapse for another
			// process rather than run it during shutdown.
			e.unschedule(&r.wait)
			e.unschedule(&r.hb)
			r.ended = true
			r.task.running--
			e.runs--
			continue
		}
		err := r.lastErr
		if err == nil {
			err = errors.New("scheduler: engine closed")
		}
		e.endRun(r, err)
	}
	e.idleCh = idle
}

// idle reports that nothing is left to wait for.
func (e *Engine) idle() bool {
	return e.runs == 0 && e.inflight == 0 && len(e.io) == 0
}

// emitMissed tells n missed firings of t, from fire time first to last.
func (e *Engine) emitMissed(t *task, first, last, n int64) {
	if n <= 0 {
		return
	}
	if last < first {
		last = first
	}
	e.emit(t, Event{Kind: EventMissed, Firing: Firing{Task: t.name, Scheduled: time.UnixMilli(first)},
		Last: time.UnixMilli(last), Count: n})
}

// emit hands ev, an event of t, to Config.Events.
func (e *Engine) emit(t *task, ev Event) {
	if e.events != nil {
		ev.Owners = t.owners
		e.events(ev)
	}
}
