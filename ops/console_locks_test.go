package ops

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/lock"
)

// What the locks page shows of the locks held in this process: an
// in-process mutex with a ttl, an rwlock's readers apart from its writer,
// and a distributed lock with the backend's token, lease and service — one
// whose task is still acquiring, one whose backend failed, one not read.
func TestHeldLocksOf(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	held := lock.HeldLocks{Total: 7, Locks: []lock.HeldLock{
		{Name: "boss", Kind: "distributed_mutex", Distributed: true, Holders: 1,
			Owners: []lock.HeldOwner{{Owner: "n:1:co-1", Mode: lock.Exclusive, Count: 1, AcquiredAt: ago(3 * time.Second), ExpiresAt: now.Add(27 * time.Second)}}},
		{Name: "busy", Kind: "distributed_mutex", Distributed: true, Holders: 1, Waiting: 2,
			Owners: []lock.HeldOwner{{Owner: "n:1:co-2", Mode: lock.Exclusive, Count: 1, AcquiredAt: ago(time.Second), ExpiresAt: now.Add(29 * time.Second)}}},
		{Name: "down", Kind: "distributed_rwlock", Distributed: true, Holders: 1,
			Owners: []lock.HeldOwner{{Owner: "n:1:co-3", Mode: lock.Shared, Count: 1, AcquiredAt: ago(time.Second), ExpiresAt: now.Add(9 * time.Second)}}},
		{Name: "far", Kind: "distributed_mutex", Distributed: true, Holders: 1,
			Owners: []lock.HeldOwner{{Owner: "n:1:co-4", Mode: lock.Exclusive, Count: 1, AcquiredAt: ago(time.Second), ExpiresAt: now.Add(5 * time.Second)}}},
		{Name: "inventory:42", Kind: "mutex", Holders: 1,
			Owners: []lock.HeldOwner{{Owner: "n:1:co-5", Mode: lock.Exclusive, Count: 2, AcquiredAt: ago(90 * time.Second), ExpiresAt: now.Add(4 * time.Second)}}},
		{Name: "table", Kind: "rwlock", Holders: 2, Readers: 2, Waiting: 1,
			Owners: []lock.HeldOwner{{Owner: "n:1:co-6", Mode: lock.Shared, Count: 1, AcquiredAt: ago(2 * time.Second)},
				{Owner: "n:1:co-7", Mode: lock.Shared, Count: 1, AcquiredAt: ago(time.Second)}}},
	}}
	backend := map[string]lock.Info{
		"boss": {Held: true, Mode: lock.Exclusive, TTL: 26500 * time.Millisecond, Token: 1840000000000001,
			Owners: []lock.Holder{{Owner: "n:1:co-1", Count: 1, ServiceName: "game-1"}}},
		"busy": {Held: true, Mode: lock.Exclusive, TTL: 10 * time.Second, Token: 7,
			Owners: []lock.Holder{{Owner: "other:2:co-9", Count: 1, ServiceName: "game-2"}}},
	}
	failed := map[string]error{"down": errors.New("redis: connection refused")}
	v := HeldLocksOf(held, backend, failed, now)
	if v.Total != 7 || !v.Truncated || len(v.Locks) != 6 {
		t.Fatalf("view = %+v", v)
	}
	byName := map[string]HeldLockView{}
	for _, l := range v.Locks {
		byName[l.Name] = l
	}
	boss := byName["boss"]
	if boss.Token == nil || *boss.Token != 1840000000000001 || boss.TTLMs != 26500 || boss.HeldMs != 3000 ||
		boss.Owners[0].State != "held" || boss.Owners[0].Service != "game-1" || boss.Writers != 1 || boss.BackendError != "" {
		t.Fatalf("boss = %+v", boss)
	}
	if busy := byName["busy"]; busy.Owners[0].State != "acquiring" || busy.Waiting != 2 || *busy.Token != 7 {
		t.Fatalf("busy = %+v (another process holds it; this task is acquiring)", busy)
	}
	if down := byName["down"]; down.Token != nil || down.Owners[0].State != "unknown" || down.TTLMs != 9000 ||
		!strings.Contains(down.BackendError, "connection refused") {
		t.Fatalf("down = %+v", down)
	}
	if far := byName["far"]; far.Owners[0].State != "unknown" || !strings.Contains(far.BackendError, "not read") {
		t.Fatalf("far = %+v", far)
	}
	inv := byName["inventory:42"]
	if inv.Kind != "mutex" || inv.Token != nil || inv.TTLMs != 4000 || inv.HeldMs != 90000 || inv.HeldSince == nil ||
		*inv.HeldSince != "2026-12-02T05:58:30Z" || inv.Owners[0].Count != 2 || inv.Owners[0].State != "held" {
		t.Fatalf("inventory:42 = %+v", inv)
	}
	if tb := byName["table"]; tb.Readers != 2 || tb.Writers != 0 || tb.Waiting != 1 || tb.TTLMs != -1 || len(tb.Owners) != 2 ||
		tb.Owners[1].Mode != "shared" {
		t.Fatalf("table = %+v", tb)
	}
}

// GET /ops/api/locks carries the listing under "process", beside the
// counts; an empty listing is an empty array, never null.
func TestConsoleLocksAPI(t *testing.T) {
	base, rec := startConsole(t, false, "", slog.New(slog.DiscardHandler))
	get := func() map[string]any {
		t.Helper()
		code, body := do(t, "GET", base+"/ops/api/locks", nil, "")
		if code != 200 {
			t.Fatalf("GET /ops/api/locks: %d %s", code, body)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if p, ok := get()["process"].(map[string]any); !ok || p["locks"] == nil || p["total"] != 0.0 {
		t.Fatalf("empty listing: %v", p)
	}
	rec.mu.Lock()
	rec.held = HeldLocksOf(lock.HeldLocks{Total: 1, Locks: []lock.HeldLock{{Name: "inventory:42", Kind: "mutex", Holders: 1,
		Owners: []lock.HeldOwner{{Owner: "n:1:co-1", Mode: lock.Exclusive, Count: 1, AcquiredAt: time.Now()}}}}}, nil, nil, time.Now())
	rec.mu.Unlock()
	p := get()["process"].(map[string]any)
	locks := p["locks"].([]any)
	if len(locks) != 1 {
		t.Fatalf("locks %v", locks)
	}
	l := locks[0].(map[string]any)
	for _, k := range []string{"name", "kind", "distributed", "holders", "readers", "writers", "waiting", "held_since", "held_ms", "ttl_ms", "token", "owners"} {
		if _, ok := l[k]; !ok {
			t.Errorf("lock lacks %q: %v", k, l)
		}
	}
	if l["name"] != "inventory:42" || l["kind"] != "mutex" || l["token"] != nil || l["ttl_ms"] != -1.0 {
		t.Fatalf("lock %v", l)
	}
}
