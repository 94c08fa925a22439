-- remove.lua: delete a member.
--
-- KEYS[1..3], ARGV[1]  see lib.lua
-- ARGV[2]  uid
-- Returns  {removed 0|1, version}, or the error RANKTIES.
local conflict = load_meta()
if conflict then return conflict end
local m = member_of(ARGV[2])
if m then
	redis.call('ZREM', zkey, m)
	if reach then redis.call('HDEL', hkey, ARGV[2]) end
end
return {b2i(m), finish(m ~= nil)}
