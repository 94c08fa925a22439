package queue

import (
	"errors"
	"time"
)

// Clock is the time source of the memory backend and of consumers' timers.
// Tests pass a manual clock; nil means the real one.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine once d has passed; stop
	// prevents that if it has not happened yet and reports whether it did.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

func orReal(c Clock) Clock {
	if c == nil {
		return realClock{}
	}
	return c
}

func isNotHeld(err error) bool { return errors.Is(err, ErrNotHeld) }

// ms is t in Unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// fromMs is Unix milliseconds as a time.
func fromMs(v int64) time.Time { return time.UnixMilli(v) }
