package shieldglobal

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	lua "github.com/yuin/gopher-lua"

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
	// The hold ends with the chunk's task, and its release may reach the
	// replica before the check (it did on a loaded machine): look for the
	// grant's token counter, which the grant's script wrote with the hold
	// (a script replicates whole) and which a release leaves.
	{"lock grant", `assert(shield.distributed_mutex("door", {auto_extend = false}):acquire(5000))`,
		func(k store.Keys) ([]any, string) { return []any{"exists", k.LockToken("door")}, "1" }},
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

// failoverLoad runs 32 tasks of g:incr against a Sentinel group (master,
// replica, one Sentinel), asks the Sentinel for a failover (SENTINEL
// FAILOVER) under that load, and returns how many incrs were acknowledged,
// how many raised, and the counter on the new master once the load stopped.
func failoverLoad(t *testing.T, waitReplicas, minReplicasToWrite int) (acked, failed, final int, lastErr string) {
	t.Helper()
	ctx := context.Background()
	p := testredis.StartReplicated(t)
	for _, c := range []*redis.Client{p.MasterClient, p.ReplicaClient} {
		if err := c.ConfigSet(ctx, "min-replicas-to-write", fmt.Sprint(minReplicasToWrite)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	sentinel := testredis.StartSentinel(t, "fo", p.Master.Addr)
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr})
	defer sc.Close()

	cfg := config.Default()
	cfg.Global.Redis.Addrs = []string{sentinel.Addr}
	cfg.Global.Redis.MasterName = "fo"
	cfg.Global.Redis.Prefix = testredis.Prefix(t)
	cfg.Global.Redis.ReadTimeout = 2000
	cfg.Global.Redis.WaitReplicas = waitReplicas
	cfg.Global.Redis.WaitTimeout = 1000
	rt := newRuntime(t, newModule(t, cfg))
	done := make(chan error, 1)
	go func() {
		done <- rt.RunString(`
			local g = shield.global()
			acked, failed, running, last_err = 0, 0, 32, ""
			for w = 1, 32 do
				shield.spawn(function()
					while not stop do
						local ok, err = pcall(g.incr, g, "n")
						if ok then acked = acked + 1 else failed = failed + 1; last_err = tostring(err); shield.sleep(5) end
					end
					running = running - 1
				end)
			end
			while running > 0 do shield.sleep(5) end`, "load.lua")
	}()
	global := func(name string) lua.LValue {
		var v lua.LValue
		_ = rt.Do(func(L *lua.LState) error { v = L.GetGlobal(name); return nil })
		return v
	}
	// Under load, and the Sentinel knows the replica: then fail over.
	deadline := time.Now().Add(30 * time.Second) // generous: a loaded machine
	for {
		if time.Now().After(deadline) {
			t.Fatal("SENTINEL FAILOVER was never accepted")
		}
		if lua.LVAsNumber(global("acked")) > 1000 {
			if err := sc.Failover(ctx, "fo").Err(); err == nil {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, replicaPort, _ := strings.Cut(p.Replica.Addr, ":")
	deadline = time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatal("the replica was never promoted")
		}
		if addr, err := sc.GetMasterAddrByName(ctx, "fo").Result(); err == nil && addr[1] == replicaPort {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Keep the load on the new master for a while, then stop.
	time.Sleep(time.Second)
	_ = rt.Do(func(L *lua.LState) error { L.SetGlobal("stop", lua.LTrue); return nil })
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the load did not stop")
	}
	acked, failed = int(lua.LVAsNumber(global("acked"))), int(lua.LVAsNumber(global("failed")))
	v, err := p.ReplicaClient.Get(ctx, cfg.Global.Redis.Prefix+"global:n").Int()
	if err != nil {
		t.Fatalf("the counter on the new master: %v", err)
	}
	return acked, failed, v, global("last_err").String()
}

// SENTINEL FAILOVER under load: with wait_replicas 1 no acknowledged incr is
// lost (the counter on the promoted replica is at least the count of
// acknowledged incrs; an incr that raised may or may not have counted).
// Without it the same run may lose some: measured and logged (not asserted:
// how many depends on timing), for docs/durability.md.
func TestSentinelFailoverKeepsAcknowledgedWrites(t *testing.T) {
	t.Run("wait_replicas=1", func(t *testing.T) {
		acked, failed, final, lastErr := failoverLoad(t, 1, 0)
		t.Logf("acknowledged %d, raised %d, counter on the new master %d; last error: %s", acked, failed, final, lastErr)
		if final < acked {
			t.Fatalf("%d acknowledged incrs lost across the failover (counter %d, acknowledged %d)", acked-final, final, acked)
		}
	})
	t.Run("wait_replicas=0", func(t *testing.T) {
		acked, failed, final, lastErr := failoverLoad(t, 0, 0)
		t.Logf("acknowledged %d, raised %d, counter on the new master %d (lost: %d); last error: %s",
			acked, failed, final, max(acked-final, 0), lastErr)
		if acked == 0 {
			t.Fatal("no incr was acknowledged: the load did not run")
		}
	})
	// The server-side alternative: masters refuse writes while no replica
	// is connected (min-replicas-to-write 1), which closes the window where
	// the old master still acknowledges writes after the promotion, but
	// not the replication lag before it.
	t.Run("min-replicas-to-write=1", func(t *testing.T) {
		acked, failed, final, lastErr := failoverLoad(t, 0, 1)
		t.Logf("acknowledged %d, raised %d, counter on the new master %d (lost: %d); last error: %s",
			acked, failed, final, max(acked-final, 0), lastErr)
		if acked == 0 {
			t.Fatal("no incr was acknowledged: the load did not run")
		}
	})
}
