-- claim.lua: settle one firing of a distributed task: claim it (the caller
-- runs it), or find it taken, skipped (overlap), missed (too old), paused
-- or early. The claim is recorded under the firing's own key, which
-- includes its fire time.
--
-- KEYS (all share the hash tag {name}):
--   KEYS[1] task    hash  the record
--   KEYS[2] runs    hash  unfinished firings: fire ms -> "attempt|owner"
--   KEYS[3] leases  zset  unfinished firings: fire ms -> lease deadline (ms)
--   KEYS[4] run     string the claim of firing ARGV[2]: owner, PX lease
-- ARGV:
--   ARGV[1]  time override ('0' = TIME)
--   ARGV[2]  fire time (ms); '0' claims nothing (reports orphan and probe)
--   ARGV[3]  probe: a fire time whose lease deadline to report, '0' none
--   ARGV[4]  owner
--   ARGV[5]  lease (ms)
--   ARGV[6]  expected cursor
--   ARGV[7]  missed: fire times between the expected cursor and ARGV[2]
--   ARGV[8]  skip while another firing holds a live lease: '1' | '0'
--   ARGV[9]  catch-up (ms): an older firing is settled as missed
--   ARGV[10] early (ms): how far before its fire time a claim is accepted
--   ARGV[11] miss only: '1' settles the firing as missed
--   ARGV[12] one-shot tombstone ttl (ms): a one-shot task whose firing is
--            settled as missed turns into a tombstone that expires after
--            this (and PUBLISHes remove), as finish.lua does for one that
--            ran; '0' for other tasks
--   ARGV[13] control channel
--   ARGV[14] task name
-- Returns {outcome, now, cursor, recount, run_deadline, wait_ms, orphan}:
--   outcome 1 claimed, 2 taken, 3 skipped, 4 missed, 5 paused, 6 early,
--   7 unknown (no record), 8 none (ARGV[2] = '0'); cursor before the claim
--   (claimed, skipped, missed) or current; recount 1 when the cursor was not
--   the expected one (ARGV[7] not counted); run_deadline of the taken
--   firing or the probe (0 if not unfinished); orphan: the oldest
--   unfinished firing whose lease lapsed (0 if none).

local now = server_now()
local fire = tonumber(ARGV[2])
local h = redis.call('HMGET', KEYS[1], 'cursor', 'paused', 'done')
if not h[1] then
  return {7, now, 0, 0, 0, 0, 0}
end
local cursor = tonumber(h[1])
if h[3] == '1' then
  return {2, now, cursor, 0, 0, 0, 0}
end

local orphan = 0
local o = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ms(now), 'LIMIT', 0, 1)
if #o > 0 then orphan = tonumber(o[1]) end
local function deadline_of(f)
  local d = redis.call('ZSCORE', KEYS[3], f)
  if d then return tonumber(d) end
  return 0
end
local probe = 0
if ARGV[3] ~= '0' then probe = deadline_of(ARGV[3]) end

if fire == 0 then return {8, now, cursor, 0, probe, 0, orphan} end
if h[2] == '1' then return {5, now, cursor, 0, probe, 0, orphan} end
if fire <= cursor then return {2, now, cursor, 0, deadline_of(ARGV[2]), 0, orphan} end
local early = tonumber(ARGV[10])
if now < fire - early then return {6, now, cursor, 0, probe, fire - early - now, orphan} end

redis.call('HSET', KEYS[1], 'cursor', ARGV[2])
local recount = 1
if cursor == tonumber(ARGV[6]) then
  recount = 0
  if ARGV[7] ~= '0' then redis.call('HINCRBY', KEYS[1], 'missed', ARGV[7]) end
end
if ARGV[11] == '1' or now - fire > tonumber(ARGV[9]) then
  redis.call('HINCRBY', KEYS[1], 'missed', 1)
  if ARGV[12] ~= '0' then
    redis.call('HSET', KEYS[1], 'done', '1')
    redis.call('PEXPIRE', KEYS[1], ARGV[12])
    follow_expiry()
    redis.call('PUBLISH', ARGV[13], 'remove\n' .. ARGV[14])
  end
  return {4, now, cursor, recount, 0, 0, orphan}
end
if ARGV[8] == '1' and redis.call('ZCOUNT', KEYS[3], ms(now), '+inf') > 0 then
  redis.call('HINCRBY', KEYS[1], 'skipped', 1)
  return {3, now, cursor, recount, 0, 0, orphan}
end
lease(ARGV[2], ARGV[4], 1, tonumber(ARGV[5]), now)
follow_expiry()
return {1, now, cursor, recount, 0, 0, orphan}
