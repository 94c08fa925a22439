package scheduler

import (
	"time"

	"github.com/shieldrt/shieldglobal/internal/clock"
)

// Clock is the Engine's time source, the module's one clock interface.
// Tests inject a fake one (internal/testclock); nil means the real clock
// below (timerfd-precise timers on Linux).
type Clock = clock.Clock

// Timer is a pending AfterFunc.
type Timer = clock.Timer

// realClock is the system clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return sysAfterFunc(d, f) }
