-- stream_nack.lua: give a delivery back for a retry after a delay (nack,
-- counted), or at once without counting it (release). A nack of the last
-- allowed delivery moves the message to the dead letters first and then
-- acknowledges it.
--
-- KEYS[1] stream
-- KEYS[2] meta     hash: counters
-- KEYS[3] waiting  flag
-- KEYS[4] retry    zset id -> retry time ms
-- KEYS[5] dead     dead-letter stream
-- ARGV[1] kind: 'reliable' or 'broadcast'
-- ARGV[2] group
-- ARGV[3] consumer (must hold the delivery)
-- ARGV[4] id
-- ARGV[5] deliveries of the handle (must match: a later delivery is another handle)
-- ARGV[6] delay ms
-- ARGV[7] max deliveries
-- ARGV[8] dead letters enabled: '1' or '0'
-- ARGV[9] dead-letter max length
-- ARGV[10] dead-letter ttl ms
-- ARGV[11] notify channel
-- ARGV[12] the consumer that holds parked entries
-- ARGV[13] 'nack' or 'release'
-- Returns {1} parked for the retry, {2} dead-lettered, {-1} not held.
local now = now_ms()
local stream, group, id = KEYS[1], ARGV[2], ARGV[4]
local deliveries = tonumber(ARGV[5])
local owner, cnt = pending_of(stream, group, id)
if owner ~= ARGV[3] or cnt ~= deliveries then return {-1} end
local release = ARGV[13] == 'release'
local retries = deliveries
if release then
  retries = deliveries - 1
else
  redis.call('HINCRBY', KEYS[2], 'nacked:' .. group, 1)
  if deliveries >= tonumber(ARGV[7]) then
    local c = {stream = stream, meta = KEYS[2], dead = KEYS[5], group = group, reliable = ARGV[1] == 'reliable',
      enabled = ARGV[8] == '1', maxlen = tonumber(ARGV[9]), ttl = tonumber(ARGV[10]), now = now}
    local e = redis.call('XRANGE', stream, id, id)
    if #e > 0 then
      dead_letter(c, id, field(e[1][2], 'd') or '', deliveries)
    else
      redis.call('XACK', stream, group, id)
    end
    return {2}
  end
end
redis.call('XCLAIM', stream, group, ARGV[12], 0, id, 'JUSTID', 'RETRYCOUNT', retries)
local delay = tonumber(ARGV[6])
redis.call('ZADD', KEYS[4], now + delay, id)
if delay == 0 then
  wake(KEYS[3], ARGV[11], '')
elseif redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('PUBLISH', ARGV[11], ms(now + delay))
end
return {1}
