package bindings

import (
	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/lock/local"
)

// testLocks is the lock capability on the memory backend with default config.
func testLocks() *Locks {
	return &Locks{Local: local.NewManager(nil), Dist: lock.NewMemory(nil), DistInline: true, Config: config.Default().Lock}
}

// activeLocks counts the lock objects a runtime tracks for shutdown.
func activeLocks(rt *Runtime) int {
	rt.locks.mu.Lock()
	defer rt.locks.mu.Unlock()
	return len(rt.locks.active)
}
