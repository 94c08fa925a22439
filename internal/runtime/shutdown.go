package runtime

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Shutdown.
//
// Close waits on the loop several times: for the closers and the tasks to
// end, for the interrupted tasks to unwind, for the Redis work they left to
// drain, for the loop to stop. Any of these may never come (a task that
// never yields, a Go function called from Lua that never returns), so every
// wait has a deadline, and the ones after the grace period share one: Close
// returns within grace + killWait whatever the loop does.

// KillWait bounds how long Close waits for the loop once the grace period
// is over: the time for the interrupted tasks to unwind, for their releases
// to reach Redis, or for a Go function that does not return to be given up
// on.
const KillWait = 2 * time.Second

// InterruptedTask is a task Close had to interrupt after its grace period,
// and what it was doing then.
type InterruptedTask struct {
	Name string
	// Waiting is the blocking call the task was parked in ("shield.sleep"),
	// empty when it was not parked.
	Waiting string
	// Running is true for the task that was running when the grace period
	// ended: Lua that had not yielded, or a Go function called from Lua that
	// had not returned.
	Running bool
	// At is file:line where the task was: the line of its blocking call, or
	// the instruction it was interrupted at. Empty when unknown.
	At string
}

// String renders the task for a log line: "spawn (waiting in shield.sleep
// at main.lua:3)", "main.lua (did not yield; at main.lua:7)", "spawn (ready
// to run)" for a task that had yielded or not started yet.
func (it InterruptedTask) String() string {
	state := "ready to run"
	switch {
	case it.Waiting != "":
		state = "waiting in " + it.Waiting
		if it.At != "" {
			state += " at " + it.At
		}
	case it.Running:
		state = "did not yield"
		if it.At != "" {
			state += "; at " + it.At
		}
	}
	return it.Name + " (" + state + ")"
}

// errInterruptedWaiting ends a task parked in a blocking call when Close
// interrupts it: it did yield, so ErrInterrupted's text would be untrue.
// It matches ErrInterrupted with errors.Is.
type errInterruptedWaiting struct{ call, at string }

func (e *errInterruptedWaiting) Error() string {
	where := ""
	if e.at != "" {
		where = " at " + e.at
	}
	return "shield: task interrupted: still waiting in " + e.call + where + " when the shutdown grace period ended"
}

func (e *errInterruptedWaiting) Is(target error) bool { return target == ErrInterrupted }

// Close stops the runtime: closers run (subscriptions end), running tasks get
// up to grace to finish; then every task still alive is interrupted — Lua
// that is running raises ErrInterrupted at its next instruction, a task
// parked in a blocking call ends at once — in-flight work is cancelled and
// the loop ends. Close returns within grace + 2 s even when a task never
// yields or a Go function called from Lua never returns (the loop is then
// given up on, with an error log). The LState itself is left to its owner.
// Idempotent; a second call returns when the first one is done with the loop.
func (rt *Runtime) Close(grace time.Duration) {
	rt.mu.Lock()
	if rt.closing {
		rt.mu.Unlock()
		<-rt.done // closed by the first Close at the latest when it gives up on the loop
		return
	}
	rt.closing = true
	rt.mu.Unlock()

	idle := make(chan struct{})
	rt.Post(func() {
		rt.endWaits()
		for len(rt.closers) > 0 {
			for id, fn := range rt.closers {
				delete(rt.closers, id)
				fn()
			}
		}
		rt.keepalive = 0
		rt.idle = append(rt.idle, idle)
		rt.checkIdle()
	})
	timer := time.NewTimer(grace)
	defer timer.Stop()
	var giveUp time.Time
	select {
	case <-idle:
		giveUp = time.Now().Add(KillWait)
	case <-timer.C:
		giveUp = time.Now().Add(KillWait)
		rt.interruptAlive(grace, giveUp)
	}
	rt.drain(min(KillWait/2, time.Until(giveUp)))
	rt.cancel()
	rt.mu.Lock()
	rt.stopped = true
	idleNow := !rt.owned // else the holder closes done when it lets go
	rt.mu.Unlock()
	if idleNow {
		rt.stopOnce.Do(func() { close(rt.done) })
	}
	wait := time.NewTimer(max(time.Until(giveUp), 0))
	defer wait.Stop()
	select {
	case <-rt.done:
	case <-wait.C:
		task := "(none)"
		if t := rt.mon.task.Load(); t != nil && rt.mon.start.Load() != 0 {
			task = t.Name
		}
		rt.log.Error("shield: the runtime loop did not stop: a Go function called from Lua does not return; giving up on it",
			"task", task)
		// Every wait on the loop (Do, RunFile, Wait, a second Close) ends
		// now; nobody takes the loop again (stopped).
		rt.stopOnce.Do(func() { close(rt.done) })
	}
	rt.runStopFns(giveUp)
}

// runStopFns runs the OnStop functions side by side and waits for them
// until giveUp (each bounds its own wait too).
func (rt *Runtime) runStopFns(giveUp time.Time) {
	rt.mu.Lock()
	stops := rt.stopFns
	rt.stopFns = nil
	rt.mu.Unlock()
	if len(stops) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, fn := range stops {
		wg.Add(1)
		go func() { defer wg.Done(); fn() }()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	t := time.NewTimer(max(time.Until(giveUp), 0))
	defer t.Stop()
	select {
	case <-all:
	case <-t.C:
	}
}

// interruptAlive is Close's last resort after grace: Lua that is running
// (a task that never yields) is made to raise at its next instruction, and
// every task still alive ends with ErrInterrupted, a parked one with
// errInterruptedWaiting. It waits for that until by.
func (rt *Runtime) interruptAlive(grace time.Duration, by time.Time) {
	attrs := []any{"grace", grace, "tasks", rt.Tasks()}
	if t := rt.mon.task.Load(); t != nil && rt.mon.start.Load() != 0 {
		rt.vm.hog.Store(t)
		attrs = append(attrs, "running", t.Name)
	}
	if grace > 0 {
		rt.log.Warn("shield: tasks still alive after the shutdown grace period; interrupting them", attrs...)
	}
	rt.vm.interrupt()
	ended := make(chan struct{})
	var sweep func()
	sweep = func() {
		for _, t := range rt.threads {
			if t != nil && !t.ended {
				rt.finishTask(t, rt.interruptCause(t), false) // the loop is here: t is suspended
			}
		}
		// Tasks spawned but not started yet, or spawned by the cleanups
		// of those that just ended, start on a later turn (and are
		// interrupted at their first instruction): count them too.
		if (rt.starting > 0 || rt.live.Load() > 0) && time.Now().Before(by) {
			rt.postLocal(sweep)
			return
		}
		close(ended)
	}
	rt.Post(sweep)
	t := time.NewTimer(max(time.Until(by), 0))
	defer t.Stop()
	select {
	case <-ended:
	case <-t.C:
	}
	rt.mu.Lock()
	tasks := append([]InterruptedTask(nil), rt.interrupted...)
	rt.mu.Unlock()
	if len(tasks) == 0 {
		return
	}
	names := make([]string, 0, min(len(tasks), 11))
	for i, it := range tasks {
		if i == 10 {
			names = append(names, fmt.Sprintf("and %d more", len(tasks)-10))
			break
		}
		names = append(names, it.String())
	}
	attrs = []any{"count", len(tasks), "tasks", strings.Join(names, ", ")}
	if n := rt.Tasks(); n > 0 { // the loop did not come back in time
		attrs = append(attrs, "still_alive", n)
	}
	rt.log.Warn("shield: interrupted tasks", attrs...)
}

// interruptCause is the error a suspended task t ends with when Close
// interrupts it. Loop only.
func (rt *Runtime) interruptCause(t *Task) error {
	if o := t.waiting; o != nil {
		return &errInterruptedWaiting{call: o.name, at: strings.TrimSuffix(opWhere(o), ": ")}
	}
	return ErrInterrupted
}

// noteInterrupted records t, which ended with err after Close interrupted
// the runtime. Loop only.
func (rt *Runtime) noteInterrupted(t *Task, err error) {
	it := InterruptedTask{Name: t.Name}
	var w *errInterruptedWaiting
	switch {
	case errors.As(err, &w):
		it.Waiting, it.At = w.call, w.at
	case rt.vm.hog.Load() == t:
		it.Running, it.At = true, t.killedAt
	}
	rt.mu.Lock()
	rt.interrupted = append(rt.interrupted, it)
	rt.mu.Unlock()
}

// OnStop registers fn to run when Close has stopped the runtime, before
// Close returns. The functions run side by side, each on a goroutine of its
// own; Close waits for them until its deadline (grace + 2 s).
func (rt *Runtime) OnStop(fn func()) {
	rt.mu.Lock()
	rt.stopFns = append(rt.stopFns, fn)
	rt.mu.Unlock()
}

// Interrupted returns the names of the tasks Close had to interrupt after
// its grace period (empty after a clean stop). Call it after Close.
func (rt *Runtime) Interrupted() []string {
	tasks := rt.InterruptedTasks()
	names := make([]string, len(tasks))
	for i, it := range tasks {
		names[i] = it.Name
	}
	return names
}

// InterruptedTasks is Interrupted with what each task was doing when the
// grace period ended. Call it after Close.
func (rt *Runtime) InterruptedTasks() []InterruptedTask {
	select {
	case <-rt.done:
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return append([]InterruptedTask(nil), rt.interrupted...)
	default:
		return nil
	}
}
