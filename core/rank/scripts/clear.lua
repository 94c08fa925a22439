-- clear.lua: delete every member; the meta hash (version, seq) stays.
--
-- KEYS[1..3], ARGV[1]  see lib.lua
-- Returns  {members removed, version}
load_meta()       -- any policy may clear
meta_ties = ties  -- and the policy field is left as it is
local n = redis.call('ZCARD', zkey)
if n > 0 then redis.call('DEL', zkey, hkey) end
return {n, finish(n > 0)}
