package testredis

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replicated is a private master and a replica of it (REPLICAOF), with
// clients that read for up to 15 s (a test's WAIT may block longer than the
// go-redis default of 3 s).
type Replicated struct {
	Master, Replica *Server
	// MasterClient and ReplicaClient are closed when the test ends.
	MasterClient, ReplicaClient *redis.Client
	replicaPID                  int
}

// StartReplicated starts a master and its replica and waits until the master
// counts the replica online; both stop when the test ends.
func StartReplicated(t testing.TB) *Replicated {
	t.Helper()
	m := StartServerWith(t, "--repl-diskless-sync-delay", "0") // the first full sync at once, not after 5 s
	host, port, _ := strings.Cut(m.Addr, ":")
	r := StartServerWith(t, "--replicaof", host, port)
	opt := func(addr string) *redis.Options {
		return &redis.Options{Addr: addr, ReadTimeout: 15 * time.Second, MaxRetries: -1}
	}
	p := &Replicated{Master: m, Replica: r, MasterClient: redis.NewClient(opt(m.Addr)), ReplicaClient: redis.NewClient(opt(r.Addr))}
	t.Cleanup(func() { p.MasterClient.Close(); p.ReplicaClient.Close() })
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.MasterClient.Info(ctx, "replication").Val(), ",state=online,") {
		if time.Now().After(deadline) {
			t.Fatalf("the replica never came online: %s", p.MasterClient.Info(ctx, "replication").Val())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// "online" comes before the master streams to the replica: after a
	// diskless sync it waits for the replica's first REPLCONF ACK (up to a
	// second), buffering meanwhile. A write the replica confirms (WAIT) says
	// the stream runs: a failover from now on promotes a replica that has
	// what it acknowledged.
	if err := p.MasterClient.Set(ctx, "testredis:replicated", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := p.MasterClient.Do(ctx, "wait", 1, 10000).Int(); err != nil || n != 1 {
		t.Fatalf("the replica did not confirm a write within 10 s: %d, %v", n, err)
	}
	p.MasterClient.Del(ctx, "testredis:replicated")
	p.MasterClient.ConfigResetStat(ctx) // WaitCalls counts the test's WAITs only
	pid, err := strconv.Atoi(InfoField(t, p.ReplicaClient, "server", "process_id"))
	if err != nil {
		t.Fatalf("the replica's process_id: %v", err)
	}
	p.replicaPID = pid
	return p
}

// FreezeReplica stops the replica (SIGSTOP) until resume is called or the
// test ends: it cannot acknowledge what the master sends it.
func (p *Replicated) FreezeReplica(t testing.TB) (resume func()) {
	t.Helper()
	if err := syscall.Kill(p.replicaPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume = func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(p.replicaPID, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	return resume
}

// InfoField returns field of INFO section ("" when absent).
func InfoField(t testing.TB, c *redis.Client, section, field string) string {
	t.Helper()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// WaitCalls is how many WAIT commands the server c talks to has run.
func WaitCalls(t testing.TB, c *redis.Client) int {
	t.Helper()
	s := InfoField(t, c, "commandstats", "cmdstat_wait")
	if s == "" {
		return 0
	}
	calls, _, _ := strings.Cut(strings.TrimPrefix(s, "calls="), ",")
	n, err := strconv.Atoi(calls)
	if err != nil {
		t.Fatalf("cmdstat_wait %q: %v", s, err)
	}
	return n
}
