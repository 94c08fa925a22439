-- rank_incr.lua DURATION_MS MEMBER: adds 1 to MEMBER's score on board
-- "faults" until the deadline.
-- ACK score at_ms elapsed_ms    an acknowledged incr and the score it returned
-- ERR at_ms elapsed_ms error
local c = dofile("testdata/common.lua")
local dur, member = tonumber(arg[1]), arg[2]
local r = shield.rank("faults")
local deadline = shield.now_ms() + dur
while shield.now_ms() < deadline do
  local t0 = shield.now_ms()
  local ok, score = pcall(r.incr, r, member, 1)
  local t1 = shield.now_ms()
  if ok and score then c.emit("ACK", score, t1, t1 - t0) else c.emit("ERR", t1, t1 - t0, c.clean(score)); shield.sleep(50) end
  shield.sleep(2) -- paced: the machine is shared
end
c.emit("DONE")
