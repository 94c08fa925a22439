-- byscore.lua: the members with min <= score <= max, highest first.
--
-- KEYS[1..3], ARGV[1]  see lib.lua
-- ARGV[2]  min ('-inf' allowed)
-- ARGV[3]  max ('+inf' allowed)
-- ARGV[4]  the most entries to return
-- Returns  {first (0-based rank of the first entry, 0 when none),
--          {member, score, member, score, ...}}
local list = redis.call('ZREVRANGEBYSCORE', zkey, ARGV[3], ARGV[2], 'WITHSCORES', 'LIMIT', 0, ARGV[4])
if #list == 0 then return {0, list} end
return {redis.call('ZREVRANK', zkey, list[1]), list}
