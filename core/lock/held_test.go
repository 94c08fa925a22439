package lock

import (
	"testing"
)

// ListHeld names what the tasks of a process hold and wait for: each kind
// of lock object, readers apart from writers, the queued acquires, and a
// distributed lock by its own name (through its gate).
func TestListHeldNamesEveryKind(t *testing.T) {
	p := newProc(t, NewMemory(nil), nil)
	mu := p.lock(Spec{Name: "inventory:42", Mode: Exclusive})
	spin := p.lock(Spec{Name: "spin", Mode: Exclusive, Spin: true})
	read := p.lock(Spec{Name: "table", Mode: Shared, ReadWrite: true})
	write := p.lock(Spec{Name: "table", Mode: Exclusive, ReadWrite: true})
	dist := p.lock(Spec{Name: "boss", Mode: Exclusive, Scope: Distributed})

	p.mustAcquire(mu, ownerA, TryOnce)
	p.mustAcquire(mu, ownerA, TryOnce) // a re-entry: one hold of count 2
	p.mustAcquire(spin, ownerB, TryOnce)
	p.mustAcquire(read, ownerA, TryOnce)
	p.mustAcquire(read, ownerB, TryOnce)
	p.start(write, ownerC, WaitForever)
	waitFor(t, "the writer queued", func() bool { return p.svc.Stats().Waiting == 1 })
	p.mustAcquire(dist, ownerA, TryOnce)

	got := ListHeld(p.svc.local, 10, 10)
	if got.Total != 4 || len(got.Locks) != 4 {
		t.Fatalf("ListHeld = %+v, want 4 locks", got)
	}
	byName := map[string]HeldLock{}
	for _, l := range got.Locks {
		byName[l.Name] = l
	}
	if got.Locks[0].Name != "boss" {
		t.Fatalf("first lock %q, want the distributed one first", got.Locks[0].Name)
	}
	check := func(name, kind string, dist bool, holders, readers, waiting int) HeldLock {
		t.Helper()
		l, ok := byName[name]
		if !ok || l.Kind != kind || l.Distributed != dist || l.Holders != holders || l.Readers != readers || l.Waiting != waiting {
			t.Fatalf("%s = %+v (listed: %v), want kind %s, distributed %v, %d holders, %d readers, %d waiting",
				name, l, ok, kind, dist, holders, readers, waiting)
		}
		return l
	}
	if l := check("inventory:42", "mutex", false, 1, 0, 0); l.Owners[0].Owner != ownerA || l.Owners[0].Count != 2 || l.Owners[0].Mode != Exclusive {
		t.Fatalf("inventory:42 owners %+v", l.Owners)
	}
	check("spin", "spinlock", false, 1, 0, 0)
	check("table", "rwlock", false, 2, 2, 1)
	if l := check("boss", "distributed_mutex", true, 1, 0, 0); l.Owners[0].Owner != ownerA || l.Owners[0].ExpiresAt.IsZero() {
		t.Fatalf("boss owners %+v, want %s with the lease's end", l.Owners, ownerA)
	}

	// A script's own lock named like a gate is not taken for a distributed one.
	odd := p.lock(Spec{Name: gatePrefix + "x", Mode: Exclusive})
	p.mustAcquire(odd, ownerB, TryOnce)
	got = ListHeld(p.svc.local, 10, 10)
	for _, l := range got.Locks {
		if l.Name == "x" || (l.Name == gatePrefix+"x" && (l.Distributed || l.Kind != "mutex")) {
			t.Fatalf("odd name listed as %+v", l)
		}
	}
}
