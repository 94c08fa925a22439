package local

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// LockSnapshot is one named lock in a Snapshot: held, and maybe waited on.
type LockSnapshot struct {
	Name string
	// Holders counts the holds (one per owner and mode); Readers counts
	// those that are Shared.
	Holders, Readers int
	// Owners lists the first holds (at most Snapshot's maxOwners), in order
	// of AcquiredAt.
	Owners []OwnerHold
	// Waiting counts the queued waiters.
	Waiting int
	// Kinds are the distinct kinds of the holds and waiters, ascending.
	Kinds []Kind
}

// Snapshot is what Manager.Snapshot saw.
type Snapshot struct {
	// Locks are the first locks by name (at most the limit asked for).
	Locks []LockSnapshot
	// Total is the number of locks held in all, counted as Stats counts
	// Active (holds that are due but not yet expired included).
	Total int
}

// Snapshot lists the held locks: the first limit of them by name, each
// with at most maxOwners of its holds, and the total count. It reads each
// shard under the shard's lock, one shard at a time (a lock's entry is
// consistent; the listing as a whole is not one instant), and changes
// nothing: holds that are due but not yet expired are left out. It costs
// acquire and release nothing; it is O(held names) and copies at most
// 2×limit locks, for an operator's page, not for a hot path. limit and
// maxOwners below 1 are taken as 1. It never fails.
func (m *Manager) Snapshot(limit, maxOwners int) Snapshot {
	limit, maxOwners = max(limit, 1), max(maxOwners, 1)
	now := m.now()
	var snap Snapshot
	var out []LockSnapshot
	cutoff, full := "", false // with full, names >= cutoff cannot be among the first limit
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for name, e := range s.locks {
			snap.Total++
			if full && name >= cutoff {
				continue
			}
			if ls := e.snapshot(now, maxOwners); ls.Holders > 0 || ls.Waiting > 0 {
				out = append(out, ls)
			}
			if len(out) >= 2*limit {
				out, cutoff = firstByName(out, limit)
				full = true
			}
		}
		s.mu.Unlock()
	}
	snap.Locks, _ = firstByName(out, limit)
	return snap
}

// firstByName sorts ls by name and keeps the first limit; it returns the
// name of the last one kept.
func firstByName(ls []LockSnapshot, limit int) ([]LockSnapshot, string) {
	slices.SortFunc(ls, func(a, b LockSnapshot) int { return strings.Compare(a.Name, b.Name) })
	if len(ls) > limit {
		clear(ls[limit:]) // let the dropped copies be collected
		ls = ls[:limit]
	}
	if len(ls) == 0 {
		return ls, ""
	}
	return ls, ls[len(ls)-1].Name
}

// snapshot copies e's state (under its shard's lock), leaving out holds due
// at now.
func (e *entry) snapshot(now time.Time, maxOwners int) LockSnapshot {
	ls := LockSnapshot{Name: e.name, Waiting: e.nwait}
	addKind := func(k Kind) {
		if i, found := slices.BinarySearch(ls.Kinds, k); !found {
			ls.Kinds = slices.Insert(ls.Kinds, i, k)
		}
	}
	for i := range e.holders {
		h := &e.holders[i]
		if !h.expires.IsZero() && !now.Before(h.expires) {
			continue
		}
		ls.Holders++
		if h.mode == Shared {
			ls.Readers++
		}
		addKind(h.kind)
		ls.Owners = append(ls.Owners, h.ownerHold())
	}
	for w := e.head; w != nil; w = w.next {
		addKind(w.kind)
	}
	slices.SortFunc(ls.Owners, func(a, b OwnerHold) int {
		return cmp.Or(a.AcquiredAt.Compare(b.AcquiredAt), cmp.Compare(a.Mode, b.Mode), strings.Compare(a.Owner, b.Owner))
	})
	if len(ls.Owners) > maxOwners {
		ls.Owners = slices.Clip(ls.Owners[:maxOwners])
	}
	return ls
}
