-- zset_unpop.lua: put popped delay or priority messages back unchanged
-- (same score and member, so the same place in the order).
--
-- KEYS[1] zset
-- KEYS[2] waiting  flag
-- ARGV[1] notify channel
-- ARGV[2..] score, member pairs as zset_pop returned them
-- Returns the queue length.
for i = 2, #ARGV, 2 do
  redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1])
end
wake(KEYS[2], ARGV[1], '')
return redis.call('ZCARD', KEYS[1])
