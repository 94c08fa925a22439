-- lookup.lua: a member's rank and score.
--
-- KEYS[1..3], ARGV[1]  see lib.lua
-- ARGV[2]  uid
-- Returns  {rank (0-based), score} or {} when uid is not on the board.
board_policy()
local m = member_of(ARGV[2])
if not m then return {} end
return {redis.call('ZREVRANK', zkey, m), redis.call('ZSCORE', zkey, m)}
