package shieldglobal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testleak"
	"github.com/shieldrt/shieldglobal/internal/testlog"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)) }

// redisConfig is a config for the standalone test server under a private prefix.
func redisConfig(t *testing.T) Config {
	cfg := config.Default()
	cfg.Global.Redis.URL = testredis.URL(t)
	cfg.Global.Redis.Prefix = testredis.Prefix(t)
	return cfg
}

func clusterConfig(t *testing.T) Config {
	cfg := config.Default()
	cfg.Global.Redis.Addrs = testredis.ClusterAddrs(t)
	cfg.Global.Redis.Cluster = true
	cfg.Global.Redis.Prefix = testredis.Prefix(t)
	return cfg
}

func sentinelConfig(t *testing.T) Config {
	cfg := config.Default()
	cfg.Global.Redis.Addrs = []string{testredis.SentinelAddr(t)}
	cfg.Global.Redis.MasterName = testredis.SentinelMaster
	cfg.Global.Redis.Prefix = testredis.Prefix(t)
	return cfg
}

func newModule(t *testing.T, cfg Config, opts ...Option) *Module {
	t.Helper()
	m, err := New(cfg, append([]Option{WithLogger(quietLog())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func newRuntime(t *testing.T, m *Module) *Runtime {
	t.Helper()
	L := lua.NewState()
	rt, err := m.NewRuntime(L)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(time.Second); L.Close() })
	return rt
}

// A disabled module registers nothing, opens no connection and starts no
// goroutine — even with a Redis URL configured.
func TestDisabledModuleDoesNothing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	// Counted are the goroutines of this module and of go-redis: the binary's
	// other tests (Redis clients closing, timers) start and end their own.
	before := testleak.Snapshot()

	cfg := config.Default()
	cfg.Global.Enabled = false
	cfg.Global.Redis.URL = "redis://" + l.Addr().String() + "/0"
	m, err := New(cfg, WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	if m.backend != BackendNone || m.client != nil || m.kv != nil || m.bus != nil || m.cache != nil {
		t.Fatalf("disabled module has capabilities: %+v", m)
	}
	testleak.NoNew(t, before, "github.com/shieldrt/shieldglobal", "github.com/redis/go-redis")
	time.Sleep(50 * time.Millisecond) // give a stray dial the chance to show up
	if accepted.Load() != 0 {
		t.Fatal("a connection was opened to the configured Redis")
	}
	rt := newRuntime(t, m)
	if err := rt.RunString(`assert(shield.global == nil, "shield.global registered"); assert(shield.sleep)`, "t.lua"); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryBackendIsTheDefaultAndSaysSo(t *testing.T) {
	var logs bytes.Buffer
	m, err := New(config.Default(), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.backend != BackendMemory || m.kv == nil || m.bus == nil || m.cache == nil {
		t.Fatalf("backend %s", m.backend)
	}
	if c := strings.Count(logs.String(), "memory backend"); c != 1 {
		t.Fatalf("memory backend mentioned %d times in the log:\n%s", c, logs.String())
	}
}

func TestUnreachableRedisSaysWhatFailed(t *testing.T) {
	cfg := config.Default()
	cfg.Global.Redis.URL = "redis://127.0.0.1:1/0"
	cfg.Global.Redis.DialTimeout = 200
	_, err := New(cfg, WithLogger(quietLog()))
	if err == nil || !strings.Contains(err.Error(), "cannot reach Redis at redis://127.0.0.1:1/0") {
		t.Fatalf("err = %v", err)
	}
}

func TestInheritNeedsAClient(t *testing.T) {
	cfg := config.Default()
	cfg.Global.Redis.Inherit = true
	if _, err := New(cfg, WithLogger(quietLog())); err == nil || !strings.Contains(err.Error(), "WithRedisClient") {
		t.Fatalf("err = %v", err)
	}
	client := testredis.Standalone(t)
	cfg.Global.Redis.Prefix = testredis.Prefix(t)
	m := newModule(t, cfg, WithRedisClient(client))
	if m.backend != BackendRedis {
		t.Fatalf("backend %s", m.backend)
	}
	rt := newRuntime(t, m)
	if err := rt.RunString(`shield.global():set("inherited", 7)`, "t.lua"); err != nil {
		t.Fatal(err)
	}
	m.Close()
	// The host's client is still usable: the module does not close it.
	got, err := client.Get(context.Background(), cfg.Global.Redis.Prefix+"global:inherited").Result()
	if err != nil || got != "7" {
		t.Fatalf("host client after Close: %q, %v", got, err)
	}
}

func TestValuesAreJSONInRedis(t *testing.T) {
	cfg := redisConfig(t)
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	if err := rt.RunString(`shield.global():set("boss", { hp = 10000, status = "alive" })`, "t.lua"); err != nil {
		t.Fatal(err)
	}
	got, err := testredis.Standalone(t).Get(context.Background(), cfg.Global.Redis.Prefix+"global:boss").Result()
	if err != nil || got != `{"hp":10000,"status":"alive"}` {
		t.Fatalf("stored %q, %v", got, err)
	}
}

func TestRedisFailureRaisesAnErrorNamingTheCall(t *testing.T) {
	srv := testredis.StartServer(t)
	cfg := config.Default()
	cfg.Global.Redis.URL = srv.URL()
	cfg.Global.Redis.DialTimeout, cfg.Global.Redis.ReadTimeout = 200, 200
	cfg.Global.Cache.Sync = false
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	srv.Stop()
	err := rt.RunString(`shield.global():get("k")`, "t.lua")
	if err == nil || !strings.Contains(err.Error(), `t.lua:1: shield.global:get: kv: get "k"`) {
		t.Fatalf("err = %v", err)
	}
}

// Each capability can be switched off on its own: it is then not registered.
func TestLockCapabilitySwitchedOff(t *testing.T) {
	cfg := config.Default()
	cfg.Lock.Enabled = false
	m := newModule(t, cfg)
	if m.distLocks != nil || m.localLocks != nil {
		t.Fatal("lock backends built although lock.enabled is false")
	}
	rt := newRuntime(t, m)
	mustRunLua(t, rt, `assert(shield.mutex == nil and shield.lock == nil and shield.distributed_mutex == nil)
		assert(shield.global ~= nil)`)
}

// go-redis's own log lines (here: the Sentinel client announcing its
// master) go through the module's logger, not straight to stderr.
func TestRedisLogLinesGoThroughTheModuleLogger(t *testing.T) {
	var buf syncBuffer
	m, err := New(sentinelConfig(t), WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if out := buf.String(); !strings.Contains(out, `level=WARN msg="redis: `) || !strings.Contains(out, "sentinel") {
		t.Fatalf("the module's log lacks go-redis's lines:\n%s", out)
	}
}

func TestNewRuntimeAfterCloseFails(t *testing.T) {
	m := newModule(t, config.Default())
	m.Close()
	if _, err := m.NewRuntime(lua.NewState()); !errors.Is(err, ErrModuleClosed) {
		t.Fatalf("NewRuntime after Close: %v", err)
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = testlog.Buffer

// A Close error that only says a connection was closed already is no
// failure at exit; any other is kept.
func TestClosedQuietly(t *testing.T) {
	if err := closedQuietly(fmt.Errorf("redis: sentinel pubsub: %w", net.ErrClosed)); err != nil {
		t.Fatalf("closedQuietly(ErrClosed) = %v; want nil", err)
	}
	other := errors.New("redis: connection pool timeout")
	if err := closedQuietly(other); err != other {
		t.Fatalf("closedQuietly(other) = %v; want it kept", err)
	}
}
