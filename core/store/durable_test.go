package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

func incrOp(c redis.UniversalClient, key string) *store.Op[int64] {
	cmd := redis.NewIntCmd(context.Background(), "incr", key)
	return store.Commands(c, cmd.Result, cmd)
}

// With wait_replicas 1, a write the replica cannot confirm fails within
// about wait_timeout with ErrNotDurable, saying the master applied it; the
// Ops that were not marked in the same round trip are unaffected.
func TestDurableWriteUnconfirmedIsAnError(t *testing.T) {
	p := testredis.StartReplicated(t)
	ctx := context.Background()
	if _, err := echoOp(p.MasterClient, "warm", "x").Do(ctx); err != nil { // loads the script: one sending below
		t.Fatal(err)
	}
	p.FreezeReplica(t)
	d := store.Durability{Replicas: 1, Timeout: 300 * time.Millisecond}

	var b store.Batch
	durable := incrOp(p.MasterClient, "k").Durable(d)
	script := echoOp(p.MasterClient, "s", "x").Durable(d)
	plain := incrOp(p.MasterClient, "plain")
	b.Add(durable)
	b.Add(script)
	b.Add(plain)
	start := time.Now()
	b.Exec(ctx)
	took := time.Since(start)

	for name, err := range map[string]error{"incr": second(durable.Result()), "script": second(script.Result())} {
		var nd *store.NotDurableError
		if !errors.Is(err, store.ErrNotDurable) || !errors.As(err, &nd) {
			t.Fatalf("%s: err = %v, want a *NotDurableError", name, err)
		}
		if nd.Want != 1 || nd.Got != 0 || nd.Err != nil {
			t.Fatalf("%s: %+v, want 0 of 1 replicas", name, nd)
		}
		if !strings.Contains(err.Error(), "written on the master") || !strings.Contains(err.Error(), "may be lost on a failover") {
			t.Fatalf("%s: message %q does not say the master has the write", name, err)
		}
	}
	if n, err := plain.Result(); err != nil || n != 1 {
		t.Fatalf("the unmarked incr: %d, %v", n, err)
	}
	if took < 250*time.Millisecond || took > 3*time.Second {
		t.Fatalf("the batch took %v; WAIT 300 ms should bound it", took)
	}
	if v, _ := p.MasterClient.Get(ctx, "k").Result(); v != "1" {
		t.Fatalf("master k = %q: the write must have been applied there", v)
	}
	if n := testredis.WaitCalls(t, p.MasterClient); n != 1 {
		t.Fatalf("%d WAITs for one round trip, want 1", n)
	}
}

// With wait_replicas 1, a write is acknowledged only once the replica holds
// it: while the replica is frozen the write waits; once it runs again the
// write succeeds and the replica has it at once.
func TestDurableWriteWaitsForTheReplica(t *testing.T) {
	p := testredis.StartReplicated(t)
	ctx := context.Background()
	resume := p.FreezeReplica(t)
	d := store.Durability{Replicas: 1, Timeout: 10 * time.Second}

	type res struct {
		n   int64
		err error
	}
	done := make(chan res, 1)
	go func() {
		n, err := incrOp(p.MasterClient, "k").Durable(d).Do(ctx)
		done <- res{n, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("acknowledged (%d, %v) while the replica was frozen", r.n, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	resume()
	var r res
	select {
	case r = <-done:
	case <-time.After(12 * time.Second):
		t.Fatal("no answer 12 s after the replica resumed")
	}
	if r.err != nil || r.n != 1 {
		t.Fatalf("incr = %d, %v", r.n, r.err)
	}
	if v, err := p.ReplicaClient.Get(ctx, "k").Result(); v != "1" {
		t.Fatalf("replica k = %q, %v right after the acknowledgement", v, err)
	}
}

// A script the server lost (NOSCRIPT) is loaded and sent again, and the
// WAIT after the second sending decides.
func TestDurableWriteAfterNoScript(t *testing.T) {
	p := testredis.StartReplicated(t)
	ctx := context.Background()
	flushScripts(t, p.MasterClient)
	d := store.Durability{Replicas: 1, Timeout: 2 * time.Second}
	e, err := echoOp(p.MasterClient, "s", "x").Durable(d).Do(ctx)
	if err != nil || e.n != 1 {
		t.Fatalf("echo = %+v, %v", e, err)
	}
	if v, _ := p.ReplicaClient.Get(ctx, "s").Result(); v != "1" {
		t.Fatalf("replica s = %q right after the acknowledgement", v)
	}
	if n := testredis.WaitCalls(t, p.MasterClient); n != 2 {
		t.Fatalf("%d WAITs, want 2 (one per sending)", n)
	}
}

// Off by default: Ops not marked, or marked with the zero Durability, send
// no WAIT.
func TestNoWaitWhenDurabilityIsOff(t *testing.T) {
	p := testredis.StartReplicated(t)
	ctx := context.Background()
	var b store.Batch
	for i := range 10 {
		b.Add(incrOp(p.MasterClient, fmt.Sprint("k", i)))
		b.Add(incrOp(p.MasterClient, fmt.Sprint("z", i)).Durable(store.Durability{}))
	}
	b.Exec(ctx)
	if _, err := echoOp(p.MasterClient, "s", "x").Durable(store.Durability{Timeout: time.Second}).Do(ctx); err != nil {
		t.Fatal(err)
	}
	if n := testredis.WaitCalls(t, p.MasterClient); n != 0 {
		t.Fatalf("%d WAITs sent with durability off", n)
	}
}

// A durable MULTI/EXEC waits on its own connection.
func TestDurableTransaction(t *testing.T) {
	p := testredis.StartReplicated(t)
	ctx := context.Background()
	d := store.Durability{Replicas: 1, Timeout: 2 * time.Second}
	set := func(k string) func(redis.Pipeliner) error {
		return func(pl redis.Pipeliner) error { pl.Set(ctx, k, "v", 0); return nil }
	}
	if _, err := store.TxPipelined(ctx, p.MasterClient, "a", d, set("a")); err != nil {
		t.Fatal(err)
	}
	if v, _ := p.ReplicaClient.Get(ctx, "a").Result(); v != "v" {
		t.Fatalf("replica a = %q right after the acknowledgement", v)
	}
	p.FreezeReplica(t)
	d.Timeout = 200 * time.Millisecond
	if _, err := store.TxPipelined(ctx, p.MasterClient, "b", d, set("b")); !errors.Is(err, store.ErrNotDurable) {
		t.Fatalf("err = %v with the replica frozen, want ErrNotDurable", err)
	}
}

// On a Cluster each durable write goes to its key's master with a WAIT of
// its own: writes to keys on every master run there (no MOVED, no
// CROSSSLOT), and the test cluster, which has no replicas, reports each as
// confirmed by 0 of 1; an unmarked op of the same batch is untouched.
func TestDurableWritesOnCluster(t *testing.T) {
	c := testredis.Cluster(t)
	ctx := context.Background()
	pre := testredis.Prefix(t)
	flushScripts(t, c)
	d := store.Durability{Replicas: 1, Timeout: 100 * time.Millisecond}
	var b store.Batch
	var ops []*store.Op[int64]
	var echoes []*store.Op[echo]
	for i := range 12 { // 12 keys land on all three masters
		k := fmt.Sprintf("%sk%d", pre, i)
		ops = append(ops, incrOp(c, k).Durable(d))
		b.Add(ops[i])
		echoes = append(echoes, echoOp(c, k+"s", "x").Durable(d))
		b.Add(echoes[i])
	}
	plain := incrOp(c, pre+"plain")
	b.Add(plain)
	b.Exec(ctx)
	for i, op := range ops {
		if _, err := op.Result(); !errors.Is(err, store.ErrNotDurable) {
			t.Fatalf("incr %d: %v, want ErrNotDurable", i, err)
		}
		if _, err := echoes[i].Result(); !errors.Is(err, store.ErrNotDurable) {
			t.Fatalf("echo %d: %v, want ErrNotDurable", i, err)
		}
		if v, _ := c.Get(ctx, fmt.Sprintf("%sk%d", pre, i)).Result(); v != "1" {
			t.Fatalf("key %d = %q: the write must have run on its master", i, v)
		}
	}
	if n, err := plain.Result(); err != nil || n != 1 {
		t.Fatalf("unmarked incr: %d, %v", n, err)
	}
	// A transaction goes to its key's master and waits there.
	for i := range 6 {
		k := fmt.Sprintf("%stx{%d}", pre, i)
		_, err := store.TxPipelined(ctx, c, k, d, func(p redis.Pipeliner) error { p.Set(ctx, k, "v", 0); return nil })
		if !errors.Is(err, store.ErrNotDurable) {
			t.Fatalf("transaction %d: %v, want ErrNotDurable", i, err)
		}
		if v, _ := c.Get(ctx, k).Result(); v != "v" {
			t.Fatalf("transaction %d: %q, the SET must have run on its master", i, v)
		}
	}
}
