-- purge.lua: drop every message of a queue.
--
-- KEYS[1] the queue (list, zset or stream)
-- KEYS[2..] other keys to delete with it (a reliable queue's retry set)
-- Returns how many messages there were.
local t = redis.call('TYPE', KEYS[1]).ok
local n = 0
if t == 'list' then
  n = redis.call('LLEN', KEYS[1])
elseif t == 'zset' then
  n = redis.call('ZCARD', KEYS[1])
elseif t == 'stream' then
  n = redis.call('XLEN', KEYS[1])
end
redis.call('DEL', unpack(KEYS))
return n
