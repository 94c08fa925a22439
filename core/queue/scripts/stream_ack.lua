-- stream_ack.lua: acknowledge delivered entries (whichever consumer holds
-- them: the message is done); a reliable queue also deletes them.
--
-- KEYS[1] stream
-- ARGV[1] kind: 'reliable' or 'broadcast'
-- ARGV[2] group
-- ARGV[3..] ids
-- Returns one integer per id: 1, or 0 when the entry was not pending
-- (acknowledged already, purged, or the group is gone).
local out = {}
for i = 3, #ARGV do
  local n = redis.pcall('XACK', KEYS[1], ARGV[2], ARGV[i])
  if type(n) == 'table' then n = 0 end
  if n == 1 and ARGV[1] == 'reliable' then redis.call('XDEL', KEYS[1], ARGV[i]) end
  out[#out + 1] = n
end
return out
