-- quickstart.lua — a tour of shield.global on whichever backend is configured
-- (the embedded memory backend without a config).
--   go run ./cmd/shield run examples/quickstart.lua
local shield = require("shield")
local g = shield.global()
-- This example's names (keys, channels) start with ns: on a shared Redis no
-- other example reads or overwrites them.
local ns = "example:quickstart:"

-- Basic KV: any Lua value round-trips (tables, numbers, binary strings).
g:set(ns .. "world_boss", { hp = 10000, status = "alive", drops = { "sword", "shield" } })
local boss = g:get(ns .. "world_boss")
shield.log.info("boss loaded", { hp = boss.hp, status = boss.status, first_drop = boss.drops[1] })

-- Values with a ttl (milliseconds).
g:set(ns .. "event.banner", "double exp weekend", 60000)

-- Batch operations.
g:mset({ [ns .. "season"] = 7, [ns .. "motd"] = "welcome back" })
local values = g:mget(ns .. "season", ns .. "motd", ns .. "missing") -- keyed by key
shield.log.info("mget", { season = values[ns .. "season"], motd = values[ns .. "motd"], missing = tostring(values[ns .. "missing"]) })

-- Atomic counters.
g:set(ns .. "online", 0)
for _ = 1, 5 do g:incr(ns .. "online", 1) end
g:decr(ns .. "online", 2)
shield.log.info("online players", { count = g:get(ns .. "online") })

-- Local cache for hot reads: served from memory until the ttl or a write.
local cfg1 = g:get_cached(ns .. "season", 60000)
g:set(ns .. "season", 8)                  -- evicts it here (and, with cache.sync, everywhere)
local cfg2 = g:get_cached(ns .. "season", 60000)
shield.log.info("cached reads", { before = cfg1, after = cfg2 })

-- Pub/Sub: the callback runs as a task of its own and may block.
local received = 0
local sub
sub = g:subscribe(ns .. "system_notice", function(channel, message)
	received = received + 1
	shield.log.info("notice", { channel = channel, text = message.text })
	if received == 2 then sub:unsubscribe() end   -- lets the script end
end)
g:psubscribe(ns .. "player.*", function(channel, message)
	shield.log.info("player event", { channel = channel, event = message.event })
end):unsubscribe()

-- Tasks: spawn work that sleeps without blocking anyone else.
shield.spawn(function()
	shield.sleep(50)
	g:publish(ns .. "system_notice", { text = "server restarts in 5 minutes" })
end)
g:publish(ns .. "system_notice", { text = "Hello!" })

-- Protected calls work around blocking calls too.
local ok, err = pcall(function()
	shield.sleep(10)
	error("recovered from a failure")
end)
shield.log.info("pcall", { ok = ok, err = err })
