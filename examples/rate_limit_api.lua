-- rate_limit_api.lua — shield.rate_limiter in a game server's request path.
--   go run ./cmd/shield run examples/rate_limit_api.lua
-- With a Redis config, start it in several processes at once: the token
-- bucket's 100/s is then shared by all of them (each holds a share that
-- follows its traffic), and the sliding window counts across all of them.
local shield = require("shield")

-- Chat messages: at most 100/s per channel for the whole cluster, bursts of
-- 200. allow() decides in local memory (no Redis call): cheap enough for
-- every message.
local ns = "example:rate_limit_api:" -- this example's names: no other example shares them
local chat = shield.rate_limiter(ns .. "chat", { rate = 100, burst = 200 })

-- Gift claims: at most 3 per player in any 60 s, exactly (one Redis script
-- per claim on Redis).
local gifts = shield.rate_limiter(ns .. "gift_claim", { window = 60000, max_requests = 3, sliding = true })

local sent, dropped = 0, 0
for _ = 1, 250 do
	if chat:allow("channel:world") then
		sent = sent + 1
	else
		dropped = dropped + 1
	end
end
shield.log.info("chat burst", { sent = sent, dropped = dropped, left = chat:remaining("channel:world") })

-- A bot that may wait for its turn instead of being dropped: blocks only
-- this task, up to 1 s.
shield.spawn(function()
	local ok, why = chat:wait("channel:world", 1000)
	shield.log.info("bot message", { sent = ok, why = why })
end)

for i = 1, 5 do
	local ok, why = gifts:allow("player:42")
	if ok then
		shield.log.info("gift granted", { claim = i })
	elseif why == "unavailable" then
		-- Redis unreachable: a sliding window cannot count, so it refuses.
		shield.log.warn("gift service unavailable, try later", { claim = i })
	else
		shield.log.info("gift refused: 3 per minute", { claim = i, left = gifts:remaining("player:42") })
	end
end

local st = chat:stats()
print(string.format("chat allowed=%d rejected=%d processes=%d", st.allowed, st.rejected, st.processes))
print(string.format("gifts allowed=%d rejected=%d", gifts:stats().allowed, gifts:stats().rejected))
