package lock

import (
	"strings"
	"time"

	"github.com/shieldrt/shieldglobal/core/lock/local"
)

// The kinds of lock object, as their in-process holds (and the gates of
// distributed locks) are labelled in the Manager (local.Request.Kind), so
// that ListHeld can say what each lock is. The label is set once per lock
// object (NewLock): acquire and release only carry it along.
const (
	kindUnknown local.Kind = iota // a hold taken through the Manager directly
	kindMutex
	kindSpinlock
	kindRWLock
	kindDistMutex
	kindDistRWLock
)

var kindNames = [...]string{
	kindUnknown:    "unknown",
	kindMutex:      "mutex",
	kindSpinlock:   "spinlock",
	kindRWLock:     "rwlock",
	kindDistMutex:  "distributed_mutex",
	kindDistRWLock: "distributed_rwlock",
}

func kindOf(spec Spec) local.Kind {
	switch {
	case spec.Scope == Distributed && spec.ReadWrite:
		return kindDistRWLock
	case spec.Scope == Distributed:
		return kindDistMutex
	case spec.ReadWrite:
		return kindRWLock
	case spec.Spin:
		return kindSpinlock
	}
	return kindMutex
}

func kindName(k local.Kind) string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return kindNames[kindUnknown]
}

// HeldLocks lists the locks tasks of one process hold or wait for (see
// ListHeld).
type HeldLocks struct {
	// Locks are the listed locks: distributed ones first, then in-process
	// ones, each by name.
	Locks []HeldLock
	// Total is the number of locks held in all (listed or not).
	Total int
}

// HeldLock is one lock held in this process.
type HeldLock struct {
	Name string
	// Distributed says the lock is distributed. What is listed is then its
	// process-local gate: Owners are the tasks of this process that hold
	// the lock or are acquiring it from the backend (they passed the gate),
	// Waiting the tasks queued at the gate. The backend knows the rest
	// (fencing token, lease, holders in other processes): Backend.Info.
	Distributed bool
	// Kind is "mutex", "spinlock", "rwlock", "distributed_mutex" or
	// "distributed_rwlock"; several joined by "+" when lock objects of
	// several kinds use the name (a mutex and the write side of an rwlock
	// of the same name are one lock).
	Kind string
	// Holders counts the holds (one per owner and mode), Readers those that
	// are shared (read holds); Waiting the acquires queued in this process.
	Holders, Readers, Waiting int
	// Owners are the first holds, oldest first.
	Owners []HeldOwner
}

// HeldOwner is one hold of a HeldLock.
type HeldOwner struct {
	Owner      string
	Mode       Mode
	Count      int // re-entry levels
	AcquiredAt time.Time
	// ExpiresAt is when the hold's ttl ends (zero: none). For a
	// distributed lock it is the gate's, which follows the lease by this
	// process's clock: renewals push it back.
	ExpiresAt time.Time
}

// ListHeld lists the locks held in m (the Manager of a Service: the
// in-process locks and the gates of the distributed ones): the first limit
// (by name, distributed ones first), each with its first maxOwners holds,
// and the total. It reads m.Snapshot: nothing on the acquire and release
// paths, for an operator's page. It never fails.
func ListHeld(m *local.Manager, limit, maxOwners int) HeldLocks {
	snap := m.Snapshot(limit, maxOwners)
	out := HeldLocks{Total: snap.Total, Locks: make([]HeldLock, 0, len(snap.Locks))}
	for _, s := range snap.Locks {
		name, gate := strings.CutPrefix(s.Name, gatePrefix)
		kinds := make([]string, len(s.Kinds))
		dist := false
		for i, k := range s.Kinds {
			kinds[i] = kindName(k)
			dist = dist || k == kindDistMutex || k == kindDistRWLock
		}
		if !gate || !dist { // a script's own lock whose name looks like a gate's
			name, dist = s.Name, false
		}
		h := HeldLock{Name: name, Distributed: dist, Kind: strings.Join(kinds, "+"),
			Holders: s.Holders, Readers: s.Readers, Waiting: s.Waiting, Owners: make([]HeldOwner, len(s.Owners))}
		for i, o := range s.Owners {
			h.Owners[i] = HeldOwner{Owner: o.Owner, Mode: o.Mode, Count: o.Count, AcquiredAt: o.AcquiredAt, ExpiresAt: o.ExpiresAt}
		}
		out.Locks = append(out.Locks, h)
	}
	return out
}
