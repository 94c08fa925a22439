-- swap.lua: exchange the places of two members: a takes b's score and b
-- takes a's. Under 'reach' they exchange their reach prefixes too, so each
-- lands exactly at the other's rank and nobody else moves. Never inserts.
--
-- KEYS[1..3], ARGV[1]  see lib.lua
-- ARGV[2]  uid a
-- ARGV[3]  uid b (not a)
-- ARGV[4]  '1' to apply only if the scores are still ARGV[5] and ARGV[6]
-- ARGV[5]  expected score of a
-- ARGV[6]  expected score of b
-- Returns  {1, new score of a, new score of b, changed 0|1, version},
--          {-1} when a or b is not on the board, {-2} when a score is not
--          the expected one, or the error RANKTIES.
local conflict = load_meta()
if conflict then return conflict end
local a, b = ARGV[2], ARGV[3]
local ma, mb = a, b
if reach then
	local m = redis.call('HMGET', hkey, a, b)
	ma, mb = m[1], m[2]
	if not ma or not mb then return {-1} end
end
local s = redis.call('ZMSCORE', zkey, ma, mb)
local sa, sb = s[1], s[2]
if not sa or not sb then return {-1} end
if ARGV[4] == '1' and (tonumber(sa) ~= tonumber(ARGV[5]) or tonumber(sb) ~= tonumber(ARGV[6])) then
	return {-2}
end
local changed = true
if reach then
	local na, nb = string.sub(mb, 1, 15) .. a, string.sub(ma, 1, 15) .. b
	redis.call('ZREM', zkey, ma, mb)
	redis.call('ZADD', zkey, sb, na, sa, nb)
	redis.call('HSET', hkey, a, na, b, nb)
elseif tonumber(sa) == tonumber(sb) then
	changed = false
else
	redis.call('ZADD', zkey, 'XX', sb, a, sa, b)
end
return {1, fmtnum(tonumber(sb)), fmtnum(tonumber(sa)), b2i(changed), finish(changed)}
