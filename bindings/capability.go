package bindings

import lua "github.com/yuin/gopher-lua"

// Capability is the runtime side of one row of the Module's capability
// table (the root package's capabilities.go): what a capability puts into
// the shield table of every new runtime. NewRuntime installs
// Services.Capabilities in their order, after the basics (sleep, spawn,
// now_ms, owner, log). Install runs on the loop, before any script.
type Capability interface {
	Install(rt *Runtime, lib *lua.LTable)
}

// InstallFunc adapts a function to Capability.
type InstallFunc func(rt *Runtime, lib *lua.LTable)

// Install implements Capability.
func (f InstallFunc) Install(rt *Runtime, lib *lua.LTable) { f(rt, lib) }

// The capabilities of this package. Each installs through its own file's
// install function.

// Install implements Capability: shield.global.
func (g *Global) Install(rt *Runtime, lib *lua.LTable) { rt.installGlobal(lib, g) }

// Install implements Capability: shield.mutex, rwlock, spinlock, lock and
// the distributed locks.
func (l *Locks) Install(rt *Runtime, lib *lua.LTable) { rt.installLocks(lib, l) }

// Install implements Capability: shield.rank.
func (r *Ranks) Install(rt *Runtime, lib *lua.LTable) { rt.installRanks(lib, r) }

// Install implements Capability: the five queue constructors.
func (q *Queues) Install(rt *Runtime, lib *lua.LTable) { rt.installQueues(lib, q) }

// Install implements Capability: shield.rate_limiter.
func (l *Limiters) Install(rt *Runtime, lib *lua.LTable) { rt.installRateLimiter(lib, l) }

// Install implements Capability: shield.scheduler.
func (s *Scheduler) Install(rt *Runtime, lib *lua.LTable) { rt.installScheduler(lib, s) }
