-- dead_read.lua: read the dead letters, after dropping those past their ttl.
--
-- KEYS[1] dead  stream: id = original id, d = body, n = deliveries, g = group
-- KEYS[2] meta  hash: dead_dropped
-- ARGV[1] dead-letter ttl ms (0: none)
-- ARGV[2] start index (0 = oldest), or -1 for the length only
-- ARGV[3] count
-- Returns {length} for ARGV[2] = -1, else {id, original id, body,
-- deliveries, group, ...}.
local now = now_ms()
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  local d = redis.call('XTRIM', KEYS[1], 'MINID', ms(now - ttl))
  if d > 0 then redis.call('HINCRBY', KEYS[2], 'dead_dropped', d) end
end
local start, count = tonumber(ARGV[2]), tonumber(ARGV[3])
if start < 0 then return {redis.call('XLEN', KEYS[1])} end
local out = {}
if count == 0 then return out end
local es = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', start + count)
for i = start + 1, #es do
  local f = es[i][2]
  out[#out + 1] = es[i][1]
  out[#out + 1] = field(f, 'id') or ''
  out[#out + 1] = field(f, 'd') or ''
  out[#out + 1] = tonumber(field(f, 'n') or '0')
  out[#out + 1] = field(f, 'g') or ''
end
return out
