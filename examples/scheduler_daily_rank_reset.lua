-- Daily leaderboard reset (the spec's scheduler example): at 00:00 UTC the
-- day's top 100 is archived and the board cleared, once across every
-- process (distributed = true). Until shield.rank exists, the leaderboard
-- is a plain shield.global value: { [player] = score }.
--   go run ./cmd/shield run examples/scheduler_daily_rank_reset.lua        # stays up, resets at midnight
--   go run ./cmd/shield run examples/scheduler_daily_rank_reset.lua demo   # seeds scores, runs the reset now, exits
local shield = require("shield")
local scheduler = shield.scheduler()
local g = shield.global()
local mode = arg and arg[1]

-- The leaderboard stand-in: what shield.rank("daily_score") will offer.
local rank = {}
function rank.add(board, player, score)
	local scores = g:get("rank." .. board) or {}
	scores[player] = (scores[player] or 0) + score
	g:set("rank." .. board, scores)
end
function rank.top(board, n)
	local list = {}
	for player, score in pairs(g:get("rank." .. board) or {}) do
		list[#list + 1] = { member = player, score = score }
	end
	table.sort(list, function(a, b)
		if a.score ~= b.score then return a.score > b.score end
		return a.member < b.member
	end)
	for i = n + 1, #list do list[i] = nil end
	for i, e in ipairs(list) do e.rank = i end
	return list
end
function rank.clear(board) g:set("rank." .. board, nil) end

-- Host function the game server provides: keep yesterday's board.
local function archive_rank(board, top, day)
	g:set("rank." .. board .. ".archive." .. day, top)
end

scheduler:cron("daily_rank_reset", "0 0 * * *", function(info)
	-- The firing's scheduled time names the day, whichever process runs it
	-- (and however late): midnight minus one second is yesterday.
	local day = os.date("!%Y-%m-%d", math.floor(info.scheduled / 1000) - 1)
	local yesterday = rank.top("daily_score", 100)
	archive_rank("daily_score", yesterday, day)
	rank.clear("daily_score")
	shield.log.info("daily rank reset completed", { day = day, archived = #yesterday, manual = info.manual })
end, { distributed = true })

local task = scheduler:get("daily_rank_reset")
print(string.format("daily_rank_reset: schedule %q, next run %s", task:schedule(), os.date("!%Y-%m-%dT%H:%M:%SZ", task:next_run() / 1000)))

if mode == "demo" then
	for i = 1, 5 do rank.add("daily_score", "player_" .. i, i * 100) end
	local done = false
	scheduler:on("after", function(name) if name == "daily_rank_reset" then done = true end end)
	assert(scheduler:trigger("daily_rank_reset"))
	while not done do shield.sleep(5) end
	local day = os.date("!%Y-%m-%d", math.floor(shield.now_ms() / 1000) - 1)
	local archived = g:get("rank.daily_score.archive." .. day) or g:get("rank.daily_score.archive." .. os.date("!%Y-%m-%d"))
	print(string.format("archived %d entries, leader %s; board now %s", #archived, archived[1].member,
		g:get("rank.daily_score") == nil and "empty" or "not empty"))
	scheduler:remove("daily_rank_reset") -- lets the script end
end
