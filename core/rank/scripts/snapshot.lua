-- snapshot.lua: a range of ranks with the member count and the version,
-- read in one step.
--
-- KEYS[1..3], ARGV[1]  see lib.lua
-- ARGV[2]  start (0-based)
-- ARGV[3]  stop (0-based, inclusive)
-- Returns  {version, count, {member, score, member, score, ...}}
local version = tonumber(redis.call('HGET', mkey, 'version') or '0')
return {version, redis.call('ZCARD', zkey), redis.call('ZREVRANGE', zkey, ARGV[2], ARGV[3], 'WITHSCORES')}
