-- Cross-server matching pool (seed 004, scenario 3): every server puts its
-- players into one shared pool and its matchmaker pairs players from it. No
-- player is matched twice and nobody is lost.
--   go run ./cmd/shield run examples/matching_pool.lua [run-id] [server] [players] [servers]
local shield = require("shield")
local g = shield.global()
local run = arg and arg[1] or "demo"
local server = arg and arg[2] or "s1"
local ns = "example:matching_pool:" .. run .. ":" -- this example's names: no other example shares them
local players = tonumber(arg and arg[3]) or 21
local servers = tonumber(arg and arg[4]) or 1

local pool_key = ns .. "pool"
local lock = shield.distributed_mutex(ns .. "lock", { ttl = 5000 })

lock:with(function()
	local pool = g:get(pool_key) or {}
	for i = 1, players do pool[#pool + 1] = server .. ":p" .. i end
	g:set(pool_key, pool)
end)
g:incr(ns .. "joined")
while g:get(ns .. "joined") < servers do shield.sleep(5) end

-- Several matchmaker tasks per server, all racing for the same pool.
local function take_pair()
	return lock:with(function()
		local pool = g:get(pool_key) or {}
		if #pool < 2 then return nil end
		local a, b = table.remove(pool, 1), table.remove(pool, 1)
		g:set(pool_key, pool)
		return { a, b }
	end)
end

local done = 0
for _ = 1, 4 do
	shield.spawn(function()
		while true do
			local pair = take_pair()
			if not pair then break end
			print("match " .. pair[1] .. " " .. pair[2])
		end
		done = done + 1
	end)
end
while done < 4 do shield.sleep(5) end
local left = g:get(pool_key) or {}
print("left " .. table.concat(left, " "))
