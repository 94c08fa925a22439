package runtime

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Interrupting Lua that never yields.
//
// Every thread the runtime creates runs with vmContext as its gopher-lua
// context, so the VM calls Done before each instruction. Closing kill makes
// the running instruction raise errInterrupted: a task stuck in
// `while true do end` ends with that error at its current line, and the
// loop goes on. Done is also where the long-running-task monitor, which
// lives on another goroutine, gets the running line: it sets probe, and the
// VM (on the loop goroutine, where reading the Lua state is safe) records
// the line at its next instruction.

// ErrInterrupted is the error a task stopped by Close after its grace period
// ends with (its message is what the task's Lua error says).
var ErrInterrupted = errors.New("shield: task interrupted: it did not yield within the shutdown grace period")

type vmContext struct {
	kill     chan struct{}
	killOnce sync.Once
	// flags is non-zero while probe or target is set: Done's slow path.
	flags atomic.Uint32
	line  atomic.Pointer[string]
	rt    *Runtime
	// hog is the task that was running when Close interrupted the runtime.
	hog atomic.Pointer[Task]

	mu      sync.Mutex
	targets map[*Group]error // groups whose tasks to interrupt, with the cause (InterruptGroup)
}

const (
	flagProbe  = 1 << iota // record the running line
	flagTarget             // interrupt target when it runs
	flagKill               // interrupt whatever runs
)

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *vmContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *vmContext) Value(any) any               { return nil }

// Done is called by the VM before every instruction of every task thread.
// Nothing to do is a nil channel, which the VM's select skips cheapest.
func (c *vmContext) Done() <-chan struct{} {
	if c.flags.Load() != 0 {
		return c.slow()
	}
	return nil
}

// slow runs on the loop goroutine, inside the VM.
func (c *vmContext) slow() <-chan struct{} {
	f := c.flags.Load()
	if f&flagProbe != 0 {
		line := currentLine(c.rt.L.G.CurrentThread)
		c.line.Store(&line)
		c.flags.And(^uint32(flagProbe))
	}
	if f&flagKill != 0 {
		if t := c.rt.running; t != nil && t.killedAt == "" {
			t.killedAt = currentLine(c.rt.L.G.CurrentThread)
		}
		return closedChan
	}
	if f&flagTarget != 0 {
		if hit, _ := c.targeted(); hit {
			return closedChan
		}
	}
	return nil
}

// targeted reports whether the running task is one to interrupt, and why.
// Loop only.
func (c *vmContext) targeted() (bool, error) {
	t := c.rt.running
	if t == nil || t.group == nil {
		return false, nil
	}
	c.mu.Lock()
	cause, ok := c.targets[t.group]
	c.mu.Unlock()
	return ok, cause
}

func (c *vmContext) Err() error {
	select {
	case <-c.kill:
		return ErrInterrupted
	default:
	}
	if c.flags.Load()&flagTarget != 0 {
		if hit, cause := c.targeted(); hit {
			return cause
		}
	}
	return nil
}

func (c *vmContext) probe() { c.flags.Or(flagProbe) }

func (c *vmContext) interrupt() {
	c.killOnce.Do(func() {
		close(c.kill)
		c.flags.Or(flagKill)
	})
}

func (c *vmContext) killed() bool {
	select {
	case <-c.kill:
		return true
	default:
		return false
	}
}

// aim makes the tasks of g raise cause at their next instruction.
func (c *vmContext) aim(g *Group, cause error) {
	c.mu.Lock()
	if c.targets == nil {
		c.targets = map[*Group]error{}
	}
	c.targets[g] = cause
	c.flags.Or(flagTarget)
	c.mu.Unlock()
}

// unaim forgets g; it reports whether g was aimed at.
func (c *vmContext) unaim(g *Group) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.targets[g]
	delete(c.targets, g)
	if len(c.targets) == 0 {
		c.flags.And(^uint32(flagTarget))
	}
	return ok
}

// aimed returns the cause g is aimed with, or nil.
func (c *vmContext) aimed(g *Group) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.targets[g]
}

// monitor watches how long the loop has been inside one resume: a task that
// runs longer than threshold without yielding is logged once per resume,
// with its name and the line it is at.
type monitor struct {
	threshold time.Duration
	// Written by the loop, read by the watcher goroutine.
	seq   atomic.Uint64 // resumes so far
	start atomic.Int64  // nanotime when the running resume began; 0 when idle
	task  atomic.Pointer[Task]
}

func (m *monitor) enter(t *Task) {
	m.task.Store(t)
	m.seq.Add(1)
	m.start.Store(nanotime())
}

func (m *monitor) leave() { m.start.Store(0) }

// Responsive reports whether the runtime's loop makes progress: no resume
// has been running for longer than within (a task that never yields, or a
// Go function called from Lua that does not return, wedges the loop). Safe
// from any goroutine. Work that must not outlive a wedged loop — extending
// a lease, a message's visibility — checks it.
func (rt *Runtime) Responsive(within time.Duration) bool {
	start := rt.mon.start.Load()
	return start == 0 || time.Duration(nanotime()-start) < within
}

// watch runs on its own goroutine until stop is closed.
func (rt *Runtime) watch(stop <-chan struct{}) {
	m := &rt.mon
	lag := rt.svc.Observe.LoopLag
	if m.threshold <= 0 && lag == nil {
		return
	}
	every := 250 * time.Millisecond
	if m.threshold > 0 {
		every = min(max(m.threshold/4, 10*time.Millisecond), every)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var reported, probed uint64
	var probedAt int64
	var probing atomic.Bool
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if lag != nil && probing.CompareAndSwap(false, true) {
			posted := nanotime()
			if !rt.TryPost(func() { lag(time.Duration(nanotime() - posted)); probing.Store(false) }) {
				return
			}
		}
		if m.threshold <= 0 {
			continue
		}
		start, seq := m.start.Load(), m.seq.Load()
		if start == 0 || seq == reported || time.Duration(nanotime()-start) < m.threshold {
			continue
		}
		if probed != seq { // ask the VM for the line; report once it answers
			probed, probedAt = seq, nanotime()
			rt.vm.line.Store(nil)
			rt.vm.probe()
			continue
		}
		p := rt.vm.line.Load()
		if p == nil && time.Duration(nanotime()-probedAt) < m.threshold {
			// No instruction ran since the probe: the task is inside a Go
			// function, or this goroutine ran two ticks back to back after
			// a delay and the loop has not had its turn yet.
			continue
		}
		reported = seq
		line := "(inside a Go function)"
		if p != nil && *p != "" {
			line = *p
		}
		name := "?"
		if t := m.task.Load(); t != nil {
			name = t.Name
		}
		rt.log.Warn("shield: task has run without yielding; every other task of its runtime waits",
			"task", name, "at", line, "for", time.Duration(nanotime()-start).Round(time.Millisecond))
	}
}

var processStart = time.Now()

// nanotime is a monotonic clock reading.
func nanotime() int64 { return int64(time.Since(processStart)) }
