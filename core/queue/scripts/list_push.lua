-- list_push.lua: append messages to a plain queue (all or none).
--
-- KEYS[1] list     the queue (LPUSH end = newest, RPOP end = oldest)
-- KEYS[2] meta     hash: kind
-- KEYS[3] waiting  flag set by waiting processes
-- ARGV[1] max_length
-- ARGV[2] notify channel
-- ARGV[3..] message bodies, oldest first
-- Returns:
--   {1, length}  stored; each element is "<enqueued_ms>:<body>"
--   {0, length}  refused: the queue would exceed max_length
--   error WRONGKIND when the name belongs to another kind
local now = now_ms()
local bad = check_kind(KEYS[2], 'plain')
if bad then return bad end
local n = #ARGV - 2
local len = redis.call('LLEN', KEYS[1])
if len + n > tonumber(ARGV[1]) then
  return {0, len}
end
local stamp = ms(now) .. ':'
local batch = {}
for i = 3, #ARGV do
  batch[#batch + 1] = stamp .. ARGV[i]
  if #batch == 1000 or i == #ARGV then
    len = redis.call('LPUSH', KEYS[1], unpack(batch))
    batch = {}
  end
end
if n > 0 then wake(KEYS[3], ARGV[2], '') end
return {1, len}
