-- stream_extend.lua: restart the visibility timeout of deliveries this
-- consumer still holds.
--
-- KEYS[1] stream
-- KEYS[2] consumers  zset consumer -> last seen ms
-- ARGV[1] group
-- ARGV[2] consumer
-- ARGV[3..] id, deliveries pairs
-- Returns one integer per pair: 1 extended, 0 not held (another delivery
-- of the message was made, or it was settled).
local now = now_ms()
local out = {}
for i = 3, #ARGV, 2 do
  local owner, cnt = pending_of(KEYS[1], ARGV[1], ARGV[i])
  if owner == ARGV[2] and cnt == tonumber(ARGV[i + 1]) then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
seen(KEYS[2], ARGV[2], now)
return out
