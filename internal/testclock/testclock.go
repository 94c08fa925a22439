// Package testclock is a manually advanced clock for tests of code that
// takes an injected `now func() time.Time`, so tests need not sleep.
package testclock

import (
	"sync"
	"time"
)

// Clock is safe for concurrent use. It starts at 2025-01-01 00:00 UTC.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock at 2025-01-01 00:00 UTC.
func New() *Clock { return &Clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
