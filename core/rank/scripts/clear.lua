-- clear.lua: delete every member; the meta hash (version, seq) stays.
--
-- KEYS[1..3], ARGV[1]  see lib.lua
-- Returns  {members removed, version}
local n = redis.call('ZCARD', zkey)
if n > 0 then redis.call('DEL', zkey, hkey) end
ties_seen = ties -- the policy field is left as it is
return {n, finish(n > 0)}
