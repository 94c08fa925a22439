package queue

import (
	"errors"
	"time"

	"github.com/shieldrt/shieldglobal/internal/clock"
)

// Clock is the time source of the memory backend and of consumers' timers
// (the module's one clock interface). Tests pass a manual clock; nil means
// the real one.
type Clock = clock.Clock

func isNotHeld(err error) bool { return errors.Is(err, ErrNotHeld) }

// ms is t in Unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// fromMs is Unix milliseconds as a time.
func fromMs(v int64) time.Time { return time.UnixMilli(v) }
