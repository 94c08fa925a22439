-- release_exclusive.lua: give up levels of an owner's exclusive hold, down to the count the
-- owner keeps; at 0 delete it and PUBLISH a wake-up.
--
-- KEYS:
--   KEYS[1] lock  hash  owner, count, token, acquired_at (see acquire.lua)
-- ARGV:
--   ARGV[1] owner
--   ARGV[2] wake-up channel
--   ARGV[3] keep: the re-entry count the owner still holds afterwards ("0": the hold ends). The owner
--           counts its levels: a count the hash got wrong (a re-entry that ran after its acquire gave
--           up, a failover) cannot keep the lock held after the owner's last release.
--   ARGV[4] the hold's fencing token: a hold of owner with another token is not this one
-- Returns:
--   {1}   released (down to keep)
--   {-1}  owner does not hold that hold exclusively (never did, released, expired, or another token)

local h = redis.call('HMGET', KEYS[1], 'owner', 'token')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[4] then return {-1} end
if ARGV[3] ~= '0' then
  redis.call('HSET', KEYS[1], 'count', ARGV[3])
  return {1}
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'released')
return {1}
