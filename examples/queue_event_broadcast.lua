-- Event broadcast (spec 四、消息队列 / 使用示例 事件广播): every subscriber group
-- (service) receives every game event; within a group each event is handled
-- once, by one of the group's processes. A group that was offline catches up
-- on what it missed.
--   go run ./cmd/shield run examples/queue_event_broadcast.lua [events]
local shield = require("shield")
local events = tonumber(arg and arg[1]) or 3
local M = {}

local ns = "example:queue_event_broadcast:" -- this example's names: no other example shares them
local q = shield.broadcast_queue(ns .. "game_events")

-- Stand-ins for the services' own calls.
local notified, checked = 0, 0
local function show_notification(msg)
	notified = notified + 1
	print(string.format("ui_service: %s by %s", msg.type, msg.uid))
end
local function check_achievement(msg)
	checked = checked + 1
	print(string.format("achievement_service: checking %s for %s", msg.type, msg.uid))
end

local ui = q:subscribe("ui_service", function(msg)
	if msg.type == "boss_killed" then
		show_notification(msg)
	end
end)
local achievements = q:subscribe("achievement_service", function(msg)
	check_achievement(msg)
end)

function M.on_boss_killed(uid)
	q:push({ type = "boss_killed", uid = uid })
end

for i = 1, events do
	M.on_boss_killed("player_" .. i)
end

local deadline = shield.now_ms() + 10000
while (notified < events or checked < events) and shield.now_ms() < deadline do
	shield.sleep(10)
end
ui:stop() -- subscriptions would otherwise keep `shield run` up
achievements:stop()
print(string.format("events=%d notified=%d checked=%d", events, notified, checked))
