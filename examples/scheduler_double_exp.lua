-- Weekly double-exp event (the spec's scheduler example): on at 20:00 UTC
-- every Saturday, off at 22:00, announced on pub/sub; each switch runs once
-- across every process (distributed = true).
--   go run ./cmd/shield run examples/scheduler_double_exp.lua        # stays up, switches on Saturdays
--   go run ./cmd/shield run examples/scheduler_double_exp.lua demo   # switches on and off now, exits
local shield = require("shield")
local scheduler = shield.scheduler()
local g = shield.global()
local mode = arg and arg[1]
local ns = "example:scheduler_double_exp:" -- this example's names (keys, tasks, channels): no other example shares them

scheduler:cron(ns .. "double_exp_event", "0 20 * * 6", function(info)
	local start = math.floor(info.scheduled / 1000)
	g:set(ns .. "activity.double_exp", {
		status = "active",
		start_time = start,
		end_time = start + 7200, -- 2 hours
		multiplier = 2,
	})
	g:publish(ns .. "activity_started", { name = "double_exp" })
end, { distributed = true })

scheduler:cron(ns .. "double_exp_end", "0 22 * * 6", function()
	g:set(ns .. "activity.double_exp", { status = "inactive" })
	g:publish(ns .. "activity_ended", { name = "double_exp" })
end, { distributed = true })

for _, name in ipairs({ "double_exp_event", "double_exp_end" }) do
	local t = scheduler:get(ns .. name)
	print(string.format("%s: schedule %q, next run %s", name, t:schedule(), os.date("!%Y-%m-%dT%H:%M:%SZ", t:next_run() / 1000)))
end

-- Game servers listen for the announcements.
local heard = {}
local subs = {}
for _, channel in ipairs({ "activity_started", "activity_ended" }) do
	subs[#subs + 1] = g:subscribe(ns .. channel, function(ch, msg)
		heard[#heard + 1] = ch
		print(string.format("%s: %s, status %s", channel, msg.name, g:get(ns .. "activity.double_exp").status))
	end)
end

if mode == "demo" then
	assert(scheduler:trigger(ns .. "double_exp_event"))
	while #heard < 1 do shield.sleep(5) end
	print("multiplier while on: " .. g:get(ns .. "activity.double_exp").multiplier)
	assert(scheduler:trigger(ns .. "double_exp_end"))
	while #heard < 2 do shield.sleep(5) end
	for _, sub in ipairs(subs) do sub:unsubscribe() end -- lets the script end
	scheduler:remove(ns .. "double_exp_event")
	scheduler:remove(ns .. "double_exp_end")
end
