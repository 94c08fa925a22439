-- examples/embed/game.lua: the game logic of the embedding example. The Go
-- host (main.go) loads it, exposes give_reward and show_notification, and
-- calls handlers.* for each player request (Runtime.Call), each call a task
-- that may block.
--
-- The handlers are the spec's examples: the delayed daily reward (四、消息队列
-- 延迟奖励), the world boss (使用示例 全服BOSS) with its event broadcast
-- (事件广播), and the damage leaderboard (全服排行榜, mode = "max").
local shield = require("shield")
-- Every name (keys, locks, queues, the board) starts with ns: on a shared
-- Redis no other example's data shows up here.
local ns = "example:embed:"
local g = shield.global()
local lock = shield.lock()
local rewards = shield.delay_queue(ns .. "daily_reward")
local events = shield.broadcast_queue(ns .. "game_events")
local damage = shield.rank(ns .. "damage_rank")

-- The host passes the reward delay (the spec's is 86400000 ms, a day).
local reward_delay = REWARD_DELAY_MS or 86400000

handlers = {}

-- A player logs in: the daily bonus is granted once its delay has passed.
function handlers.on_login(uid)
	rewards:push({ uid = uid, reward = "daily_bonus" }, reward_delay)
	return "welcome " .. uid
end

-- A player hits the boss. The first hit spawns it (under a lock, so two
-- servers never both spawn one); the killing blow is announced once.
function handlers.attack_boss(uid, hit)
	local boss = g:get(ns .. "world_boss")
	if not boss or boss.status ~= "alive" then
		local l = lock:acquire(ns .. "boss_spawn", { ttl = 60000, wait = 5000 })
		if not l then return nil, "busy" end
		boss = g:get(ns .. "world_boss")
		if not boss or boss.status ~= "alive" then
			boss = { hp = BOSS_HP or 10000, status = "alive" }
			g:set(ns .. "world_boss", boss)
		end
		l:release()
	end
	damage:update(uid, hit, { mode = "max" }) -- keep each player's best hit
	local left = g:incr(ns .. "world_boss_damage", hit)
	if left >= boss.hp and g:incr(ns .. "world_boss_kills") == 1 then
		g:set(ns .. "world_boss", { hp = boss.hp, status = "dead", killer = uid })
		events:push({ type = "boss_killed", uid = uid })
	end
	return left
end

function handlers.top(n)
	return damage:top(n)
end

-- Consumers: the delayed rewards, and the UI's view of game events.
rewards:consume("reward_worker", function(msg)
	give_reward(msg.uid, msg.reward)
end)
events:subscribe("ui_service", function(msg)
	if msg.type == "boss_killed" then
		show_notification(msg.uid .. " killed the world boss")
	end
end)
