-- list_pop.lua: take up to count messages from a plain queue, oldest first,
-- dropping those past the message ttl.
--
-- KEYS[1] list
-- KEYS[2] meta       hash: expired counter
-- KEYS[3] waiting    flag
-- KEYS[4] consumers  zset consumer -> last seen ms
-- ARGV[1] count (>= 1)
-- ARGV[2] message ttl ms (0: none)
-- ARGV[3] waiting-flag ttl ms: > 0 when the caller waits, so a push wakes it
-- ARGV[4] consumer ('' = not recorded; callers send it about once a second)
-- Returns {now_ms, hint, element...}: elements are "<enqueued_ms>:<body>";
-- hint 0 = more may be due now (the expiry budget ran out), -1 = nothing known.
local now = now_ms()
local count = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local out = {now, -1}
local expired = 0
local budget = 1000
while #out - 2 < count do
  local v = redis.call('RPOP', KEYS[1])
  if not v then break end
  local ts = tonumber(string.match(v, '^(%d+):'))
  if ttl > 0 and ts and now - ts > ttl then
    expired = expired + 1
    budget = budget - 1
    if budget == 0 then
      out[2] = 0
      break
    end
  else
    out[#out + 1] = v
  end
end
if expired > 0 then redis.call('HINCRBY', KEYS[2], 'expired', expired) end
seen(KEYS[4], ARGV[4], now)
if #out == 2 and out[2] ~= 0 then waiting(KEYS[3], tonumber(ARGV[3])) end
return out
