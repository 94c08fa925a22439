package lock

import (
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/clock"
)

// Loop is the one goroutine a Session lives on (a Lua runtime's loop; the
// contract every core session shares). Every method of a Session, Lock and
// Hold must be called on it, and every callback they take is called on it.
type Loop = store.Loop

// Clock is the time of a Service (the module's one clock interface): Now,
// and timers whose functions run on some goroutine (a Session posts from
// them to its loop).
type Clock = clock.Clock

// Timer is a timer of a Clock.
type Timer = clock.Timer
