package scheduler

import "time"

// Clock is the Engine's time source. Tests inject a fake one
// (internal/testclock satisfies it through a small adapter); nil means the
// real clock.
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

// realClock is the system clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return sysAfterFunc(d, f) }
