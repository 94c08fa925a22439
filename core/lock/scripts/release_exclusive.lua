-- release_exclusive.lua: give up one level of an owner's exclusive hold (or
-- all of them); at 0 delete it and PUBLISH a wake-up.
--
-- KEYS:
--   KEYS[1] lock  hash  owner, count, token, acquired_at (see acquire.lua)
-- ARGV:
--   ARGV[1] owner
--   ARGV[2] wake-up channel
--   ARGV[3] all: "1" gives up every level at once (the owner's task ended), "0" one level
-- Returns:
--   {1, remaining}  released one level; remaining re-entry count (0: the hold is gone)
--   {-1}            owner does not hold the lock exclusively (never did, released, or expired)

local owner = ARGV[1]
local all = ARGV[3] == '1'
local h = redis.call('HMGET', KEYS[1], 'owner', 'count')
if h[1] ~= owner then return {-1} end
if not all and h[2] ~= '1' then
  local count = redis.call('HINCRBY', KEYS[1], 'count', -1)
  if count > 0 then return {1, count} end
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'released')
return {1, 0}
