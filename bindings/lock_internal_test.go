package bindings

import (
	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/lock/local"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// testLocks is the lock capability on the memory backend with default config.
func testLocks() *Locks {
	return &Locks{Local: local.NewManager(nil), Dist: lock.NewMemory(nil), Config: config.Default().Lock}
}

// activeLocks counts the holds and pending acquires a runtime tracks. Loop only.
func activeLocks(rt *runtime.Runtime) int { return lockSlot.Get(rt).active() }
