-- zset_pop.lua: take up to count messages from a delay queue (due ones,
-- oldest due first) or a priority queue (smallest score first), dropping
-- those past the message ttl (delay: counted from the due time).
--
-- KEYS[1] zset
-- KEYS[2] meta       hash: expired counter
-- KEYS[3] waiting    flag
-- KEYS[4] consumers  zset
-- ARGV[1] kind: 'delay' or 'priority'
-- ARGV[2] count (>= 1)
-- ARGV[3] message ttl ms (0: none)
-- ARGV[4] waiting-flag ttl ms (> 0: the caller waits)
-- ARGV[5] consumer ('' = not recorded; callers send it about once a second)
-- Returns {now_ms, hint, member, score, member, score, ...}; hint: the due
-- time (ms) of the next message not yet due (delay), 0 = more may be due now,
-- -1 = none known.
local now = now_ms()
local delay = ARGV[1] == 'delay'
local count = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local out = {now, -1}
local expired = 0
local budget = 1000
local taken = 0
while taken < count and budget > 0 do
  local got
  if delay then
    got = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, count - taken)
    for i = 1, #got, 2 do redis.call('ZREM', KEYS[1], got[i]) end
  else
    got = redis.call('ZPOPMIN', KEYS[1], count - taken)
  end
  if #got == 0 then break end
  for i = 1, #got, 2 do
    local m, s = got[i], got[i + 1]
    local from = delay and tonumber(s) or tonumber(string.match(m, '^%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x(%d+):'))
    if ttl > 0 and from and now - from > ttl then
      expired = expired + 1
      budget = budget - 1
    else
      out[#out + 1] = m
      out[#out + 1] = s
      taken = taken + 1
    end
  end
end
if expired > 0 then redis.call('HINCRBY', KEYS[2], 'expired', expired) end
if budget <= 0 and taken < count then
  out[2] = 0
elseif delay then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if #first > 0 then out[2] = tonumber(first[2]) end
end
seen(KEYS[4], ARGV[5], now)
if taken == 0 and out[2] ~= 0 then waiting(KEYS[3], tonumber(ARGV[4])) end
return out
