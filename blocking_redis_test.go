package shieldglobal

import (
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// Issue 20: blocking calls outside any task (host code on the main thread)
// wait synchronously on Redis too — Redis operations, a pop that waits, a
// sliding-window wait, a distributed lock — through the one blocking
// primitive; and where a task cannot wait (Lua a Go function calls) a
// Redis operation is refused before it is sent.
func TestBlockingOutsideTasksOnEveryRedisTopology(t *testing.T) {
	for name, cfg := range map[string]func(*testing.T) Config{"redis": redisConfig, "cluster": clusterConfig, "sentinel": sentinelConfig} {
		t.Run(name, func(t *testing.T) {
			rt := newRuntime(t, newModule(t, cfg(t)))
			err := rt.Do(func(L *lua.LState) error {
				L.SetGlobal("host_call", L.NewFunction(func(L *lua.LState) int {
					L.Push(L.CheckFunction(1))
					L.Call(0, 0)
					return 0
				}))
				return L.DoString(`
					local g = shield.global()
					assert(g:set("outside", 7))
					assert(g:get("outside") == 7)
					local q = shield.queue("outside")
					q:push("m")
					assert(q:pop(1000) == "m")
					local v, why = q:pop(30)
					assert(v == nil and why == "timeout", tostring(why))
					local sw = shield.rate_limiter("outside", { window = 50, max_requests = 1, sliding = true })
					assert(sw:allow("k"))
					assert(sw:wait("k", 5000))
					local l = shield.distributed_mutex("outside")
					assert(l:acquire(5000))
					assert(l:release())`)
			})
			if err != nil {
				t.Fatal(err)
			}
			err = rt.RunString(`
				local g = shield.global()
				local ok, err = pcall(host_call, function() g:set("refused", 1) end)
				assert(not ok and tostring(err):find("shield.global:set: cannot block here", 1, true), tostring(err))
				assert(g:get("refused") == nil, "a refused set was sent")`, "task.lua")
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
