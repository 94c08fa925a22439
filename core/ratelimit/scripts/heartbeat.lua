-- heartbeat.lua: keep this process in the set of processes running
-- token-bucket limiters, drop those whose heartbeat lapsed, and count them.
--
-- KEYS:
--   KEYS[1] processes: zset, process id -> heartbeat deadline (server ms)
-- ARGV:
--   ARGV[1] process id
--   ARGV[2] how long the heartbeat lasts (ms)
--   ARGV[3] "1": the process is leaving (remove it), else "0"
-- Returns:
--   {live processes}

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', now))
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], string.format('%d', now + ttl), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], 2 * ttl)
end
return {redis.call('ZCARD', KEYS[1])}
