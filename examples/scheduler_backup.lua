-- Daily data backup (the spec's scheduler example): at 03:00 UTC, once
-- across every process (distributed = true), with retries if a backup
-- fails (scheduler.retry in the config, or per task as here).
--   go run ./cmd/shield run examples/scheduler_backup.lua        # stays up, backs up at 03:00
--   go run ./cmd/shield run examples/scheduler_backup.lua demo   # runs the backup now, exits
local shield = require("shield")
local scheduler = shield.scheduler()
local g = shield.global()
local mode = arg and arg[1]
local ns = "example:scheduler_backup:" -- this example's names (keys, tasks, channels): no other example shares them
local task_name = ns .. "data_backup"

-- Host functions the game server provides; here, copies within shield.global.
local function backup_player_data(day)
	local players = g:get(ns .. "players") or {}
	g:set(ns .. "backup." .. day .. ".players", players)
	return #players
end
local function backup_global_data(day)
	local values = g:mget({ ns .. "season", ns .. "motd" })
	g:set(ns .. "backup." .. day .. ".global", { season = values[ns .. "season"], motd = values[ns .. "motd"] })
	return 2
end

scheduler:cron(task_name, "0 3 * * *", function(info)
	local day = os.date("!%Y-%m-%d", math.floor(info.scheduled / 1000))
	local players = backup_player_data(day)
	local keys = backup_global_data(day)
	shield.log.info("data backup completed", { day = day, players = players, keys = keys, attempt = info.attempt })
end, {
	distributed = true,
	max_retries = 3,
	retry_delay = 60000,
	on_error = function(err)
		shield.log.error("data backup failed: " .. err)
	end,
})

local t = scheduler:get(task_name)
print(string.format("data_backup: schedule %q, next run %s", t:schedule(), os.date("!%Y-%m-%dT%H:%M:%SZ", t:next_run() / 1000)))

if mode == "demo" then
	g:set(ns .. "players", { "alice", "bob", "carol" })
	g:mset({ [ns .. "season"] = 7, [ns .. "motd"] = "welcome back" })
	local done = false
	scheduler:on("after", function(name) if name == task_name then done = true end end)
	assert(scheduler:trigger(task_name))
	while not done do shield.sleep(5) end
	local day = os.date("!%Y-%m-%d")
	print(string.format("backed up %d players, season %s", #g:get(ns .. "backup." .. day .. ".players"), g:get(ns .. "backup." .. day .. ".global").season))
	print("run_count " .. scheduler:get(task_name):run_count())
	scheduler:remove(task_name) -- lets the script end
end
