-- stream_ack.lua: acknowledge a delivered entry (by any consumer: the
-- message is done); a reliable queue also deletes it.
--
-- KEYS[1] stream
-- ARGV[1] kind: 'reliable' or 'broadcast'
-- ARGV[2] group
-- ARGV[3] id
-- Returns 1, or 0 when the entry was not pending (acknowledged already,
-- purged, or the group is gone).
local n = redis.pcall('XACK', KEYS[1], ARGV[2], ARGV[3])
if type(n) == 'table' then return 0 end
if n == 1 and ARGV[1] == 'reliable' then redis.call('XDEL', KEYS[1], ARGV[3]) end
return n
