-- Daily leaderboard reset (the spec's scheduler example): at 00:00 UTC the
-- day's top 100 of the shield.rank board "daily_score" is archived and the
-- board cleared, once across every process (distributed = true). The
-- archive stands in for the game server's own archive_rank; it is kept as a
-- shield.global value. shield.rank can also do this by itself: its
-- reset = "daily" option registers the reset task (docs/rank.md).
--   go run ./cmd/shield run examples/scheduler_daily_rank_reset.lua        # stays up, resets at midnight
--   go run ./cmd/shield run examples/scheduler_daily_rank_reset.lua demo   # seeds scores, runs the reset now, exits
local shield = require("shield")
local scheduler = shield.scheduler()
local g = shield.global()
local mode = arg and arg[1]
local ns = "example:scheduler_daily_rank_reset:" -- this example's names (keys, tasks, channels): no other example shares them
local task_name, board = ns .. "daily_rank_reset", ns .. "daily_score"

-- Host function the game server provides: keep yesterday's board.
local function archive_rank(board, top, day)
	g:set(board .. ".archive." .. day, top)
end

scheduler:cron(task_name, "0 0 * * *", function(info)
	-- The firing's scheduled time names the day, whichever process runs it
	-- (and however late): midnight minus one second is yesterday.
	local day = os.date("!%Y-%m-%d", math.floor(info.scheduled / 1000) - 1)
	local rank = shield.rank(board)
	local top100 = rank:top(100) -- { { uid = ..., score = ..., rank = 1 }, ... }
	archive_rank(board, top100, day)
	rank:clear()
	shield.log.info("daily rank reset completed", { day = day, archived = #top100, manual = info.manual })
end, { distributed = true })

local task = scheduler:get(task_name)
print(string.format("daily_rank_reset: schedule %q, next run %s", task:schedule(), os.date("!%Y-%m-%dT%H:%M:%SZ", task:next_run() / 1000)))

if mode == "demo" then
	local rank = shield.rank(board)
	for i = 1, 5 do rank:update("player_" .. i, i * 100) end
	local done = false
	scheduler:on("after", function(name) if name == task_name then done = true end end)
	assert(scheduler:trigger(task_name))
	while not done do shield.sleep(5) end
	local day = os.date("!%Y-%m-%d", math.floor(shield.now_ms() / 1000) - 1)
	local archived = g:get(board .. ".archive." .. day) or g:get(board .. ".archive." .. os.date("!%Y-%m-%d"))
	print(string.format("archived %d entries, leader %s; board now %s", #archived, archived[1].uid,
		rank:count() == 0 and "empty" or "not empty"))
	scheduler:remove(task_name) -- lets the script end
end
