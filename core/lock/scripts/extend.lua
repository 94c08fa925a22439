-- extend.lua: reset the lease of an owner's hold to ttl from now, only while it holds that hold.
--
-- KEYS (all share the hash tag {name}; the layout is described in acquire.lua):
--   KEYS[1] lock  KEYS[2] readers  KEYS[3] deadlines  KEYS[4] queue  KEYS[5] waiters  KEYS[6] token  KEYS[7] writers
-- ARGV:
--   ARGV[1] owner
--   ARGV[2] mode: "x" exclusive, "s" shared
--   ARGV[3] lease ttl (ms, >= 1)
--   ARGV[4] the hold's fencing token: a hold of owner with another token is not this one
-- Returns:
--   {1}   extended
--   {-1}  owner does not hold that hold in that mode (never did, released, expired, or another token)

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner = ARGV[1]
local ttl = tonumber(ARGV[3])

local function ms(x) return string.format('%d', x) end

if ARGV[2] == 'x' then
  local h = redis.call('HMGET', KEYS[1], 'owner', 'token')
  if h[1] ~= owner or h[2] ~= ARGV[4] then return {-1} end
  redis.call('PEXPIRE', KEYS[1], ms(ttl))
  return {1}
end

local deadline = redis.call('ZSCORE', KEYS[3], owner)
if deadline == false or tonumber(deadline) < now then return {-1} end
local r = redis.call('HGET', KEYS[2], owner)
if not r or string.match(r, '^%d+:(%d+):') ~= ARGV[4] then return {-1} end
redis.call('ZADD', KEYS[3], ms(now + ttl), owner)
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[3], ms(tonumber(last[2]) + 1))
redis.call('PEXPIREAT', KEYS[2], ms(tonumber(last[2]) + 1))
return {1}
