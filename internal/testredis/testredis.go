// Package testredis gives tests real Redis servers: the standalone server and
// the three-master cluster that scripts/with-redis.sh (make test) starts, and
// private servers a test may stop and restart.
//
// There is no skipping: a test that needs Redis and cannot reach it fails and
// says how to get one (run `make test`).
package testredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Env names the variables scripts/with-redis.sh exports.
const (
	EnvURL      = "SHIELD_TEST_REDIS_URL"
	EnvCluster  = "SHIELD_TEST_REDIS_CLUSTER"
	EnvSentinel = "SHIELD_TEST_REDIS_SENTINEL"
	// SentinelMaster is the master name the test Sentinel watches.
	SentinelMaster = "shieldmaster"
)

// need returns the environment variable name or fails the test: what names
// the deployment the test needs.
func need(t testing.TB, name, what string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("this test needs %s: %s is not set (run `make test`, which starts one)", what, name)
	}
	return v
}

// URL returns the standalone server's URL or fails the test.
func URL(t testing.TB) string {
	t.Helper()
	return need(t, EnvURL, "Redis")
}

// ClusterAddrs returns the cluster seed addresses or fails the test.
func ClusterAddrs(t testing.TB) []string {
	t.Helper()
	return strings.Split(need(t, EnvCluster, "a Redis Cluster"), ",")
}

// SentinelAddr returns the test Sentinel's address or fails the test.
func SentinelAddr(t testing.TB) string {
	t.Helper()
	return need(t, EnvSentinel, "a Redis Sentinel")
}

// Sentinel connects through the test Sentinel to its master; the client is
// closed when the test ends.
func Sentinel(t testing.TB) *redis.Client {
	t.Helper()
	addr := SentinelAddr(t)
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: []string{addr}})
	t.Cleanup(func() { c.Close() })
	ping(t, c, "sentinel "+addr)
	return c
}

// Standalone connects to the standalone server; the client is closed when the test ends.
func Standalone(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(URL(t))
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	ping(t, c, opt.Addr)
	return c
}

// Cluster connects to the three-master cluster; the client is closed when the test ends.
func Cluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	addrs := ClusterAddrs(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { c.Close() })
	ping(t, c, strings.Join(addrs, ","))
	return c
}

// Backends returns the Redis deployments every Redis-backed capability is
// tested on, by name: "redis" (standalone), "cluster" and "sentinel".
func Backends(t testing.TB) map[string]redis.UniversalClient {
	t.Helper()
	return map[string]redis.UniversalClient{"redis": Standalone(t), "cluster": Cluster(t), "sentinel": Sentinel(t)}
}

// Prefix returns a key prefix no other test uses, so tests can share a server.
func Prefix(t testing.TB) string {
	var b [6]byte
	rand.Read(b[:])
	return "test:" + hex.EncodeToString(b[:]) + ":"
}

func ping(t testing.TB, c redis.UniversalClient, where string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("this test needs Redis at %s, which does not answer: %v (run `make test`)", where, err)
	}
}

// Server is a private redis-server process a test can stop and restart
// (for reconnect tests). It listens on a fixed loopback port for its life.
type Server struct {
	Addr  string
	dir   string
	cmd   *exec.Cmd
	t     testing.TB
	extra []string // more redis-server arguments (StartServerWith)
}

// StartServer starts a private redis-server on a free loopback port; it is
// stopped when the test ends.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return StartServerWith(t)
}

// StartServerWith is StartServer with more redis-server arguments, such as
// "--replicaof", "127.0.0.1", "6379".
func StartServerWith(t testing.TB, args ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("this test needs the redis-server binary (run `make test`, which installs it): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &Server{Addr: addr, dir: t.TempDir(), t: t, extra: args}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// StartSentinel starts a private Sentinel watching master (host:port) as
// master; it declares the master down after 500ms. It is stopped when the
// test ends; the returned Server's Addr is the Sentinel's.
func StartSentinel(t testing.TB, name, master string) *Server {
	t.Helper()
	host, port, _ := net.SplitHostPort(master)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	_, sport, _ := net.SplitHostPort(addr)
	conf := fmt.Sprintf("port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 1\n"+
		"sentinel down-after-milliseconds %s 500\nsentinel failover-timeout %s 5000\n", sport, dir, name, host, port, name, name)
	path := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: addr, dir: dir, t: t, extra: []string{"sentinel-conf:" + path}}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Start starts the server (again) and waits until it answers PING.
func (s *Server) Start() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	if len(s.extra) == 1 && strings.HasPrefix(s.extra[0], "sentinel-conf:") {
		s.cmd = exec.Command("redis-server", strings.TrimPrefix(s.extra[0], "sentinel-conf:"), "--sentinel",
			"--logfile", filepath.Join(s.dir, "redis.log"))
	} else {
		s.cmd = exec.Command("redis-server", append([]string{"--port", port, "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", s.dir,
			"--logfile", filepath.Join(s.dir, "redis.log")}, s.extra...)...)
	}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("redis-server on %s did not start: %v\n%s", s.Addr, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Restart stops the server and starts it again on the same port (data is lost).
func (s *Server) Restart() {
	s.Stop()
	s.Start()
}

// String describes the server for test messages.
func (s *Server) String() string { return fmt.Sprintf("redis-server %s", s.Addr) }
