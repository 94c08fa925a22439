-- leave.lua: a fair waiter gives up its place in the queue.
--
-- KEYS (all share the hash tag {name}; the layout is described in acquire.lua):
--   KEYS[1] lock  KEYS[2] readers  KEYS[3] deadlines  KEYS[4] queue  KEYS[5] waiters  KEYS[6] token
-- ARGV:
--   ARGV[1] owner
--   ARGV[2] wake-up channel
-- Returns:
--   1  owner was queued and has left
--   0  owner was not queued
-- When owner was the head and another waiter becomes the head while the lock is not held
-- exclusively, a wake-up ("queue") is PUBLISHed so the new head retries at once.

local owner = ARGV[1]
local h = redis.call('ZRANGE', KEYS[4], 0, 0)
if redis.call('ZREM', KEYS[4], owner) == 0 then
  redis.call('ZREM', KEYS[5], owner)
  return 0
end
redis.call('ZREM', KEYS[5], owner)
if h[1] == owner then
  local n = redis.call('ZRANGE', KEYS[4], 0, 0)
  if n[1] and redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('PUBLISH', ARGV[2], 'queue')
  end
end
return 1
