-- window_remaining.lua: how many requests a sliding window accepts now.
--
-- KEYS:
--   KEYS[1] the window of the key (zset; see window_allow.lua)
-- ARGV:
--   ARGV[1] W, the window length (microseconds)
--   ARGV[2] max, the most requests any window holds
-- Returns:
--   {remaining}

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local W, max = tonumber(ARGV[1]), tonumber(ARGV[2])
local count = redis.call('ZCOUNT', KEYS[1], string.format('(%d', now - W), '+inf')
return {math.max(0, max - count)}
