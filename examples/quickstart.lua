-- quickstart.lua — a tour of shield.global on whichever backend is configured
-- (the embedded memory backend without a config).
--   go run ./cmd/shield run examples/quickstart.lua
local shield = require("shield")
local g = shield.global()

-- Basic KV: any Lua value round-trips (tables, numbers, binary strings).
g:set("world_boss", { hp = 10000, status = "alive", drops = { "sword", "shield" } })
local boss = g:get("world_boss")
shield.log.info("boss loaded", { hp = boss.hp, status = boss.status, first_drop = boss.drops[1] })

-- Values with a ttl (milliseconds).
g:set("event.banner", "double exp weekend", 60000)

-- Batch operations.
g:mset({ ["season"] = 7, ["motd"] = "welcome back" })
local values = g:mget("season", "motd", "missing")
shield.log.info("mget", { season = values.season, motd = values.motd, missing = tostring(values.missing) })

-- Atomic counters.
g:set("online", 0)
for _ = 1, 5 do g:incr("online", 1) end
g:decr("online", 2)
shield.log.info("online players", { count = g:get("online") })

-- Local cache for hot reads: served from memory until the ttl or a write.
local cfg1 = g:get_cached("season", 60000)
g:set("season", 8)                  -- evicts it here (and, with cache.sync, everywhere)
local cfg2 = g:get_cached("season", 60000)
shield.log.info("cached reads", { before = cfg1, after = cfg2 })

-- Pub/Sub: the callback runs as a task of its own and may block.
local received = 0
local sub
sub = g:subscribe("system_notice", function(channel, message)
	received = received + 1
	shield.log.info("notice", { channel = channel, text = message.text })
	if received == 2 then sub:unsubscribe() end   -- lets the script end
end)
g:psubscribe("player.*", function(channel, message)
	shield.log.info("player event", { channel = channel, event = message.event })
end):unsubscribe()

-- Tasks: spawn work that sleeps without blocking anyone else.
shield.spawn(function()
	shield.sleep(50)
	g:publish("system_notice", { text = "server restarts in 5 minutes" })
end)
g:publish("system_notice", { text = "Hello!" })

-- Protected calls work around blocking calls too.
local ok, err = pcall(function()
	shield.sleep(10)
	error("recovered from a failure")
end)
shield.log.info("pcall", { ok = ok, err = err })
