-- incr.lua: add to a member's score (a uid not on the board starts at 0).
--
-- KEYS[1..3], ARGV[1]  see lib.lua
-- ARGV[2]  max members (0: unlimited)
-- ARGV[3]  uid
-- ARGV[4]  delta (finite)
-- Returns  {changed 0|1, ranked 0|1, score, existed 0|1, previous, version}
--          like update.lua, or the errors RANKTIES and RANKOVERFLOW (the
--          sum is infinite; nothing changed).
local conflict = load_meta()
if conflict then return conflict end
local uid, delta = ARGV[3], tonumber(ARGV[4])
local old, prev = member_of(uid), 0
if old then prev = tonumber(redis.call('ZSCORE', zkey, old)) end
local score = prev + delta
if score == math.huge or score == -math.huge then
	return redis.error_reply('RANKOVERFLOW ' .. fmtnum(prev) .. ' + ' .. fmtnum(delta) .. ' is not finite')
end
if score == 0 then score = 0 end -- no -0
local changed, ranked, s, existed, p = update(uid, score, 'set', tonumber(ARGV[2]))
local version = finish(changed)
return {b2i(changed), b2i(ranked), fmtnum(s), b2i(existed), fmtnum(p), version}
