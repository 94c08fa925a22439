-- lock_counter.lua DURATION_MS TTL_MS: takes distributed_mutex "faults"
-- again and again and, while holding it, increments the counter key
-- "locked_counter" with a get and a set (a lost update shows as a counter
-- below the number of protected increments).
-- HOLD token acquired_ms before_release_ms counter_read wrote release why
--     one hold: `release` is what release() returned (true: the task held
--     the lock the whole time), `why` its reason
-- WAIT at_ms elapsed_ms why     acquire gave up ("timeout")
-- ERR at_ms elapsed_ms error    acquire raised (Redis unreachable)
local c = dofile("testdata/common.lua")
local dur, ttl = tonumber(arg[1]), tonumber(arg[2] or 3000)
local g = shield.global()
local l = shield.distributed_mutex("faults", { ttl = ttl })
local deadline = shield.now_ms() + dur
while shield.now_ms() < deadline do
  local t0 = shield.now_ms()
  local ok, got, why = pcall(l.acquire, l, 2000)
  local t1 = shield.now_ms()
  if not ok then
    c.emit("ERR", t1, t1 - t0, c.clean(got)); shield.sleep(50)
  elseif not got then
    c.emit("WAIT", t1, t1 - t0, why)
  else
    local token = l:token()
    local wrote, n = false, -1
    local okg, v = pcall(g.get, g, "locked_counter")
    if okg then
      n = v or 0
      wrote = pcall(g.set, g, "locked_counter", n + 1)
    end
    local t2 = shield.now_ms()
    local okr, rel, rwhy = pcall(l.release, l)
    if not okr then rel, rwhy = "error", c.clean(rel) end
    c.emit("HOLD", token, t1, t2, n, wrote, rel, rwhy)
    shield.sleep(2) -- let the other processes in
  end
end
c.emit("DONE")
