-- window_allow.lua: admit n requests into a sliding window if they fit.
--
-- The window is a sorted set of the requests it holds: member = score = the
-- server time of the request in microseconds, made strictly increasing per
-- key (a request in the same microsecond as the last one is stamped one
-- microsecond later), so members are unique and never more than max
-- requests have a stamp inside any window of length W.
--
-- KEYS:
--   KEYS[1] the window of the key (zset)
-- ARGV:
--   ARGV[1] W, the window length (microseconds, >= 1000)
--   ARGV[2] max, the most requests any window holds (>= 1)
--   ARGV[3] n, the requests to admit together (>= 1)
-- Returns:
--   {1, remaining, 0}          admitted; remaining = what the window still accepts
--   {0, remaining, retry_us}   refused; retry_us = when enough requests will
--                              have left the window for n to fit, or -1 if
--                              n > max (never)

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local W, max, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local key = KEYS[1]

redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - W))
local count = redis.call('ZCARD', key)
if count + n > max then
  local retry = -1
  if n <= max then
    -- the (count + n - max)-th oldest request must leave first
    local e = redis.call('ZRANGE', key, count + n - max - 1, count + n - max - 1, 'WITHSCORES')
    retry = math.max(1, tonumber(e[2]) + W - now)
  end
  return {0, math.max(0, max - count), retry}
end

local start = now
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if last[2] ~= nil and tonumber(last[2]) >= start then start = tonumber(last[2]) + 1 end
local args = {}
for i = 0, n - 1 do
  local s = string.format('%d', start + i)
  args[#args + 1] = s
  args[#args + 1] = s
  if #args >= 1000 or i == n - 1 then
    redis.call('ZADD', key, unpack(args))
    args = {}
  end
end
-- The key goes when its newest request leaves the window.
redis.call('PEXPIREAT', key, math.floor((start + n - 1 + W) / 1000) + 1)
return {1, max - count - n, 0}
