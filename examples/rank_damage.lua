-- Server-wide damage leaderboard (the spec's 全服排行榜): keep each player's
-- best hit, show the top 100.
--   go run ./cmd/shield run examples/rank_damage.lua [board] [players] [servers]
--
-- The spec writes update_damage as a read followed by a write:
--
--     local current = rank:score(uid) or 0
--     if damage > current then rank:update(uid, damage) end
--
-- Two battle servers reporting hits of one player at the same moment both
-- read the old best, and the smaller hit may land last and overwrite the
-- bigger one. mode = "max" does the comparison inside the backend, in one
-- atomic step (one Lua script on Redis), so the best hit always stays.
local shield = require("shield")

local M = {}
local board = "example:rank_damage:" .. (arg and arg[1] or "damage_rank") -- no other example shares it
local rank = shield.rank(board)

-- Records a hit; returns the player's best damage after it and whether
-- this hit is a new personal best.
function M.update_damage(uid, damage)
	local best, improved = rank:update(uid, damage, { mode = "max" })
	return best, improved
end

function M.get_top100()
	return rank:top(100)
end

-- A simulated fight: every "battle server" task reports hits for the same
-- players concurrently.
local players = tonumber(arg and arg[2]) or 50
local servers = tonumber(arg and arg[3]) or 8
local expected, running = {}, 0
for s = 1, servers do
	running = running + 1
	shield.spawn(function()
		for i = 1, 200 do
			local uid = "player_" .. ((s * 31 + i * 17) % players + 1)
			local damage = (s * 7919 + i * 104729) % 100000
			expected[uid] = math.max(expected[uid] or 0, damage)
			M.update_damage(uid, damage)
			if i % 10 == 0 then shield.sleep(0) end -- other servers report in between
		end
		running = running - 1
	end)
end
while running > 0 do shield.sleep(5) end

-- Every player's best hit was kept.
local wrong = 0
for uid, best in pairs(expected) do
	if rank:score(uid) ~= best then wrong = wrong + 1 end
end
assert(wrong == 0, wrong .. " players lost their best hit")

local top = M.get_top100()
print("top 3 by damage:")
for i = 1, 3 do
	print(string.format("  #%d %s %d", top[i].rank, top[i].uid, top[i].score))
end
local me = rank:around(top[10].uid, 1)
print(string.format("around #10: %s above, %s below", me.above[1].uid, me.below[1] and me.below[1].uid or "nobody"))
print(string.format("players=%d ranked=%d best_kept=%s", players, rank:count(), tostring(wrong == 0)))
return M
