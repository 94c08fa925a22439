-- queue_producer.lua DURATION_MS LABEL: pushes LABEL-1, LABEL-2, ... to the
-- reliable queue "faults" until the deadline.
-- PUSHED msg at_ms     push returned an id: the message is acknowledged
-- ERR at_ms elapsed_ms error
local c = dofile("testdata/common.lua")
local dur, label = tonumber(arg[1]), arg[2]
local q = shield.reliable_queue("faults", { visibility_timeout = 3000, retry_delay = 500, max_retries = 100 })
local deadline = shield.now_ms() + dur
local i = 0
while shield.now_ms() < deadline do
  i = i + 1
  local msg = label .. "-" .. i
  local t0 = shield.now_ms()
  local ok, id = pcall(q.push, q, msg)
  local t1 = shield.now_ms()
  if ok and id then c.emit("PUSHED", msg, t1) else c.emit("ERR", t1, t1 - t0, c.clean(id)); shield.sleep(50) end
  shield.sleep(5)
end
c.emit("DONE")
