-- kv_incr.lua DURATION_MS KEY: increments KEY until the deadline.
-- ACK value at_ms elapsed_ms    an acknowledged incr and the value it returned
-- ERR at_ms elapsed_ms error    a failed call (not acknowledged)
local c = dofile("testdata/common.lua")
local dur, key = tonumber(arg[1]), arg[2]
local g = shield.global()
local deadline = shield.now_ms() + dur
while shield.now_ms() < deadline do
  local t0 = shield.now_ms()
  local ok, v = pcall(g.incr, g, key, 1)
  local t1 = shield.now_ms()
  if ok then c.emit("ACK", v, t1, t1 - t0) else c.emit("ERR", t1, t1 - t0, c.clean(v)); shield.sleep(50) end
  shield.sleep(2) -- paced: the machine is shared
end
c.emit("DONE")
