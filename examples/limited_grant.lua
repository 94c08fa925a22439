-- Limited item grant (seed 004, scenario 1): 100 items, a crowd of players
-- claims at once from several servers; exactly 100 are granted, never more.
--   go run ./cmd/shield run examples/limited_grant.lua [run-id] [claimers]
-- Run it from several processes against one Redis (SHIELD_REDIS_URL) with
-- the same run-id: the total stays 100.
local shield = require("shield")
local g = shield.global()
local run = arg and arg[1] or "demo"
local ns = "example:limited_grant:" .. run .. ":" -- this example's names: no other example shares them
local claimers = tonumber(arg and arg[2]) or 500
local STOCK = 100

local stock_key, granted_key = ns .. "stock", ns .. "granted"
local lock = shield.distributed_mutex(ns .. "lock", { ttl = 5000 })

-- The first process to arrive stocks the item.
lock:with(function()
	if g:get(stock_key) == nil and g:get(granted_key) == nil then
		g:set(stock_key, STOCK)
	end
end)

local mine, done = 0, 0
for i = 1, claimers do
	shield.spawn(function()
		lock:with(function()
			local stock = g:get(stock_key)
			if stock > 0 then
				g:set(stock_key, stock - 1) -- read-modify-write: safe only under the lock
				g:incr(granted_key)
				mine = mine + 1
			end
		end)
		done = done + 1
	end)
end
while done < claimers do shield.sleep(5) end
print(string.format("granted_here=%d stock=%d granted_total=%d", mine, g:get(stock_key), g:get(granted_key)))
