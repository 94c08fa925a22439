-- stats.lua: the ops facts of a plain, delay or priority queue.
--
-- KEYS[1] the queue (list or zset)
-- KEYS[2] meta       hash: expired counter
-- KEYS[3] consumers  zset consumer -> last seen ms
-- ARGV[1] kind: 'plain', 'delay' or 'priority'
-- ARGV[2] consumer liveness ms
-- Returns {length, pending, consumers, expired}; pending counts messages not
-- yet due (delay only).
local now = now_ms()
local len, pending = 0, 0
if ARGV[1] == 'plain' then
  len = redis.call('LLEN', KEYS[1])
else
  len = redis.call('ZCARD', KEYS[1])
  if ARGV[1] == 'delay' then
    pending = redis.call('ZCOUNT', KEYS[1], '(' .. ms(now), '+inf')
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ms(now - tonumber(ARGV[2])))
local consumers = redis.call('ZCARD', KEYS[3])
local expired = tonumber(redis.call('HGET', KEYS[2], 'expired') or '0')
return {len, pending, consumers, expired}
