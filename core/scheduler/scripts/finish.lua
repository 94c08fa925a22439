-- finish.lua: end a run and count it; a one-shot task's record is deleted.
--
-- KEYS (all share the hash tag {name}):
--   KEYS[1] task    hash  the record
--   KEYS[2] runs    hash  unfinished firings: fire ms -> "attempt|owner"
--   KEYS[3] leases  zset  unfinished firings: fire ms -> lease deadline (ms)
--   KEYS[4] run     string the claim of firing ARGV[2]
-- ARGV:
--   ARGV[1]  time override ('0' = TIME)
--   ARGV[2]  fire time (ms); '0' for a manual run
--   ARGV[3]  owner
--   ARGV[4]  manual: '1' counts a run that had no claim
--   ARGV[5]  started (ms, the Store's clock)
--   ARGV[6]  failed: '1' | '0'
--   ARGV[7]  error text (failed)
--   ARGV[8]  late: '1' | '0'
--   ARGV[9]  once: '1' turns the record into a tombstone that expires after
--            ARGV[12] ms (and PUBLISHes remove)
--   ARGV[10] control channel
--   ARGV[11] task name
--   ARGV[12] tombstone ttl (ms)
-- Returns {held, found, now, record}: held 0 when another owner took the
-- firing over (nothing counted); found 0 when there is no record (record
-- is then empty).

local now = server_now()
local manual = ARGV[4] == '1'
if not exists() then
  local held = 0
  if manual then held = 1 end
  return {held, 0, now, {}}
end
if not manual then
  local _, owner = run_of(ARGV[2])
  if owner ~= ARGV[3] then return {0, 1, now, record(now)} end
  redis.call('HDEL', KEYS[2], ARGV[2])
  redis.call('ZREM', KEYS[3], ARGV[2])
  redis.call('DEL', KEYS[4])
end
redis.call('HINCRBY', KEYS[1], 'run_count', 1)
redis.call('HSET', KEYS[1], 'last_run', ARGV[5])
if ARGV[8] == '1' then redis.call('HINCRBY', KEYS[1], 'late', 1) end
if ARGV[6] == '1' then
  redis.call('HINCRBY', KEYS[1], 'failed', 1)
  redis.call('HSET', KEYS[1], 'last_error', ARGV[7], 'errored', '1')
else
  redis.call('HSET', KEYS[1], 'errored', '0')
end
local rec = record(now)
if ARGV[9] == '1' and not manual then
  redis.call('HSET', KEYS[1], 'done', '1')
  redis.call('PEXPIRE', KEYS[1], ARGV[12])
  follow_expiry()
  redis.call('PUBLISH', ARGV[10], 'remove\n' .. ARGV[11])
end
return {1, 1, now, rec}
