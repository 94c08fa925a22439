-- update.lua: set a member's score, or only raise ('max') or only lower
-- ('min') it; a uid not on the board is inserted (admitted under max).
--
-- KEYS[1..3], ARGV[1]  see lib.lua
-- ARGV[2]  max members (0: unlimited)
-- ARGV[3]  mode: 'set' | 'max' | 'min'
-- ARGV[4]  uid
-- ARGV[5]  score (finite)
-- Returns  {changed 0|1, ranked 0|1, score, existed 0|1, previous, version}
--          (scores as exact decimal text), or the error RANKTIES.
local conflict = load_meta()
if conflict then return conflict end
local changed, ranked, score, existed, prev = update(ARGV[4], tonumber(ARGV[5]), ARGV[3], tonumber(ARGV[2]))
local version = finish(changed)
return {b2i(changed), b2i(ranked), fmtnum(score), b2i(existed), fmtnum(prev), version}
