-- Matchmaking leaderboard (seed 002): atomic position swaps, versioned
-- swaps that refuse stale requests, and a reader cache that refreshes only
-- when the board version moves.
--   go run ./cmd/shield run examples/rank_matchmaking.lua [board]
local shield = require("shield")
local board = "example:rank_matchmaking:" .. (arg and arg[1] or "match_rank") -- no other example shares it
local rank = shield.rank(board)

rank:mupdate({ alice = 1500, bob = 1480, carol = 1460, dave = 1440, erin = 1420 })

-- A reader (the matchmaker, a web page) caches a snapshot and refetches only
-- when the version moved, so it never sees a board half-way through a change
-- and never refetches an unchanged one.
local cache = { version = -1 }
local refreshes = 0
local function leaderboard()
	local v = rank:version()
	if v ~= cache.version then
		local s = rank:snapshot(1, 100)
		cache, refreshes = s, refreshes + 1
	end
	return cache.entries
end

leaderboard()
leaderboard() -- unchanged: no refetch
assert(refreshes == 1)

-- An appeal restores bob above alice: their positions are exchanged in one
-- step; nobody else moves, and no reader can see both on one rank.
local bob_score, alice_score = rank:swap("bob", "alice")
assert(bob_score == 1500 and alice_score == 1480)
assert(leaderboard()[1].uid == "bob" and refreshes == 2)

-- A "seat swap card": carol swaps with whoever is #1 — but only if neither
-- score changed since she looked (another request may have won the race).
local function use_swap_card(uid, while_confirming)
	for attempt = 1, 5 do
		local first = rank:top(1)[1]
		local mine = rank:score(uid)
		if not mine or first.uid == uid then return false, "nothing to swap" end
		-- the player confirms; other requests run meanwhile
		if while_confirming then while_confirming(); while_confirming = nil end
		local ok, why = rank:swap(uid, first.uid, { expect = { [uid] = mine, [first.uid] = first.score } })
		if ok then return attempt end
		if why ~= "version_conflict" then return false, why end
		-- somebody changed one of the two scores: look again
	end
	return false, "busy"
end

-- bob wins a match while carol is deciding: the attempt that read his old
-- score is refused, and she looks again.
local attempts = assert(use_swap_card("carol", function() rank:incr("bob", 3) end))
assert(attempts == 2, "the first attempt should have met the conflict")
local top = leaderboard()
assert(top[1].uid == "carol" and top[1].score == 1503, top[1].uid)
assert(rank:score("bob") == 1460)
print(string.format("#1 %s %d after %d attempt(s), #2 %s %d; version %d, reader refreshed %d times",
	top[1].uid, top[1].score, attempts, top[2].uid, top[2].score, rank:version(), refreshes))

-- Swaps never insert anyone.
local ok, why = rank:swap("carol", "mallory")
assert(ok == nil and why == "not_found" and rank:count() == 5)
print("swaps=ok")
