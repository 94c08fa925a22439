package shieldglobal

import (
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// Two modules on one Redis behave like two processes: a write in one evicts
// the key from the other's local cache.
func TestCacheSyncAcrossModules(t *testing.T) {
	for name, cfgFn := range map[string]func(*testing.T) Config{"redis": redisConfig, "cluster": clusterConfig} {
		t.Run(name, func(t *testing.T) {
			cfg := cfgFn(t)
			a, b := newModule(t, cfg), newModule(t, cfg)
			ra, rb := newRuntime(t, a), newRuntime(t, b)
			mustRunLua(t, rb, `shield.global():set("hot", "v1")`)
			// Reads are served from a's cache. (b's own announcement of "v1" may
			// still arrive and evict it once: that is safe, so retry a little.)
			for i := 0; a.CacheStats().Hits == 0; i++ {
				if i == 100 {
					t.Fatalf("reads are never served from the cache: %+v", a.CacheStats())
				}
				mustRunLua(t, ra, `assert(shield.global():get_cached("hot", 600000) == "v1")`)
			}
			mustRunLua(t, rb, `shield.global():set("hot", "v2")`)
			mustRunLua(t, ra, `
				local g = shield.global()
				local deadline = shield.now_ms() + 5000
				while g:get_cached("hot", 600000) ~= "v2" do
					assert(shield.now_ms() < deadline, "a's cache still serves the old value")
					shield.sleep(5)
				end`)
			mustRunLua(t, rb, `shield.global():invalidate("hot")`) // also crosses processes
		})
	}
}

// After the invalidation connection drops, announcements may have been
// missed: the cache must not serve what it held before.
func TestCacheClearedAfterReconnect(t *testing.T) {
	srv := testredis.StartServer(t)
	cfg := config.Default()
	cfg.Global.Redis.URL = srv.URL()
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	mustRunLua(t, rt, `local g = shield.global(); g:set("k", "old"); assert(g:get_cached("k", 600000) == "old")`)
	if m.CacheStats().Size != 1 {
		t.Fatalf("cache size %d", m.CacheStats().Size)
	}
	srv.Restart() // data is gone, and nobody could announce anything meanwhile
	deadline := time.Now().Add(10 * time.Second)
	for m.CacheStats().Size != 0 {
		if time.Now().After(deadline) {
			t.Fatal("cache not cleared after the invalidation connection dropped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustRunLua(t, rt, `
		local g = shield.global()
		local deadline = shield.now_ms() + 10000
		while true do
			local ok, v = pcall(g.get_cached, g, "k", 600000)
			if ok then assert(v == nil, "stale value served: " .. tostring(v)); break end
			assert(shield.now_ms() < deadline, v)
			shield.sleep(50)
		end`)
}

func mustRunLua(t *testing.T, rt *Runtime, src string) {
	t.Helper()
	if err := rt.RunString(src, "test.lua"); err != nil {
		t.Fatal(err)
	}
}

// A Lua subscription comes back by itself after Redis restarts.
func TestSubscriptionSurvivesRedisRestart(t *testing.T) {
	srv := testredis.StartServer(t)
	cfg := config.Default()
	cfg.Global.Redis.URL = srv.URL()
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	mustRunLua(t, rt, `
		got = {}
		sub = shield.global():subscribe("notice", function(_, msg) got[#got + 1] = msg end)`)
	srv.Restart()
	mustRunLua(t, rt, `
		local g = shield.global()
		local deadline = shield.now_ms() + 15000
		while #got == 0 do
			assert(shield.now_ms() < deadline, "no message after the restart")
			pcall(g.publish, g, "notice", "after restart") -- fails while Redis is still coming back
			shield.sleep(100)
		end
		assert(got[1] == "after restart")
		sub:unsubscribe()`)
}
