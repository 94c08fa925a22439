-- register.lua: create a distributed task's record, or return it; a new
-- schedule of the same kind updates it.
--
-- KEYS (all share the hash tag {name}):
--   KEYS[1] task    hash  the record (fields: see keys_scheduler.go)
--   KEYS[2] runs    hash  unfinished firings: fire ms -> "attempt|owner"
--   KEYS[3] leases  zset  unfinished firings: fire ms -> lease deadline (ms)
-- ARGV:
--   ARGV[1] time override ('0' = TIME)
--   ARGV[2] kind: cron | interval | once
--   ARGV[3] spec (canonical schedule)
--   ARGV[4] text (what ops show)
--   ARGV[5] time zone ('' unless cron)
--   ARGV[6] at: a one-shot's fire time (ms), '0' = anchor at now
--   ARGV[7] expire (ms after the anchor a one-shot record lingers), '0' = never
--   ARGV[8] control channel
--   ARGV[9] task name
--   ARGV[10] anchor to use if the record is created ('0' = as ARGV[6])
--   ARGV[11] cursor to use if the record is created ('0' = from now)
-- Returns {status, now, record}: status 1 created, 2 updated, 0 unchanged,
-- 3 done (a one-shot task that ran; its tombstone lingers), -1 kind
-- conflict (the record holds another kind); record as prelude's
-- record(): the FIELDS, then orphaned (0/1) and running (count).

local now = server_now()
local kind, spec, text, tz = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local anchor = now
if ARGV[6] ~= '0' then anchor = tonumber(ARGV[6]) end

local function initial_cursor()
  if kind == 'once' then return math.min(anchor, now) - 1 end
  return now
end

-- Relative to now (the time override may not be the server's clock).
local function set_expiry()
  if ARGV[7] ~= '0' then
    redis.call('PEXPIRE', KEYS[1], ms(math.max(anchor - now + tonumber(ARGV[7]), 1000)))
    follow_expiry()
  end
end

if redis.call('EXISTS', KEYS[1]) == 0 then
  local cursor = initial_cursor()
  if ARGV[10] ~= '0' and ARGV[6] == '0' then anchor = tonumber(ARGV[10]) end
  if ARGV[11] ~= '0' then cursor = tonumber(ARGV[11]) end
  redis.call('HSET', KEYS[1], 'kind', kind, 'spec', spec, 'text', text, 'tz', tz, 'anchor', ms(anchor),
    'paused', '0', 'cursor', ms(cursor), 'last_run', '0', 'run_count', '0', 'missed', '0',
    'skipped', '0', 'late', '0', 'failed', '0', 'last_error', '', 'errored', '0', 'version', '1',
    'created_at', ms(now), 'updated_at', ms(now))
  set_expiry()
  return {1, now, record(now)}
end

if redis.call('HGET', KEYS[1], 'done') == '1' then
  return {3, now, record(now)}
end
if redis.call('HGET', KEYS[1], 'kind') ~= kind then
  return {-1, now, record(now)}
end
if redis.call('HGET', KEYS[1], 'spec') == spec and redis.call('HGET', KEYS[1], 'tz') == tz then
  return {0, now, record(now)}
end
local cursor = math.max(num(KEYS[1], 'cursor'), initial_cursor())
redis.call('HSET', KEYS[1], 'spec', spec, 'text', text, 'tz', tz, 'anchor', ms(anchor), 'cursor', ms(cursor),
  'updated_at', ms(now))
redis.call('HINCRBY', KEYS[1], 'version', 1)
set_expiry()
redis.call('PUBLISH', ARGV[8], 'update\n' .. ARGV[9])
return {2, now, record(now)}
