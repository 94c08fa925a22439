-- recover.lua: take over a firing whose runner stopped renewing its lease.
--
-- KEYS (all share the hash tag {name}):
--   KEYS[1] task    hash  the record
--   KEYS[2] runs    hash  unfinished firings: fire ms -> "attempt|owner"
--   KEYS[3] leases  zset  unfinished firings: fire ms -> lease deadline (ms)
--   KEYS[4] run     string the claim of firing ARGV[2]
-- ARGV:
--   ARGV[1] time override ('0' = TIME)
--   ARGV[2] fire time (ms)
--   ARGV[3] new owner: '<base>/<n>', attempt n of a recover whose earlier
--           attempts (same base) got no reply: if one of them took the
--           firing over (Redis ran it after all), this one takes it from it
--   ARGV[4] lease (ms)
-- Returns {recovered, now, attempt, deadline}: recovered 1 with the attempt
-- the lapsed runner had reached; else 0 with the live lease's deadline (0
-- when the firing is finished or the record gone).

local now = server_now()
local attempt, owner = run_of(ARGV[2])
if not exists() or not attempt then return {0, now, 0, 0} end
local d = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[2]) or '0')
local base, try = string.match(ARGV[3], '^(.*)/(%d+)$')
local b, k = string.match(owner, '^(.*)/(%d+)$')
if base and b == base and tonumber(k) <= tonumber(try) then d = 0 end
if d >= now then return {0, now, 0, d} end
lease(ARGV[2], ARGV[3], attempt, tonumber(ARGV[4]), now)
follow_expiry()
return {1, now, attempt, 0}
