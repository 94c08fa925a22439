-- World boss kill (seed 004, scenario 2): every battle server sees the kill
-- at about the same moment; the kill reward must be granted exactly once.
--   go run ./cmd/shield run examples/world_boss.lua [boss-id] [server-name]
local shield = require("shield")
local g = shield.global()
local boss = arg and arg[1] or "boss-1"
local server = arg and arg[2] or "server-1"
local ns = "example:world_boss:" .. boss .. ":" -- this example's names: no other example shares them
local lock = shield.lock()

-- Returns true when this call granted the reward.
local function on_boss_killed(killer)
	local l, why = lock:acquire(ns .. "reward_lock", { ttl = 10000, wait = 10000 })
	if not l then return false, why end
	local granted = false
	if not g:get(ns .. "rewarded") then
		-- The fencing token goes with the write: a store that keeps the
		-- highest token it has seen can reject a holder whose lease ran out.
		g:set(ns .. "rewarded", { server = server, killer = killer, token = l:token() })
		g:incr(ns .. "rewards")
		granted = true
	end
	l:release()
	return granted
end

local wins, done = 0, 0
for i = 1, 5 do -- several players' hits land on this server at once
	shield.spawn(function()
		if on_boss_killed(server .. ":player_" .. i) then wins = wins + 1 end
		done = done + 1
	end)
end
while done < 5 do shield.sleep(5) end
local reward = g:get(ns .. "rewarded")
print(string.format("granted_here=%d rewarded_by=%s rewards_total=%d", wins, reward.server, g:get(ns .. "rewards")))
