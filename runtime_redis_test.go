package shieldglobal

import (
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// A shared id generator (coroutine.wrap around g:incr) called from five
// tasks: a call that finds the generator inside its pending incr fails with a
// clear error, every other call gets exactly its own id — no nil, no id
// handed out twice, none lost.
func TestSharedGeneratorCoroutineOnEveryBackend(t *testing.T) {
	for name, cfg := range map[string]func(*testing.T) Config{"redis": redisConfig, "cluster": clusterConfig, "sentinel": sentinelConfig} {
		t.Run(name, func(t *testing.T) {
			rt := newRuntime(t, newModule(t, cfg(t)))
			err := rt.RunString(`
				local g = shield.global()
				local gen = coroutine.wrap(function()
					while true do coroutine.yield(g:incr("ids")) end
				end)
				local got, busy, done = {}, 0, 0
				for t = 1, 5 do
					shield.spawn(function()
						for i = 1, 20 do
							local ok, id = pcall(gen)
							if ok then
								got[#got + 1] = id
							else
								assert(id:find("cannot resume non-suspended coroutine (it is waiting in shield.global:incr)", 1, true), id)
								busy = busy + 1
							end
							shield.sleep(0)
						end
						done = done + 1
					end)
				end
				while done < 5 do shield.sleep(1) end
				local seen = {}
				for _, id in ipairs(got) do
					assert(type(id) == "number", "a call got " .. tostring(id))
					assert(not seen[id], "id " .. id .. " handed out twice")
					seen[id] = true
				end
				for id = 1, #got do assert(seen[id], "id " .. id .. " lost") end
				assert(g:get("ids") == #got, "counter " .. tostring(g:get("ids")) .. " for " .. #got .. " ids")
				assert(busy > 0, "no call ever found the generator busy: the test did not contend")
				result = #got + busy`, "gen.lua")
			if err != nil {
				t.Fatal(err)
			}
			var total lua.LValue
			_ = rt.Do(func(L *lua.LState) error { total = L.GetGlobal("result"); return nil })
			if total != lua.LNumber(100) {
				t.Fatalf("calls accounted for: %v of 100", total)
			}
		})
	}
}
