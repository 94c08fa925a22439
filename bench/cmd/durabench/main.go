// Command durabench measures what global.redis.wait_replicas costs: g:incr
// from 32 tasks of one runtime against a master with one replica, with
// wait_replicas 0 (off, the default) and 1 (every incr followed by WAIT 1 on
// its connection; one WAIT per loop turn's pipeline), in interleaved rounds.
// It starts its own master and replica (redis-server on loopback, no
// persistence) and stops them; it prints a markdown report
// (docs/durability.md quotes it).
//
//	cd bench && go run ./cmd/durabench
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/bench/internal/benchutil"
	"github.com/shieldrt/shieldglobal/config"
)

var (
	flagSlice  = flag.Duration("slice", 2*time.Second, "measuring time of one case in one round")
	flagRounds = flag.Int("rounds", 5, "interleaved rounds")
	flagTasks  = flag.Int("tasks", 32, "concurrent tasks")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "durabench")
	if err != nil {
		benchutil.Fatalf("%v", err)
	}
	defer os.RemoveAll(dir)
	master := start(dir, "master", "--repl-diskless-sync-delay", "0")
	defer stop(master)
	replica := start(dir, "replica", "--replicaof", "127.0.0.1", master.port)
	defer stop(replica)

	mc := redis.NewClient(&redis.Options{Addr: master.addr()})
	defer mc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(mc.Info(ctx, "replication").Val(), ",state=online,") {
		if time.Now().After(deadline) {
			stop(replica)
			stop(master)
			benchutil.Fatalf("the replica never came online")
		}
		time.Sleep(20 * time.Millisecond)
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var mods []*shieldglobal.Module
	defer func() { // before the servers stop
		for _, m := range mods {
			m.Close()
		}
	}()
	runtimeWith := func(replicas int) *shieldglobal.Runtime {
		cfg := config.Default()
		cfg.Global.Redis.URL = "redis://" + master.addr() + "/0"
		cfg.Global.Redis.Prefix = "durabench:" + benchutil.RandHex(4) + ":"
		cfg.Global.Redis.WaitReplicas = replicas
		cfg.Global.Redis.WaitTimeout = 1000
		mod, err := shieldglobal.New(cfg, shieldglobal.WithLogger(log))
		if err != nil {
			benchutil.Fatalf("shieldglobal.New: %v", err)
		}
		mods = append(mods, mod)
		rt, err := mod.NewRuntime(lua.NewState())
		if err != nil {
			benchutil.Fatalf("NewRuntime: %v", err)
		}
		return rt
	}
	off, on := runtimeWith(0), runtimeWith(1)
	n := *flagTasks
	body := `g:incr("n")`
	var waitsOn, opsOn int
	cases := []*benchutil.Case{
		{Name: fmt.Sprintf("%d tasks, `g:incr`, wait_replicas 0 (off)", n), Run: func(d time.Duration) int {
			return benchutil.LuaTasks(off, n, 1, d, `local g = shield.global()`, body)
		}},
		{Name: fmt.Sprintf("%d tasks, `g:incr`, wait_replicas 1, wait_timeout 1000", n), Run: func(d time.Duration) int {
			before := waitCalls(ctx, mc)
			ops := benchutil.LuaTasks(on, n, 1, d, `local g = shield.global()`, body)
			waitsOn += waitCalls(ctx, mc) - before
			opsOn += ops
			return ops
		}},
	}
	benchutil.Interleave(cases, *flagRounds, *flagSlice)

	fmt.Printf("Redis %s, master + 1 replica on loopback, %s, GOMAXPROCS %d, %d rounds of %v each, interleaved\n\n",
		benchutil.RedisVersion(ctx, mc), runtime.Version(), runtime.GOMAXPROCS(0), *flagRounds, *flagSlice)
	fmt.Println("| case | median ops/s | rounds |")
	fmt.Println("|---|---|---|")
	for _, c := range cases {
		rs := make([]string, len(c.Rates))
		for i, r := range c.Rates {
			rs[i] = benchutil.FmtOps(r)
		}
		fmt.Printf("| %s | %s | %s |\n", c.Name, benchutil.FmtOps(benchutil.Median(c.Rates)), strings.Join(rs, ", "))
	}
	fmt.Printf("\nwait on ÷ off, median of per-round ratios: %.2f; WAITs sent per incr with wait on: %.3f\n",
		benchutil.Ratio(cases[1], cases[0]), float64(waitsOn)/float64(max(opsOn, 1)))
}

type server struct {
	port string
	cmd  *exec.Cmd
}

func (s *server) addr() string { return "127.0.0.1:" + s.port }

// start runs a redis-server on a free loopback port and waits for PING.
func start(dir, name string, args ...string) *server {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		benchutil.Fatalf("%v", err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		benchutil.Fatalf("%v", err)
	}
	cmd := exec.Command("redis-server", append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", d, "--logfile", filepath.Join(d, "redis.log")}, args...)...)
	if err := cmd.Start(); err != nil {
		benchutil.Fatalf("redis-server: %v", err)
	}
	s := &server{port: port, cmd: cmd}
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	for i := 0; c.Ping(context.Background()).Err() != nil; i++ {
		if i == 100 {
			stop(s)
			benchutil.Fatalf("redis-server %s did not start", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

func stop(s *server) {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

func waitCalls(ctx context.Context, c *redis.Client) int {
	for _, line := range strings.Split(c.Info(ctx, "commandstats").Val(), "\r\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_wait:calls="); ok {
			v, _, _ = strings.Cut(v, ",")
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
