// Package testclock is a manually advanced clock for tests of code that
// takes an injected `now func() time.Time` or a clock.Clock, so tests need
// not sleep.
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
}

// AfterFunc arranges for f to be called by the Advance that moves the
// clock to (or past) d from now. A d <= 0 is called by the next Advance.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &Timer{c: c, at: c.t.Add(d), f: f, pending: true}
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
