-- mupdate.lua: set many scores at once, in the order given (the caller
-- sorts uids by bytes), as one change of the board.
--
-- KEYS[1..3], ARGV[1]  see lib.lua
-- ARGV[2]  max members (0: unlimited)
-- ARGV[3], ARGV[4], ...  uid, score pairs
-- Returns  {members changed, version}, or the error RANKTIES.
local conflict = load_meta()
if conflict then return conflict end
local max, n = tonumber(ARGV[2]), 0
for i = 3, #ARGV, 2 do
	if update(ARGV[i], tonumber(ARGV[i + 1]), 'set', max) then n = n + 1 end
end
return {n, finish(n > 0)}
