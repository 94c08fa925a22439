package shieldglobal

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// durableModule is a module on p's master with global.redis.wait_replicas 1
// and wait_timeout ms, configured from YAML as a user would.
func durableModule(t *testing.T, p *testredis.Replicated, waitTimeout int) (*Module, store.Keys) {
	t.Helper()
	prefix := testredis.Prefix(t)
	src := fmt.Sprintf("global:\n  redis:\n    url: %q\n    prefix: %q\n    read_timeout: 15000\n    wait_replicas: 1\n    wait_timeout: %d\n",
		p.Master.URL(), prefix, waitTimeout)
	cfg, err := config.Parse([]byte(src), "durability.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return newModule(t, cfg), store.Keys{Prefix: prefix}
}

// The writes that must survive a failover, from Lua, and how to find each
// on a server once acknowledged.
var durableWrites = []struct {
	name, lua string
	onServer  func(k store.Keys) (cmd []any, want string)
}{
	{"kv incr", `assert(shield.global():incr("n") == 1)`,
		func(k store.Keys) ([]any, string) { return []any{"get", k.Global("n")}, "1" }},
	{"reliable push", `assert(shield.reliable_queue("jobs"):push("m1"))`,
		func(k store.Keys) ([]any, string) { return []any{"xlen", k.Queue("jobs")}, "1" }},
	{"lock grant", `assert(shield.distributed_mutex("door", {auto_extend = false}):acquire(5000))`,
		func(k store.Keys) ([]any, string) { return []any{"exists", k.Lock("door")}, "1" }},
	{"rank update", `shield.rank("board"):update("u1", 10)`,
		func(k store.Keys) ([]any, string) { return []any{"zcard", k.Rank("board")}, "1" }},
}

// With wait_replicas 1, each write is acknowledged only once the replica
// holds it: while the replica is frozen the Lua call waits; when it runs
// again the call returns and the replica has the write at once.
func TestDurableWritesReachTheReplicaBeforeTheirAck(t *testing.T) {
	p := testredis.StartReplicated(t)
	m, keys := durableModule(t, p, 10000)
	ctx := context.Background()
	for _, w := range durableWrites {
		t.Run(w.name, func(t *testing.T) {
			rt := newRuntime(t, m)
			resume := p.FreezeReplica(t)
			done := make(chan error, 1)
			go func() { done <- rt.RunString(w.lua, w.name+".lua") }()
			select {
			case err := <-done:
				t.Fatalf("returned (%v) while the replica was frozen", err)
			case <-time.After(300 * time.Millisecond):
			}
			resume()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(12 * time.Second):
				t.Fatal("no answer 12 s after the replica resumed")
			}
			cmd, want := w.onServer(keys)
			v, err := p.ReplicaClient.Do(ctx, cmd...).Result()
			if got := fmt.Sprint(v); err != nil || got != want {
				t.Fatalf("replica %v = %v, %v right after the acknowledgement; want %s", cmd, v, err, want)
			}
		})
	}
}

// With wait_replicas 1 and the replica frozen, each write raises within about
// wait_timeout an error that says the master applied it but it may be lost
// on a failover.
func TestDurableWritesUnconfirmedRaise(t *testing.T) {
	p := testredis.StartReplicated(t)
	m, keys := durableModule(t, p, 300)
	rt := newRuntime(t, m)
	p.FreezeReplica(t)
	ctx := context.Background()
	for _, w := range durableWrites {
		start := time.Now()
		err := rt.RunString(w.lua, w.name+".lua")
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "may be lost on a failover") || !strings.Contains(err.Error(), "confirmed by 0 of 1 replicas within 300 ms") {
			t.Fatalf("%s: err = %v, want the not-confirmed error", w.name, err)
		}
		if took > 3*time.Second {
			t.Fatalf("%s: took %v with wait_timeout 300 ms", w.name, took)
		}
		cmd, want := w.onServer(keys)
		if v, _ := p.MasterClient.Do(ctx, cmd...).Result(); fmt.Sprint(v) != want {
			t.Fatalf("%s: master %v = %v, want %s (the master applied the write)", w.name, cmd, v, want)
		}
	}
}

// Off by default: a module without wait_replicas sends no WAIT.
func TestNoWaitByDefault(t *testing.T) {
	p := testredis.StartReplicated(t)
	cfg := config.Default()
	cfg.Global.Redis.URL = p.Master.URL()
	cfg.Global.Redis.Prefix = testredis.Prefix(t)
	rt := newRuntime(t, newModule(t, cfg))
	for _, w := range durableWrites {
		if err := rt.RunString(w.lua, w.name+".lua"); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
	}
	if n := testredis.WaitCalls(t, p.MasterClient); n != 0 {
		t.Fatalf("%d WAITs sent with wait_replicas 0", n)
	}
}
