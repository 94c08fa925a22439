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

// echoScript returns {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}.
var echoScript = store.NewScript("test/echo.lua", `
return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}`)

type echo struct {
	key, arg string
	n        int64
}

func echoOp(c redis.UniversalClient, key, arg string) *store.Op[echo] {
	cmd := echoScript.Cmd([]string{key}, arg)
	return store.Commands(c, func() (echo, error) {
		r := store.ReadReply("echo", cmd.Cmd)
		e := echo{key: r.Str(), arg: r.Str(), n: r.Int()}
		return e, r.End()
	}, cmd)
}

func getOp(c redis.UniversalClient, key string) *store.Op[string] {
	cmd := redis.NewStringCmd(context.Background(), "get", key)
	return store.Commands(c, func() (string, error) {
		v, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			return "<nil>", nil
		}
		return v, err
	}, cmd)
}

func flushScripts(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	if err := c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestOpsOnEveryDeployment(t *testing.T) {
	ctx := context.Background()
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			p := testredis.Prefix(t)
			// Do, then again after the server lost its scripts.
			for round := 1; round <= 2; round++ {
				flushScripts(t, c)
				got, err := echoOp(c, p+"{a}", "x").Do(ctx)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if got != (echo{p + "{a}", "x", int64(round)}) {
					t.Fatalf("round %d: got %+v", round, got)
				}
			}

			// A batch over many slots, scripts flushed: every op settles with
			// its own reply, in order per key.
			flushScripts(t, c)
			var b store.Batch
			var echoes []*store.Op[echo]
			var gets []*store.Op[string]
			for i := 0; i < 40; i++ {
				key := fmt.Sprintf("%s{k%d}", p, i%8)
				e := echoOp(c, key, fmt.Sprint(i))
				g := getOp(c, key)
				b.Add(e)
				b.Add(g)
				echoes, gets = append(echoes, e), append(gets, g)
			}
			b.Exec(ctx)
			if b.Len() != 0 {
				t.Fatalf("batch not emptied: %d", b.Len())
			}
			for i, e := range echoes {
				v, err := e.Result()
				if err != nil {
					t.Fatalf("echo %d: %v", i, err)
				}
				if v.arg != fmt.Sprint(i) || v.n != int64(i/8+1) {
					t.Fatalf("echo %d: got %+v, want n=%d", i, v, i/8+1)
				}
				// A retried script runs after the rest of the batch, so the
				// GET of the same key may or may not see it.
				if _, err := gets[i].Result(); err != nil {
					t.Fatalf("get %d: %v", i, err)
				}
			}

			// With the scripts loaded, commands run in the order added.
			b.Reset()
			gets = gets[:0]
			for i := 0; i < 8; i++ {
				key := fmt.Sprintf("%s{k%d}", p, i)
				b.Add(echoOp(c, key, "y"))
				g := getOp(c, key)
				b.Add(g)
				gets = append(gets, g)
			}
			b.Exec(ctx)
			for i, g := range gets {
				if v, err := g.Result(); v != "6" || err != nil {
					t.Fatalf("get %d after its echo: %q %v, want 6", i, v, err)
				}
			}
		})
	}
}

func TestOpKinds(t *testing.T) {
	ctx := context.Background()
	ran := 0
	l := store.Local(func() (int, error) { ran++; return 7, nil })
	if l.Kind() != store.KindLocal {
		t.Fatal("kind")
	}
	if _, err := l.Result(); err == nil {
		t.Fatal("Result before running must fail")
	}
	if v, err := l.Do(ctx); v != 7 || err != nil {
		t.Fatalf("local: %v %v", v, err)
	}
	if v, _ := l.Do(ctx); v != 7 || ran != 1 {
		t.Fatalf("a second Do must not run it again: ran %d", ran)
	}
	boom := errors.New("boom")
	if _, err := store.Failed[int](boom).Do(ctx); !errors.Is(err, boom) {
		t.Fatalf("failed: %v", err)
	}
	w := store.Work(func(ctx context.Context) (string, error) { return "w", ctx.Err() })
	if w.Kind() != store.KindWork {
		t.Fatal("kind")
	}
	if v, err := w.Do(ctx); v != "w" || err != nil {
		t.Fatalf("work: %v %v", v, err)
	}
}

func TestOpTransportErrorAndReplyErrors(t *testing.T) {
	ctx := context.Background()
	c := testredis.Standalone(t)
	p := testredis.Prefix(t)
	// A command the server refuses is the command's error, for the decoder.
	c.Set(ctx, p+"s", "not a number", time.Minute)
	bad := echoOp(c, p+"s", "x")
	if _, err := bad.Do(ctx); err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("want the script's error, got %v", err)
	}
	// A dead server fails every op of the batch, naming what failed.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer dead.Close()
	var b store.Batch
	e1, e2 := echoOp(dead, "a", "1"), getOp(dead, "b")
	ok := getOp(c, p+"s")
	b.Add(e1)
	b.Add(ok)
	b.Add(e2)
	b.Exec(ctx)
	for _, err := range []error{second(e1.Result()), second(e2.Result())} {
		if err == nil || !strings.Contains(err.Error(), "dial tcp 127.0.0.1:1") {
			t.Fatalf("want the dial error, got %v", err)
		}
	}
	if v, err := ok.Result(); v != "not a number" || err != nil {
		t.Fatalf("the other client's op: %q %v", v, err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestReplyShapes(t *testing.T) {
	r := store.ReplyOf("t", []any{int64(1), "2.5", "s", nil, []any{int64(3)}})
	n, f, s := r.Int(), r.Float(), r.Str()
	_, present := r.OptStr()
	a := r.Array()
	if err := r.End(); err != nil || n != 1 || f != 2.5 || s != "s" || present || len(a) != 1 {
		t.Fatalf("%v %v %v %v %v %v", n, f, s, present, a, err)
	}
	r = store.ReplyOf("t", []any{"x"})
	r.Int()
	r.Str() // after the first error, reads return zero values and keep it
	if err := r.End(); !errors.Is(err, store.ErrReply) || !strings.Contains(err.Error(), "element 1: want an integer") {
		t.Fatalf("got %v", err)
	}
	r = store.ReplyOf("t", []any{int64(1), int64(2)})
	r.Int()
	if err := r.End(); !errors.Is(err, store.ErrReply) || !strings.Contains(err.Error(), "1 elements left unread") {
		t.Fatalf("got %v", err)
	}
	r = store.ReplyOf("t", nil)
	r.Str()
	if err := r.Err(); !errors.Is(err, store.ErrReply) || !strings.Contains(err.Error(), "only 0 elements") {
		t.Fatalf("got %v", err)
	}
}

// Scripts keep working after the server lost them by restarting.
func TestOpsAfterRedisRestart(t *testing.T) {
	ctx := context.Background()
	srv := testredis.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	if _, err := echoOp(c, "{r}", "1").Do(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Restart() // empty data and script cache
	var err error
	for i := 0; i < 50; i++ { // the first call may still meet the dropped connection
		if _, err = echoOp(c, "{r}", "2").Do(ctx); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	var b store.Batch
	op := echoOp(c, "{r}", "3")
	b.Add(op)
	b.Exec(ctx)
	if v, err := op.Result(); err != nil || v.n != 2 {
		t.Fatalf("batch after a restart: %+v %v", v, err)
	}
}

// Scripts keep working across a Sentinel failover to a replica that never
// had them.
func TestOpsAfterSentinelFailover(t *testing.T) {
	ctx := context.Background()
	master := testredis.StartServer(t)
	_, mport, _ := strings.Cut(master.Addr, ":")
	replica := testredis.StartServerWith(t, "--replicaof", "127.0.0.1", mport)
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer rc.Close()
	waitFor(t, "the replica to sync", func() bool {
		info, _ := rc.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	sentinel := testredis.StartSentinel(t, "fo", master.Addr)
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "fo", SentinelAddrs: []string{sentinel.Addr},
		DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond})
	defer c.Close()
	if _, err := echoOp(c, "{f}", "1").Do(ctx); err != nil {
		t.Fatal(err)
	}
	// Replication is asynchronous: without this, stopping the master could
	// lose the increment the replica had not received yet.
	if n, err := c.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d %v", n, err)
	}
	if err := rc.ScriptFlush(ctx).Err(); err != nil { // the new master will not have the script
		t.Fatal(err)
	}
	master.Stop()
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr})
	defer sc.Close()
	waitFor(t, "the failover", func() bool {
		addr, err := sc.GetMasterAddrByName(ctx, "fo").Result()
		return err == nil && addr[1] == strings.TrimPrefix(replica.Addr, "127.0.0.1:")
	})
	var got echo
	waitFor(t, "an op to succeed on the new master", func() bool {
		v, err := echoOp(c, "{f}", "2").Do(ctx)
		got = v
		return err == nil
	})
	if got.n < 2 { // the replicated increment plus this one
		t.Fatalf("after the failover: %+v", got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// DoAll settles Redis and local ops together, results and errors in order.
func TestDoAll(t *testing.T) {
	ctx := context.Background()
	c := testredis.Standalone(t)
	key := testredis.Prefix(t) + "doall"
	boom := errors.New("boom")
	ops := []*store.Op[echo]{
		echoOp(c, key, "a"),
		store.Local(func() (echo, error) { return echo{arg: "local"}, nil }),
		store.Failed[echo](boom),
		echoOp(c, key, "b"),
	}
	vals, errs := store.DoAll(ctx, ops)
	if errs[0] != nil || vals[0].arg != "a" || vals[0].n != 1 || vals[1].arg != "local" ||
		!errors.Is(errs[2], boom) || errs[3] != nil || vals[3].n != 2 {
		t.Fatalf("DoAll: %+v %v", vals, errs)
	}
}
