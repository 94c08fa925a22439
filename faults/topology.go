//go:build faults

// Package faults is the fault harness of issue 18: real Redis topologies on
// loopback, a fault-injecting TCP proxy, and `shield` OS processes running
// bounded workloads, with checks of what each fault may cost
// (docs/reliability.md). It runs with `make faults` only: every file carries
// the build tag `faults`, so `go test ./...` does not see it.
package faults

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Node is one redis-server (or Sentinel) process in its own process group.
type Node struct {
	Port int
	Dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has ended
	t    testing.TB
}

// Addr is the node's host:port on loopback.
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

// Client is a direct client of this node, closed at the test's end.
func (n *Node) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: n.Addr(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	n.t.Cleanup(func() { c.Close() })
	return c
}

// freePort returns a port free on 127.0.0.1 whose cluster bus port (+10000)
// is free too.
func freePort(t testing.TB) int {
	for range 200 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("faults: listen: %v", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+10000 > 65535 {
			continue
		}
		if bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000)); err == nil {
			bus.Close()
			return p
		}
	}
	t.Fatal("faults: no free port pair on 127.0.0.1")
	return 0
}

// groupCmd makes cmd run in a process group of its own that dies with the
// test binary (Pdeathsig), so a test timeout that skips t.Cleanup leaves
// nothing running.
func groupCmd(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// StartRedis starts a redis-server on a free loopback port with no
// persistence, and waits for PING.
func StartRedis(t testing.TB, extra ...string) *Node {
	t.Helper()
	n := &Node{Port: freePort(t), Dir: t.TempDir(), t: t}
	n.args = append([]string{"--port", strconv.Itoa(n.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", n.Dir, "--logfile", filepath.Join(n.Dir, "redis.log")}, extra...)
	n.start()
	t.Cleanup(n.Kill)
	return n
}

func (n *Node) start() {
	n.t.Helper()
	cmd := exec.Command("redis-server", n.args...)
	groupCmd(cmd)
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("faults: redis-server: %v", err)
	}
	n.cmd = cmd
	done := make(chan struct{})
	n.done = done
	go func() { cmd.Wait(); close(done) }() // reap it whenever it ends
	n.waitPing()
}

func (n *Node) waitPing() {
	n.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: n.Addr(), DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil || strings.Contains(fmt.Sprint(err), "LOADING") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(n.Dir, "redis.log"))
	n.t.Fatalf("faults: redis on %d did not answer PING:\n%s", n.Port, log)
}

// signal sends sig to the node's process group.
func (n *Node) signal(sig syscall.Signal) {
	if n.cmd != nil && n.cmd.Process != nil {
		syscall.Kill(-n.cmd.Process.Pid, sig)
	}
}

// Kill is kill -9; it is also the cleanup. It returns once the process is
// gone (so its directory can be removed, its port reused).
func (n *Node) Kill() {
	n.signal(syscall.SIGKILL) // also ends a SIGSTOPped node
	if n.done != nil {
		select {
		case <-n.done:
		case <-time.After(5 * time.Second):
		}
	}
}

// Freeze stops the node with SIGSTOP for d, then continues it.
func (n *Node) Freeze(d time.Duration) {
	n.signal(syscall.SIGSTOP)
	time.Sleep(d)
	n.signal(syscall.SIGCONT)
}

// RestartEmpty kills the node and starts it again on the same port with no
// data (persistence is off).
func (n *Node) RestartEmpty() {
	n.t.Helper()
	n.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) { // wait for the port to be released
		if l, err := net.Listen("tcp", n.Addr()); err == nil {
			l.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.start()
}

// Cluster is a Redis Cluster of masters with one replica each.
type Cluster struct {
	Nodes []*Node
}

// StartCluster starts masters*2 nodes and joins them as masters+replicas.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	c := &Cluster{}
	var addrs []string
	for range masters * 2 {
		// nodes.conf is relative to the node's --dir.
		n := StartRedis(t, "--cluster-enabled", "yes", "--cluster-node-timeout", "2000", "--cluster-config-file", "nodes.conf")
		c.Nodes = append(c.Nodes, n)
		addrs = append(addrs, n.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("faults: cluster create: %v\n%s", err, out)
	}
	c.waitHealthy(t, 30*time.Second)
	return c
}

// Seeds are the cluster's addresses (seed nodes for a client).
func (c *Cluster) Seeds() []string {
	var s []string
	for _, n := range c.Nodes {
		s = append(s, n.Addr())
	}
	return s
}

// waitHealthy waits until every live node says cluster_state:ok and every
// master has a connected replica in sync.
func (c *Cluster) waitHealthy(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if c.healthy() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("faults: cluster not healthy within %v", within)
}

func (c *Cluster) healthy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
		info, err := cl.ClusterInfo(ctx).Result()
		repl, err2 := cl.Info(ctx, "replication").Result()
		cl.Close()
		if err != nil || err2 != nil || !strings.Contains(info, "cluster_state:ok") {
			return false
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return false
		}
		if strings.Contains(repl, "role:master") && !strings.Contains(repl, "connected_slaves:1") {
			return false
		}
	}
	return true
}

// MasterOf returns the node that is master for key's slot now.
func (c *Cluster) MasterOf(t testing.TB, key string) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cl := c.Nodes[0].Client()
	slot, err := cl.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatalf("faults: keyslot: %v", err)
	}
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatalf("faults: cluster slots: %v", err)
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) {
			for _, n := range c.Nodes {
				if n.Addr() == s.Nodes[0].Addr {
					return n
				}
			}
		}
	}
	t.Fatalf("faults: no master for slot %d", slot)
	return nil
}

// Client is a cluster client over the live nodes.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Seeds(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { cl.Close() })
	return cl
}

// Sentinels is a master, a replica and three Sentinels watching them as
// master SentinelMaster.
type Sentinels struct {
	Master, Replica *Node
	Sentinels       []*Node
}

// SentinelMaster is the master name the Sentinels watch.
const SentinelMaster = "shieldmaster"

// StartSentinels starts a master, its replica and three Sentinels (quorum 2,
// down after 2 s).
func StartSentinels(t testing.TB) *Sentinels {
	t.Helper()
	s := &Sentinels{Master: StartRedis(t)}
	s.Replica = StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(s.Master.Port))
	for range 3 {
		n := &Node{Port: freePort(t), Dir: t.TempDir(), t: t}
		conf := filepath.Join(n.Dir, "sentinel.conf")
		os.WriteFile(conf, fmt.Appendf(nil, "port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s 2000\nsentinel failover-timeout %s 10000\n",
			n.Port, n.Dir, SentinelMaster, s.Master.Port, SentinelMaster, SentinelMaster), 0o644)
		n.args = []string{conf, "--sentinel", "--logfile", filepath.Join(n.Dir, "sentinel.log")}
		n.start()
		t.Cleanup(n.Kill)
		s.Sentinels = append(s.Sentinels, n)
	}
	// Ready when every Sentinel knows the replica and the other Sentinels.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if s.ready() {
			return s
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("faults: the Sentinels did not discover the replica and each other within 30 s")
	return nil
}

func (s *Sentinels) ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, n := range s.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: n.Addr()})
		m, err := c.Master(ctx, SentinelMaster).Result()
		c.Close()
		if err != nil || m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" {
			return false
		}
	}
	return true
}

// Addrs are the Sentinels' addresses.
func (s *Sentinels) Addrs() []string {
	var a []string
	for _, n := range s.Sentinels {
		a = append(a, n.Addr())
	}
	return a
}

// MasterAddr asks the first Sentinel for the current master.
func (s *Sentinels) MasterAddr(t testing.TB) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[0].Addr()})
	defer c.Close()
	a, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		t.Fatalf("faults: sentinel master addr: %v", err)
	}
	return net.JoinHostPort(a[0], a[1])
}

// Failover runs SENTINEL FAILOVER and waits until the Sentinels name the
// new master and it accepts writes; it returns when that happened.
func (s *Sentinels) Failover(t testing.TB) time.Time {
	t.Helper()
	old := s.MasterAddr(t)
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[0].Addr()})
	defer c.Close()
	if err := c.Failover(context.Background(), SentinelMaster).Err(); err != nil {
		t.Fatalf("faults: SENTINEL FAILOVER: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if a := s.MasterAddr(t); a != old {
			return time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("faults: the failover did not name a new master within 30 s")
	return time.Time{}
}
