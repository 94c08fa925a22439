-- release_shared.lua: give up levels of an owner's shared hold, down to the count the owner
-- keeps; at 0 delete it and, when that frees the lock for others, PUBLISH a wake-up.
-- An exclusive hold is released by release_exclusive.lua (one key, fewer
-- arguments: the common case, kept cheap).
--
-- KEYS (all share the hash tag {name}; the layout is described in acquire.lua):
--   KEYS[1] lock  KEYS[2] readers  KEYS[3] deadlines  KEYS[4] queue  KEYS[5] waiters  KEYS[6] token  KEYS[7] writers
-- ARGV:
--   ARGV[1] owner
--   ARGV[2] wake-up channel
--   ARGV[3] keep: the re-entry count the owner still holds afterwards ("0": the hold ends; see
--           release_exclusive.lua)
--   ARGV[4] the hold's fencing token: a shared hold of owner with another token is not this one
-- Returns:
--   {1}   released (down to keep)
--   {-1}  owner holds no shared hold with that token (never did, released, expired, or another token)
-- A wake-up ("released") is PUBLISHed when the last shared hold ends.

local owner = ARGV[1]
local keep = ARGV[3]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function ms(x) return string.format('%d', x) end

local r = redis.call('HGET', KEYS[2], owner)
if not r then return {-1} end
local tk, at, svc = string.match(r, '^%d+:(%d+):(%d+):?(.*)$')
if tk ~= ARGV[4] then return {-1} end
local deadline = tonumber(redis.call('ZSCORE', KEYS[3], owner))
if deadline == nil or deadline < now then
  -- The lease ended (nobody purged it yet): it is not held.
  redis.call('HDEL', KEYS[2], owner)
  redis.call('ZREM', KEYS[3], owner)
  return {-1}
end
if keep ~= '0' then
  redis.call('HSET', KEYS[2], owner, keep .. ':' .. tk .. ':' .. at .. ':' .. svc)
  return {1}
end
redis.call('HDEL', KEYS[2], owner)
redis.call('ZREM', KEYS[3], owner)
-- Other shared holds whose lease ended do not count: purge them.
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ms(now))
for i = 1, #dead, 1000 do
  local j = math.min(i + 999, #dead)
  redis.call('ZREM', KEYS[3], unpack(dead, i, j))
  redis.call('HDEL', KEYS[2], unpack(dead, i, j))
end
if redis.call('ZCARD', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('PUBLISH', ARGV[2], 'released')
end
return {1}
