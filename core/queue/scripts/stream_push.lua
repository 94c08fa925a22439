-- stream_push.lua: append messages to a reliable queue (all or none) or a
-- broadcast queue (trimming first, never refusing).
--
-- KEYS[1] stream   entries: d = body
-- KEYS[2] meta     hash: kind, trimmed
-- KEYS[3] waiting  flag
-- ARGV[1] kind: 'reliable' or 'broadcast'
-- ARGV[2] max_length
-- ARGV[3] notify channel
-- ARGV[4] the reliable queue's consumer group (created with the stream)
-- ARGV[5] message ttl ms (broadcast trimming; 0: none)
-- ARGV[6..] message bodies
-- Returns:
--   {1, id...}  the new entries' ids
--   {0}         refused: a reliable queue would exceed max_length
--   error WRONGKIND
local bad = check_kind(KEYS[2], ARGV[1])
if bad then return bad end
local n = #ARGV - 5
if ARGV[1] == 'reliable' then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[4], '0', 'MKSTREAM')
  end
  if redis.call('XLEN', KEYS[1]) + n > tonumber(ARGV[2]) then return {0} end
else
  trim_broadcast(KEYS[1], KEYS[2], tonumber(ARGV[2]), tonumber(ARGV[5]), now_ms(), n)
end
local out = {1}
for i = 6, #ARGV do
  out[#out + 1] = redis.call('XADD', KEYS[1], '*', 'd', ARGV[i])
end
if n > 0 then wake(KEYS[3], ARGV[3], '') end
return out
