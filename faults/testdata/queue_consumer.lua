-- queue_consumer.lua DURATION_MS POP_TIMEOUT_MS [IDLE_EXIT_MS]: pops from
-- the reliable queue "faults" with pop(POP_TIMEOUT_MS) and acks, until the
-- deadline, or (with IDLE_EXIT_MS) once nothing came for that long.
-- POP elapsed_ms timeout_ms result [msg]  every pop: how long it took (and the message)
-- ACKED msg at_ms                    ack() returned true
-- NACKED msg why                     ack() returned nil, why ("not_held": acknowledged already,
--                                    e.g. by an ack whose reply a reset connection lost)
-- ACKERR msg error                   ack() raised: it may or may not have been applied
-- ERR at_ms elapsed_ms error
local c = dofile("testdata/common.lua")
local dur, timeout, idle = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3] or 0)
local q = shield.reliable_queue("faults", { visibility_timeout = 3000, retry_delay = 500, max_retries = 100 })
local deadline = shield.now_ms() + dur
local last = shield.now_ms()
while shield.now_ms() < deadline and (idle == 0 or shield.now_ms() - last < idle) do
  local t0 = shield.now_ms()
  local ok, msg, h = pcall(q.pop, q, timeout)
  local t1 = shield.now_ms()
  if not ok then
    c.emit("POP", t1 - t0, timeout, "error")
    c.emit("ERR", t1, t1 - t0, c.clean(msg)); shield.sleep(50)
  elseif msg == nil then
    c.emit("POP", t1 - t0, timeout, "empty")
  else
    c.emit("POP", t1 - t0, timeout, "msg", msg)
    last = t1
    local oka, acked, why = pcall(h.ack, h)
    if not oka then c.emit("ACKERR", msg, c.clean(acked))
    elseif acked then c.emit("ACKED", msg, shield.now_ms())
    else c.emit("NACKED", msg, why) end
  end
end
c.emit("DONE")
