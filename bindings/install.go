// Package bindings is the gopher-lua glue of shield_global's capabilities:
// one file per capability that checks arguments, converts values and calls
// the runtime's blocking primitive (internal/runtime). Business logic lives
// in core/.
package bindings

import (
	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// The capabilities of this package. Each installs through its own file's
// install function.

// Install implements Capability: shield.global.
func (g *Global) Install(rt *runtime.Runtime, lib *lua.LTable) { installGlobal(rt, lib, g) }

// Install implements Capability: shield.mutex, rwlock, spinlock, lock and
// the distributed locks.
func (l *Locks) Install(rt *runtime.Runtime, lib *lua.LTable) { installLocks(rt, lib, l) }

// Install implements Capability: shield.rank.
func (r *Ranks) Install(rt *runtime.Runtime, lib *lua.LTable) { installRanks(rt, lib, r) }

// Install implements Capability: the five queue constructors.
func (q *Queues) Install(rt *runtime.Runtime, lib *lua.LTable) { installQueues(rt, lib, q) }

// Install implements Capability: shield.rate_limiter.
func (l *Limiters) Install(rt *runtime.Runtime, lib *lua.LTable) { installRateLimiter(rt, lib, l) }

// Install implements Capability: shield.scheduler.
func (s *Scheduler) Install(rt *runtime.Runtime, lib *lua.LTable) { installScheduler(rt, lib, s) }
