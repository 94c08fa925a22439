package main

import (
	"context"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// queue.enabled: false registers no queue constructor and opens nothing.
func TestQueueDisabledRegistersNothing(t *testing.T) {
	cfg := writeFile(t, "off.yaml", "queue:\n  enabled: false\n")
	r := runShield(t, context.Background(), "run", "--config", cfg, writeFile(t, "off.lua", `
		print(shield.queue == nil, shield.delay_queue == nil, shield.priority_queue == nil,
			shield.reliable_queue == nil, shield.broadcast_queue == nil, shield.global() ~= nil)`))
	if r.code != 0 || strings.TrimSpace(r.stdout) != "true\ttrue\ttrue\ttrue\ttrue\ttrue" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// Module.QueueStats lists every queue the process's runtimes opened, on
// Redis and on memory.
func TestModuleQueueStats(t *testing.T) {
	redisCfg := config.Default()
	redisCfg.Global.Redis.URL = testredis.URL(t)
	redisCfg.Global.Redis.Prefix = testredis.Prefix(t)
	for name, cfg := range map[string]config.Config{"memory": config.Default(), "redis": redisCfg} {
		t.Run(name, func(t *testing.T) {
			mod, err := shieldglobal.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close()
			L := lua.NewState()
			defer L.Close()
			rt, err := mod.NewRuntime(L)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close(0)
			err = rt.RunString(`
				shield.queue("ops_plain"):push(1)
				local d = shield.delay_queue("ops_delay"); d:push(1, 60000); d:push(2, 0)
				local r = shield.reliable_queue("ops_rel"); r:push(1); r:push(2)
				shield.spawn(function() local _, h = r:pop(); shield.sleep(60000) end) -- holds one
				consumer = shield.broadcast_queue("ops_bc"):subscribe("g", function() end)
				shield.sleep(20)`, "ops.lua")
			if err != nil {
				t.Fatal(err)
			}
			infos, err := mod.QueueStats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]shieldglobal.QueueInfo{}
			for _, i := range infos {
				byName[i.Name] = i
			}
			if len(infos) != 4 {
				t.Fatalf("%d queues: %+v", len(infos), infos)
			}
			if p := byName["ops_plain"]; p.Kind != queue.KindPlain || p.Length != 1 {
				t.Errorf("plain: %+v", p)
			}
			if d := byName["ops_delay"]; d.Pending != 1 || d.Ready != 1 {
				t.Errorf("delay: %+v", d)
			}
			if r := byName["ops_rel"]; r.Length != 2 || r.InFlight != 1 || r.Consumers != 1 {
				t.Errorf("reliable: %+v", r)
			}
			if b := byName["ops_bc"]; b.Kind != queue.KindBroadcast || b.LocalConsumers != 1 || len(b.Groups) != 1 {
				t.Errorf("broadcast: %+v", b)
			}
		})
	}
}
