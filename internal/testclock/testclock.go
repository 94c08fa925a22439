// Package testclock is the module's one fake clock: a manually advanced
// clock for tests of code that takes an injected `now func() time.Time`, a
// clock.Clock or an AfterFunc, so tests need not sleep. Advance jumps and
// fires what came due; AdvanceStepwise and FireNext pass time timer by
// timer; Jump fires nothing; Offset skews a clock.
package testclock

import (
	"sort"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/internal/clock"
)

// Clock is safe for concurrent use. It starts at 2025-01-01 00:00 UTC.
type Clock struct {
	mu     sync.Mutex
	t      time.Time
	timers []*Timer
}

// New returns a clock at 2025-01-01 00:00 UTC.
func New() *Clock { return &Clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d, then calls the function of every
// timer whose deadline it reached, in deadline order, on the calling
// goroutine (after releasing the clock, so they may use it).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	now := c.t
	var due []*Timer
	keep := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(now) {
			due = append(due, t)
			t.pending = false
		} else {
			keep = append(keep, t)
		}
	}
	clear(c.timers[len(keep):])
	c.timers = keep
	c.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

// Timer is a pending AfterFunc of a Clock.
type Timer struct {
	c       *Clock
	at      time.Time
	f       func()
	pending bool
	late    bool // armed through Late: FireNext fires it after others due then
}

// AfterFunc arranges for f to be called by the Advance that moves the
// clock to (or past) d from now. A d <= 0 is called by the next Advance.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer { return c.afterFunc(d, f, false) }

func (c *Clock) afterFunc(d time.Duration, f func(), late bool) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &Timer{c: c, at: c.t.Add(d), f: f, pending: true, late: late}
	c.timers = append(c.timers, t)
	return t
}

// Stop cancels the timer; it reports whether the timer was pending.
func (t *Timer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.pending {
		return false
	}
	t.pending = false
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			break
		}
	}
	return true
}

// Pending returns the number of pending timers.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Next returns the earliest deadline of the pending timers (which may be
// now or before: a timer armed with d <= 0); ok is false when none is
// pending. Virtual time (the spec runner's) jumps the clock to it.
func (c *Clock) Next() (at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if !ok || t.at.Before(at) {
			at, ok = t.at, true
		}
	}
	return at, ok
}

// FireNext moves the clock to the earliest pending timer's deadline (if
// that is later than now) and calls that one timer's function, on the
// calling goroutine; of timers due at the same time the one armed first
// goes first. It reports false, changing nothing, when no timer is
// pending. Of timers due at the same time those armed through Late go
// after the others. Virtual time fires timers one at a time this way,
// letting the effects of each settle before the next.
func (c *Clock) FireNext() bool { return c.fireNext(time.Time{}, false) }

// AdvanceStepwise moves the clock forward by d the way real time passes:
// one timer at a time, as FireNext does, while a pending timer is due by
// the end (now + d), including timers armed meanwhile by the functions it
// calls; then it sets the clock to the end. So each function runs with
// the clock at its own deadline, and a timer re-armed within d fires again
// in the same call. (Advance jumps to the end first and calls only the
// timers due then, all seeing the end.)
func (c *Clock) AdvanceStepwise(d time.Duration) {
	c.mu.Lock()
	end := c.t.Add(d)
	c.mu.Unlock()
	for c.fireNext(end, true) {
	}
	c.mu.Lock()
	if end.After(c.t) {
		c.t = end
	}
	c.mu.Unlock()
}

// Jump moves the clock forward by d without calling any timer: those that
// came due stay pending, as timers whose goroutines have not run yet, and
// fire (late) on the next Advance, AdvanceStepwise or FireNext. For tests
// of code that must cope with time passing before its timer fires.
func (c *Clock) Jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fireNext is FireNext; bounded, it leaves a timer due after until alone
// and reports false.
func (c *Clock) fireNext(until time.Time, bounded bool) bool {
	c.mu.Lock()
	i := -1
	for j, t := range c.timers {
		if i < 0 || t.at.Before(c.timers[i].at) || (t.at.Equal(c.timers[i].at) && c.timers[i].late && !t.late) {
			i = j
		}
	}
	if i < 0 || bounded && c.timers[i].at.After(until) {
		c.mu.Unlock()
		return false
	}
	t := c.timers[i]
	c.timers = append(c.timers[:i], c.timers[i+1:]...)
	t.pending = false
	if t.at.After(c.t) {
		c.t = t.at
	}
	c.mu.Unlock()
	t.f()
	return true
}

// Offset returns c seen through a fixed offset: Now is c's time plus d,
// and timers are c's (a duration is the same on both). It stands for a
// process whose clock is off by d; Offset(clock.Real, d) is the system
// clock off by d.
func Offset(c clock.Clock, d time.Duration) clock.Clock { return offset{c, d} }

type offset struct {
	c clock.Clock
	d time.Duration
}

func (o offset) Now() time.Time                                  { return o.c.Now().Add(o.d) }
func (o offset) AfterFunc(d time.Duration, f func()) clock.Timer { return o.c.AfterFunc(d, f) }

// Late returns c as a clock.Clock whose timers FireNext fires after the
// other timers due at the same time: the spec runner gives it to the
// runtime, so a task that sleeps until 00:00 resumes after what the
// scheduler and the backend had due at 00:00 has run.
func (c *Clock) Late() clock.Clock { return lateClock{c} }

type lateClock struct{ c *Clock }

func (l lateClock) Now() time.Time { return l.c.Now() }
func (l lateClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return l.c.afterFunc(d, f, true)
}
