-- Delayed reward (spec 四、消息队列 / 使用示例 延迟奖励): a login schedules the
-- daily bonus on a delay queue; a consumer grants it when it is due. Due
-- times are Redis server time, so any process may push and any may grant.
--   go run ./cmd/shield run examples/queue_delayed_reward.lua [delay_ms] [players]
-- The spec delays by 86400000 ms (24 h); the default here is 300 ms so that
-- the example finishes. Every player is granted exactly once.
local shield = require("shield")
local delay = tonumber(arg and arg[1]) or 300
local players = tonumber(arg and arg[2]) or 5
local M = {}

local ns = "example:queue_delayed_reward:" -- this example's names: no other example shares them
local q = shield.delay_queue(ns .. "daily_reward")

-- Stand-in for the game's own reward call.
local granted, late = {}, {}
local function give_reward(uid, reward, due_ms)
	granted[#granted + 1] = uid
	late[#late + 1] = shield.now_ms() - due_ms
	print(string.format("reward %s to %s", reward, uid))
end

function M.on_login(player)
	q:push({ uid = player.uid, reward = "daily_bonus", due = shield.now_ms() + delay }, delay)
end

local worker = q:consume("reward_worker", function(msg)
	give_reward(msg.uid, msg.reward, msg.due)
end)

for i = 1, players do
	M.on_login({ uid = "player_" .. i })
end
print(string.format("scheduled=%d pending=%d", players, q:pending()))

local deadline = shield.now_ms() + delay + 10000
while #granted < players and shield.now_ms() < deadline do
	shield.sleep(10)
end
worker:stop() -- the consumer would otherwise keep `shield run` up
table.sort(late)
print(string.format("granted=%d pending=%d lateness_max_ms=%d", #granted, q:pending(), late[#late] or -1))
