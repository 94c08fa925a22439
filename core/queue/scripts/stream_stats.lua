-- stream_stats.lua: the ops facts of a reliable queue or of a broadcast
-- queue and its groups. The per-group retry and consumers keys are derived
-- from the prefixes given (they share the queue's hash tag).
--
-- KEYS[1] stream
-- KEYS[2] meta  hash: counters
-- KEYS[3] dead  dead-letter stream
-- ARGV[1] kind: 'reliable' or 'broadcast'
-- ARGV[2] retry key prefix (+ group)
-- ARGV[3] consumers key prefix (+ group)
-- ARGV[4] consumer liveness ms
-- ARGV[5] only this group ('' = every group)
-- Returns {length, dead letters, trimmed, dead dropped, groups, then per
-- group: name, pending, retrying, ready, consumers, expired, reclaimed,
-- nacked, dead-lettered}.
local now = now_ms()
local stream, meta = KEYS[1], KEYS[2]
local exists = redis.call('EXISTS', stream) == 1
local len = 0
if exists then len = redis.call('XLEN', stream) end
local out = {len, redis.call('XLEN', KEYS[3]),
  tonumber(redis.call('HGET', meta, 'trimmed') or '0'),
  tonumber(redis.call('HGET', meta, 'dead_dropped') or '0'), 0}
local groups = {}
if exists then groups = groups_of(stream) end
for _, g in ipairs(groups) do
  if ARGV[5] == '' or ARGV[5] == g.name then
    out[5] = out[5] + 1
    local retrying = redis.call('ZCARD', ARGV[2] .. g.name)
    local ready
    if ARGV[1] == 'reliable' then
      ready = len - g.pending
    elseif g.lag then
      ready = g.lag
    else
      ready = #redis.call('XRANGE', stream, '(' .. g.last, '+', 'COUNT', 10000)
    end
    local ckey = ARGV[3] .. g.name
    redis.call('ZREMRANGEBYSCORE', ckey, '-inf', '(' .. ms(now - tonumber(ARGV[4])))
    local counters = redis.call('HMGET', meta, 'expired:' .. g.name, 'reclaimed:' .. g.name,
      'nacked:' .. g.name, 'dead:' .. g.name)
    out[#out + 1] = g.name
    out[#out + 1] = g.pending
    out[#out + 1] = retrying
    out[#out + 1] = ready
    out[#out + 1] = redis.call('ZCARD', ckey)
    for i = 1, 4 do out[#out + 1] = tonumber(counters[i] or '0') end
  end
end
return out
