// Package clock is the module's one clock interface: what core packages
// take to read the time and arm timers, so tests inject a manual clock
// (internal/testclock implements it) instead of sleeping.
package clock

import "time"

// Clock is a time source with timers.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop cancels the call; it reports whether it was still pending.
	Stop() bool
}

// Real is the system clock (time.Now, time.AfterFunc).
var Real Clock = real{}

type real struct{}

func (real) Now() time.Time                            { return time.Now() }
func (real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// OrReal returns c, or Real when c is nil.
func OrReal(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}
