-- dead_requeue.lua: move dead letters back to their queue as new entries (a
-- broadcast dead letter goes back to its group only: field g).
--
-- KEYS[1] dead
-- KEYS[2] stream
-- KEYS[3] meta
-- KEYS[4] waiting  flag
-- ARGV[1] kind: 'reliable' or 'broadcast'
-- ARGV[2] dead letter id, or '' for all of them (oldest first)
-- ARGV[3] max_length of the queue
-- ARGV[4] notify channel
-- ARGV[5] the reliable queue's consumer group
-- ARGV[6] message ttl ms (broadcast trimming)
-- ARGV[7] dead-letter ttl ms
-- Returns {moved, left}: left > 0 when the queue was full; {-1, 0} when the
-- one id asked for is not a dead letter.
local now = now_ms()
local dead, stream = KEYS[1], KEYS[2]
local reliable = ARGV[1] == 'reliable'
local maxlen = tonumber(ARGV[3])
local dttl = tonumber(ARGV[7])
if dttl > 0 then
  local d = redis.call('XTRIM', dead, 'MINID', ms(now - dttl))
  if d > 0 then redis.call('HINCRBY', KEYS[3], 'dead_dropped', d) end
end
local es
if ARGV[2] ~= '' then
  es = redis.call('XRANGE', dead, ARGV[2], ARGV[2])
  if #es == 0 then return {-1, 0} end
else
  es = redis.call('XRANGE', dead, '-', '+')
end
if reliable and redis.call('EXISTS', stream) == 0 then
  redis.call('XGROUP', 'CREATE', stream, ARGV[5], '0', 'MKSTREAM')
end
local moved = 0
for _, e in ipairs(es) do
  if reliable and redis.call('XLEN', stream) >= maxlen then break end
  if not reliable then trim_broadcast(stream, KEYS[3], maxlen, tonumber(ARGV[6]), now, 1) end
  local f = {'d', field(e[2], 'd') or ''}
  local g = field(e[2], 'g')
  if g and g ~= '' then
    f[#f + 1] = 'g'
    f[#f + 1] = g
  end
  redis.call('XADD', stream, '*', unpack(f))
  redis.call('XDEL', dead, e[1])
  moved = moved + 1
end
if moved > 0 then wake(KEYS[4], ARGV[4], '') end
return {moved, #es - moved}
