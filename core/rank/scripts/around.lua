-- around.lua: a member and up to n members on each side.
--
-- KEYS[1..3], ARGV[1]  see lib.lua
-- ARGV[2]  uid
-- ARGV[3]  n (> 0)
-- Returns  {first (0-based rank of the first entry), target (0-based rank),
--          {member, score, member, score, ...}} or {} when uid is absent.
board_policy()
local m = member_of(ARGV[2])
if not m then return {} end
local n = tonumber(ARGV[3])
local r = redis.call('ZREVRANK', zkey, m)
local first = math.max(0, r - n)
return {first, r, redis.call('ZREVRANGE', zkey, first, r + n, 'WITHSCORES')}
