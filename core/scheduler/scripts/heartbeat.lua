-- heartbeat.lua: renew the lease of a firing the caller runs and record the
-- attempt it is at.
--
-- KEYS (all share the hash tag {name}):
--   KEYS[1] task    hash  the record
--   KEYS[2] runs    hash  unfinished firings: fire ms -> "attempt|owner"
--   KEYS[3] leases  zset  unfinished firings: fire ms -> lease deadline (ms)
--   KEYS[4] run     string the claim of firing ARGV[2]
-- ARGV:
--   ARGV[1] time override ('0' = TIME)
--   ARGV[2] fire time (ms)
--   ARGV[3] owner
--   ARGV[4] attempt
--   ARGV[5] lease (ms)
-- Returns {held, now}: held 0 when another owner took the firing over (or
-- it is finished, or the record is gone).

local now = server_now()
local _, owner = run_of(ARGV[2])
if owner ~= ARGV[3] then return {0, now} end
lease(ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), now)
return {1, now}
