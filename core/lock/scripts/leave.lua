-- leave.lua: a waiter gives up: it leaves the fair queue and drops its writer intent.
--
-- KEYS (all share the hash tag {name}; the layout is described in acquire.lua):
--   KEYS[1] lock  KEYS[2] readers  KEYS[3] deadlines  KEYS[4] queue  KEYS[5] waiters  KEYS[6] token  KEYS[7] writers
-- ARGV:
--   ARGV[1] owner
--   ARGV[2] wake-up channel
-- Returns:
--   1  owner was queued (or a waiting writer) and has left
--   0  owner was neither
-- A wake-up is PUBLISHed while the lock is not held exclusively: "queue" when owner was the
-- head and another waiter becomes the head, so the new head retries at once; "writer" when
-- owner was the last live waiting writer, so the readers it held back retry at once.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner = ARGV[1]

local function ms(x) return string.format('%d', x) end

local left = 0
if redis.call('ZREM', KEYS[7], owner) == 1 then
  left = 1
  if redis.call('ZCOUNT', KEYS[7], ms(now), '+inf') == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('PUBLISH', ARGV[2], 'writer')
  end
end

local h = redis.call('ZRANGE', KEYS[4], 0, 0)
if redis.call('ZREM', KEYS[4], owner) == 0 then
  redis.call('ZREM', KEYS[5], owner)
  return left
end
redis.call('ZREM', KEYS[5], owner)
if h[1] == owner then
  local n = redis.call('ZRANGE', KEYS[4], 0, 0)
  if n[1] and redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('PUBLISH', ARGV[2], 'queue')
  end
end
return 1
