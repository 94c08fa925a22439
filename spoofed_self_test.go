package shieldglobal

import (
	"strings"
	"testing"

	"github.com/shieldrt/shieldglobal/config"
)

// Every method and __tostring of every shield type, called with a spoofed
// self (a userdata whose metatable says it is that type, or that carries the
// type's own metatable, but holds something else), raises a Lua argument
// error naming the expected type. It used to be a Go panic for the rank,
// queue (and its handle, dead letters, consumer), subscription, scheduler
// task and limiter types ("interface conversion: interface {} is ...").
func TestSpoofedSelfIsAnArgumentError(t *testing.T) {
	m := newModule(t, config.Default())
	rt := newRuntime(t, m)
	err := rt.RunString(`
		local objs = {
			shield.rank("spoof_r"), shield.queue("spoof_q"), shield.delay_queue("spoof_d"),
			shield.priority_queue("spoof_p"), shield.reliable_queue("spoof_rq"),
			shield.broadcast_queue("spoof_b"),
			shield.rate_limiter("spoof_t", { rate = 1, burst = 1 }),
			shield.rate_limiter("spoof_w", { algorithm = "sliding_window", max_requests = 1, window = 1000 }),
			shield.global(), shield.global():subscribe("spoof_c", function() end),
			shield.mutex("spoof_m"), shield.rwlock("spoof_rw"), shield.spinlock("spoof_s"),
			shield.distributed_mutex("spoof_dm"), shield.distributed_rwlock("spoof_drw"), shield.lock(),
			shield.scheduler(), shield.reliable_queue("spoof_rq"):dead_letter(),
		}
		local rq = shield.reliable_queue("spoof_rq")
		rq:push(1)
		local _, h = rq:pop()
		objs[#objs + 1] = h
		objs[#objs + 1] = shield.queue("spoof_q"):consume("c", function() end)
		objs[#objs + 1] = shield.scheduler():interval("spoof_task", 3600000, function() end)
		local checked = {}
		local function check(what, fn, fake)
			local ok, err = pcall(fn, fake)
			if ok then return end -- e.g. a read of a rwlock side: no self check needed
			err = tostring(err)
			if err:find("interface conversion", 1, true) or err:find("runtime error", 1, true)
				or not err:find("bad argument #1", 1, true) then
				error(what .. ": " .. err, 0)
			end
		end
		for _, o in ipairs(objs) do
			local mt = getmetatable(o)
			local name = mt.__name
			local byName = newproxy(true)
			getmetatable(byName).__name = name
			local byMeta = newproxy()
			debug.setmetatable(byMeta, mt)
			local fns = { __tostring = mt.__tostring }
			if type(mt.__index) == "table" then
				for k, v in pairs(mt.__index) do fns[k] = v end
			end
			for k, fn in pairs(fns) do
				if type(fn) == "function" then
					check(name .. "." .. k .. " (by __name)", fn, byName)
					check(name .. "." .. k .. " (by metatable)", fn, byMeta)
					checked[name] = true
				end
			end
		end
		for _, name in ipairs({ "shield.rank", "shield.queue", "shield.subscription", "shield.scheduler_task",
			"shield.queue_handle", "shield.rate_limiter" }) do
			assert(checked[name], name .. " not checked")
		end
	`, "spoof.lua")
	if err != nil {
		t.Fatal(strings.ReplaceAll(err.Error(), "\t", " "))
	}
}
