-- stream_pop.lua: deliver up to count messages of a reliable queue or a
-- broadcast group to one consumer: first retries that are due, then
-- deliveries whose visibility timeout passed (reclaimed from any consumer),
-- then new entries. A message that would exceed max deliveries goes to the
-- dead letters instead; a new entry past the message ttl is dropped
-- (counted); an entry requeued for another group (field g) is skipped.
--
-- KEYS[1] stream     entries: d = body [, g = the only group it is for]
-- KEYS[2] meta       hash: cursor:<group>, reclaim_at:<group>, counters
-- KEYS[3] waiting    flag
-- KEYS[4] retry      zset id -> retry time ms (the group's nacked entries)
-- KEYS[5] consumers  zset consumer -> last seen ms
-- KEYS[6] dead       dead-letter stream
-- ARGV[1] kind: 'reliable' or 'broadcast'
-- ARGV[2] group
-- ARGV[3] consumer
-- ARGV[4] count (>= 1)
-- ARGV[5] visibility timeout ms
-- ARGV[6] message ttl ms (0: none)
-- ARGV[7] max deliveries (1 + max_retries)
-- ARGV[8] dead letters enabled: '1' or '0'
-- ARGV[9] dead-letter max length
-- ARGV[10] dead-letter ttl ms (0: none)
-- ARGV[11] waiting-flag ttl ms (> 0: the caller waits)
-- ARGV[12] reclaim gate ms: a full visibility scan of the group runs at most this often
-- ARGV[13] the consumer that holds parked (nacked) entries
-- ARGV[14] '1' to record the consumer as seen (callers do it about once a second)
-- Returns {now_ms, hint, id, body, deliveries, ...}; hint: the time (ms) of
-- the group's next retry, 0 = more may be deliverable now, -1 = none known.
-- A broadcast group that does not exist is created at the end of the stream.
local now = now_ms()
local stream, meta, flag, retry, consumers = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local reliable = ARGV[1] == 'reliable'
local group, consumer = ARGV[2], ARGV[3]
local count, vis, ttl, maxdel = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local c = {stream = stream, meta = meta, dead = KEYS[6], group = group, reliable = reliable,
  enabled = ARGV[8] == '1', maxlen = tonumber(ARGV[9]), ttl = tonumber(ARGV[10]), now = now}
local flagttl, gate, parked = tonumber(ARGV[11]), tonumber(ARGV[12]), ARGV[13]

local out = {now, -1}
local taken = 0
if ARGV[14] == '1' then seen(consumers, consumer, now) end

local function finish()
  if taken == 0 and out[2] ~= 0 then waiting(flag, flagttl) end
  return out
end

if redis.call('EXISTS', stream) == 0 then
  if not reliable then
    redis.call('XGROUP', 'CREATE', stream, group, '$', 'MKSTREAM')
  end
  return finish()
end
local made = redis.pcall('XGROUP', 'CREATECONSUMER', stream, group, consumer)
if type(made) == 'table' and made.err then
  redis.call('XGROUP', 'CREATE', stream, group, reliable and '0' or '$')
  redis.call('XGROUP', 'CREATECONSUMER', stream, group, consumer)
end

-- claim_one delivers pending entry id to this consumer (or dead-letters it).
local function claim_one(id, reclaimed)
  local owner, cnt = pending_of(stream, group, id)
  if not owner then return end
  if cnt + 1 > maxdel then
    local e = redis.call('XRANGE', stream, id, id)
    if #e > 0 then
      dead_letter(c, id, field(e[1][2], 'd') or '', cnt)
    else
      redis.call('XACK', stream, group, id)
    end
    return
  end
  local got = redis.call('XCLAIM', stream, group, consumer, 0, id)
  if #got == 0 or type(got[1]) ~= 'table' then return end -- deleted: dropped from the pending list
  if reclaimed then redis.call('HINCRBY', meta, 'reclaimed:' .. group, 1) end
  taken = taken + 1
  out[#out + 1] = id
  out[#out + 1] = field(got[1][2], 'd') or ''
  out[#out + 1] = cnt + 1
end

-- 1. due retries
for _, id in ipairs(redis.call('ZRANGEBYSCORE', retry, '-inf', now, 'LIMIT', 0, count)) do
  redis.call('ZREM', retry, id)
  claim_one(id, false)
end

-- 2. deliveries past their visibility timeout
if taken < count then
  local at = tonumber(redis.call('HGET', meta, 'reclaim_at:' .. group) or '0')
  if now >= at then
    local cursor = redis.call('HGET', meta, 'cursor:' .. group) or '0-0'
    local r = redis.call('XAUTOCLAIM', stream, group, consumer, vis, cursor, 'COUNT', count - taken, 'JUSTID')
    for _, id in ipairs(r[2]) do
      local due = redis.call('ZSCORE', retry, id)
      if due and tonumber(due) > now then
        redis.call('XCLAIM', stream, group, parked, 0, id, 'JUSTID') -- still parked
      else
        if due then redis.call('ZREM', retry, id) end
        claim_one(id, not due)
      end
    end
    redis.call('HSET', meta, 'cursor:' .. group, r[1])
    if r[1] == '0-0' then
      redis.call('HSET', meta, 'reclaim_at:' .. group, ms(now + gate))
    end
  end
end

-- 3. new entries
local expired = 0
local budget = 1000
while taken < count and budget > 0 do
  local r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count - taken, 'STREAMS', stream, '>')
  if not r or #r[1][2] == 0 then break end
  for _, e in ipairs(r[1][2]) do
    local id, fields = e[1], e[2]
    local target = field(fields, 'g')
    if target and target ~= group then
      redis.call('XACK', stream, group, id)
      budget = budget - 1
    elseif ttl > 0 and now - id_ms(id) > ttl then
      expired = expired + 1
      redis.call('XACK', stream, group, id)
      if reliable then redis.call('XDEL', stream, id) end
      budget = budget - 1
    else
      taken = taken + 1
      out[#out + 1] = id
      out[#out + 1] = field(fields, 'd') or ''
      out[#out + 1] = 1
    end
  end
end
if expired > 0 then redis.call('HINCRBY', meta, 'expired:' .. group, expired) end
if budget <= 0 and taken < count then
  out[2] = 0
else
  local first = redis.call('ZRANGE', retry, 0, 0, 'WITHSCORES')
  if #first > 0 then out[2] = tonumber(first[2]) end
end
return finish()
