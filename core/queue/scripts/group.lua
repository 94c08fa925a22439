-- group.lua: create (join) or remove a broadcast group.
--
-- KEYS[1] stream
-- KEYS[2] retry      zset of the group
-- KEYS[3] consumers  zset of the group
-- ARGV[1] 'join' or 'remove'
-- ARGV[2] group
-- Returns 1 when the group was created (join) or existed (remove), else 0.
if ARGV[1] == 'join' then
  local r = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[2], '$', 'MKSTREAM')
  if type(r) == 'table' and r.err then return 0 end
  return 1
end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local n = redis.call('XGROUP', 'DESTROY', KEYS[1], ARGV[2])
redis.call('DEL', KEYS[2], KEYS[3])
return n
