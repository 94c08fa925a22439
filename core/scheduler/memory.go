package scheduler

import (
	"fmt"
	"sync"
	"time"
)

// Memory is an in-process Store with the semantics of Redis, step for step
// (the conformance suite checks both): one Engine per process uses it so
// that a distributed task runs once across the process's runtimes, and
// tests run several Engines on one Memory to check the claim protocol on a
// fake clock. Its operations are store.Local ops (they never wait on I/O);
// control messages are delivered synchronously to Subscribe callbacks by
// the goroutine whose operation caused them, after the Store's mutex is
// released. It starts no goroutine.
type Memory struct {
	now func() time.Time

	mu    sync.Mutex
	tasks map[string]*memRecord
	trigs map[memTrigKey]*memTrig
	subs  map[int]func(controlMsg)
	next  int
}

type memRecord struct {
	record
	runs     map[int64]*memRun
	expireAt int64 // Store ms; 0 = never (one-shot records expire)
}

// lookup returns name's record, dropping it if it expired; a tombstone
// (Done) is returned only if tombstones is set.
func (m *Memory) lookup(name string, now int64, tombstones bool) *memRecord {
	r := m.tasks[name]
	if r == nil {
		return nil
	}
	if r.expireAt != 0 && now > r.expireAt {
		delete(m.tasks, name)
		return nil
	}
	if r.Done && !tombstones {
		return nil
	}
	return r
}

type memRun struct {
	owner    string
	attempt  int
	deadline int64 // ms; the lease is live while now <= deadline
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory reading the time from now (time.Now
// when nil).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, tasks: make(map[string]*memRecord), trigs: make(map[memTrigKey]*memTrig),
		subs: make(map[int]func(controlMsg))}
}

// op runs fn under the mutex at the Store's now, then delivers the control
// messages fn returned.
func memOp[T any](m *Memory, fn func(now int64) (T, []controlMsg, error)) step[T] {
	return step[T]{local: func() (T, error) {
		m.mu.Lock()
		v, msgs, err := fn(m.now().UnixMilli())
		var subs []func(controlMsg)
		if len(msgs) > 0 {
			for _, s := range m.subs {
				subs = append(subs, s)
			}
		}
		m.mu.Unlock()
		for _, c := range msgs {
			for _, s := range subs {
				s(c)
			}
		}
		return v, err
	}}
}

func (r *memRecord) view(now int64) record {
	v := r.record
	v.Now = now
	for _, run := range r.runs {
		if run.deadline >= now {
			v.Running++
		} else {
			v.Orphaned = true
		}
	}
	return v
}

// initialCursor is where a new (or re-scheduled) record's cursor starts:
// fire times after registration are its own; a one-shot's time counts even
// if it is already past (it then runs if within catch-up).
func initialCursor(kind Kind, anchor, now int64) int64 {
	if kind == KindOnce {
		return min(anchor, now) - 1
	}
	return now
}

// register implements Store.
func (m *Memory) register(d def) step[registered] {
	return memOp(m, func(now int64) (registered, []controlMsg, error) {
		anchor := now
		if d.At > 0 {
			anchor = d.At
		}
		r := m.lookup(d.Name, now, true)
		if r != nil && r.Done {
			return registered{record: r.view(now), Done: true}, nil, nil
		}
		if r == nil {
			a, cursor := anchor, initialCursor(d.Kind, anchor, now)
			if d.Anchor > 0 && d.At == 0 {
				a = d.Anchor
			}
			if d.Cursor > 0 {
				cursor = d.Cursor
			}
			r = &memRecord{record: record{Name: d.Name, Kind: d.Kind, Spec: d.Spec, Text: d.Text, Timezone: d.Timezone,
				Anchor: a, Cursor: cursor, Version: 1}, runs: map[int64]*memRun{}}
			if d.Expire > 0 {
				r.expireAt = a + d.Expire.Milliseconds()
			}
			m.tasks[d.Name] = r
			return registered{record: r.view(now), Created: true}, nil, nil
		}
		if r.Kind != d.Kind {
			return registered{}, nil, fmt.Errorf("%w: task %q is a %s task in the store, not %s", ErrKindConflict, d.Name, r.Kind, d.Kind)
		}
		if r.Spec == d.Spec && r.Timezone == d.Timezone {
			return registered{record: r.view(now)}, nil, nil
		}
		r.Spec, r.Text, r.Timezone, r.Anchor = d.Spec, d.Text, d.Timezone, anchor
		if d.Expire > 0 {
			r.expireAt = anchor + d.Expire.Milliseconds()
		}
		r.Cursor = max(r.Cursor, initialCursor(d.Kind, anchor, now))
		r.Version++
		return registered{record: r.view(now), Updated: true}, []controlMsg{{Op: ctlUpdate, Name: d.Name}}, nil
	})
}

// Claim implements Store.
func (m *Memory) claim(c claim) step[claimResult] {
	return memOp(m, func(now int64) (claimResult, []controlMsg, error) {
		res := claimResult{Now: now}
		r := m.lookup(c.Name, now, true)
		if r == nil {
			res.Outcome = outcomeUnknown
			return res, nil, nil
		}
		res.Version = r.Version
		if r.Done {
			res.Outcome, res.Cursor = outcomeTaken, r.Cursor
			return res, nil, nil
		}
		live := 0
		for fire, run := range r.runs {
			if run.deadline < now {
				if res.Orphan == 0 || fire < res.Orphan {
					res.Orphan = fire
				}
			} else {
				live++
			}
		}
		if run := r.runs[c.Probe]; c.Probe != 0 && run != nil {
			res.RunDeadline = run.deadline
		}
		res.Cursor = r.Cursor
		switch {
		case c.Fire == 0:
			res.Outcome = outcomeNone
			return res, nil, nil
		case r.Disabled:
			res.Outcome = outcomeDisabled
			return res, nil, nil
		case r.Paused:
			res.Outcome = outcomePaused
			return res, nil, nil
		case c.Fire <= r.Cursor:
			res.Outcome = outcomeTaken
			if run := r.runs[c.Fire]; run != nil {
				res.RunDeadline = run.deadline
			}
			return res, nil, nil
		case now < c.Fire-c.Early.Milliseconds():
			res.Outcome = outcomeEarly
			res.Wait = time.Duration(c.Fire-c.Early.Milliseconds()-now) * time.Millisecond
			return res, nil, nil
		}
		r.Cursor = c.Fire
		if res.Cursor == c.ExpectPrev {
			r.Missed += c.Missed
		} else {
			res.Recount = true
		}
		switch {
		case c.MissOnly || now-c.Fire > c.CatchUp.Milliseconds():
			r.Missed++
			res.Outcome = outcomeMissed
			if c.Keep > 0 {
				r.Done = true
				r.expireAt = now + max(c.Keep, time.Second).Milliseconds()
				return res, []controlMsg{{Op: ctlRemove, Name: c.Name}}, nil
			}
		case c.Skip && live > 0:
			r.Skipped++
			res.Outcome = outcomeSkipped
		default:
			r.runs[c.Fire] = &memRun{owner: c.Owner, attempt: 1, deadline: now + c.Lease.Milliseconds()}
			res.Outcome = outcomeClaimed
		}
		return res, nil, nil
	})
}

// recover implements Store.
func (m *Memory) recover(name string, fire int64, owner string, lease time.Duration) step[recoverResult] {
	return memOp(m, func(now int64) (recoverResult, []controlMsg, error) {
		res := recoverResult{Now: now}
		r := m.lookup(name, now, false)
		if r == nil {
			return res, nil, nil
		}
		run := r.runs[fire]
		switch {
		case run == nil:
		case run.deadline >= now:
			res.Deadline = run.deadline
		default:
			run.owner, run.deadline = owner, now+lease.Milliseconds()
			res.Recovered, res.Attempt = true, run.attempt
		}
		return res, nil, nil
	})
}

// heartbeat implements Store.
func (m *Memory) heartbeat(name string, fire int64, owner string, attempt int, lease time.Duration) step[heartbeatResult] {
	return memOp(m, func(now int64) (heartbeatResult, []controlMsg, error) {
		res := heartbeatResult{Now: now}
		if r := m.lookup(name, now, false); r != nil {
			if run := r.runs[fire]; run != nil && run.owner == owner {
				run.deadline, run.attempt = now+lease.Milliseconds(), attempt
				res.Held = true
			}
		}
		return res, nil, nil
	})
}

// Finish implements Store.
func (m *Memory) finish(f finish) step[finishResult] {
	return memOp(m, func(now int64) (finishResult, []controlMsg, error) {
		r := m.lookup(f.Name, now, false)
		if r == nil {
			return finishResult{Held: f.Manual}, nil, nil
		}
		res := finishResult{Found: true, Held: true}
		if !f.Manual {
			run := r.runs[f.Fire]
			if run == nil || run.owner != f.Owner {
				res.Held = false
				res.Record = r.view(now)
				return res, nil, nil
			}
			delete(r.runs, f.Fire)
		}
		r.RunCount++
		r.LastRun = f.Started
		if f.Late {
			r.Late++
		}
		if f.Fail {
			r.Failed++
			r.LastError, r.Errored = f.Err, true
		} else {
			r.Errored = false
		}
		res.Record = r.view(now)
		if f.Once && !f.Manual {
			r.Done = true
			r.expireAt = now + max(f.Keep, time.Second).Milliseconds()
			return res, []controlMsg{{Op: ctlRemove, Name: f.Name}}, nil
		}
		return res, nil, nil
	})
}

// addMissed implements Store.
func (m *Memory) addMissed(name string, n int64) step[struct{}] {
	return memOp(m, func(now int64) (struct{}, []controlMsg, error) {
		if r := m.lookup(name, now, false); r != nil {
			r.Missed += n
		}
		return struct{}{}, nil, nil
	})
}

// control implements Store.
func (m *Memory) control(name string, op controlOp) step[controlled] {
	if !op.valid() {
		return step[controlled]{local: func() (controlled, error) {
			return controlled{}, fmt.Errorf("%w: control %q", ErrInvalid, op)
		}}
	}
	return memOp(m, func(now int64) (controlled, []controlMsg, error) {
		r := m.lookup(name, now, false)
		if r == nil {
			return controlled{}, nil, nil
		}
		switch op {
		case ctlPause:
			r.Paused = true
		case ctlResume:
			r.Paused = false
			r.Cursor = max(r.Cursor, now)
		case ctlDisable:
			r.Disabled = true
		case ctlEnable:
			if r.Disabled {
				r.Disabled = false
				r.Cursor = max(r.Cursor, now)
			}
		case ctlRemove:
			delete(m.tasks, name)
			return controlled{Found: true}, []controlMsg{{Op: op, Name: name}}, nil
		}
		r.Version++
		return controlled{Found: true, Version: r.Version}, []controlMsg{{Op: op, Name: name, Version: r.Version}}, nil
	})
}

// get implements Store.
func (m *Memory) get(name string) step[found] {
	return memOp(m, func(now int64) (found, []controlMsg, error) {
		r := m.lookup(name, now, false)
		if r == nil {
			return found{record: record{Now: now}}, nil, nil
		}
		return found{record: r.view(now), Found: true}, nil, nil
	})
}

// memTrigKey names a trigger (Redis: its key).
type memTrigKey struct{ name, id string }

// memTrig is a trigger: unclaimed while owner is "".
type memTrig struct {
	owner    string
	expireAt int64 // Store ms: past it the trigger is gone (Redis: PX)
}

// trig returns a trigger that has not expired, dropping expired ones.
func (m *Memory) trig(k memTrigKey, now int64) *memTrig {
	tr := m.trigs[k]
	if tr != nil && now > tr.expireAt {
		delete(m.trigs, k)
		return nil
	}
	return tr
}

// sendTrigger implements Store.
func (m *Memory) sendTrigger(name, id string, window time.Duration) step[bool] {
	return memOp(m, func(now int64) (bool, []controlMsg, error) {
		if m.lookup(name, now, false) == nil {
			return false, nil, nil
		}
		for k, tr := range m.trigs { // expire the rest, as Redis would
			if now > tr.expireAt {
				delete(m.trigs, k)
			}
		}
		m.trigs[memTrigKey{name, id}] = &memTrig{expireAt: now + window.Milliseconds()}
		return true, []controlMsg{{Op: ctlTrigger, Name: name, ID: id}}, nil
	})
}

// claimTrigger implements Store.
func (m *Memory) claimTrigger(name, id, owner string) step[trigReply] {
	return memOp(m, func(now int64) (trigReply, []controlMsg, error) {
		tr := m.trig(memTrigKey{name, id}, now)
		if tr == nil {
			return trigReply{Now: now}, nil, nil
		}
		if tr.owner == "" {
			tr.owner = owner
		}
		return trigReply{State: trigClaimed, Owner: tr.owner, Now: now}, nil, nil
	})
}

// triggerState implements Store.
func (m *Memory) triggerState(name, id string) step[trigReply] {
	return memOp(m, func(now int64) (trigReply, []controlMsg, error) {
		tr := m.trig(memTrigKey{name, id}, now)
		switch {
		case tr == nil:
			return trigReply{Now: now}, nil, nil
		case tr.owner == "":
			return trigReply{State: trigPending, Now: now}, nil, nil
		}
		return trigReply{State: trigClaimed, Owner: tr.owner, Now: now}, nil, nil
	})
}

// subscribe implements Store.
func (m *Memory) subscribe(fn func(controlMsg)) (func(), error) {
	m.mu.Lock()
	id := m.next
	m.next++
	m.subs[id] = fn
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			delete(m.subs, id)
			m.mu.Unlock()
		})
	}, nil
}

// clock implements Store: the Memory's clock is in-process.
func (m *Memory) clock() func() time.Time { return m.now }
