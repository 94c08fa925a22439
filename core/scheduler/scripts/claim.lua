-- claim.lua: settle one firing of a distributed task: claim it (the caller
-- runs it), or find it taken, skipped (overlap), missed (too old), paused,
-- early or disabled. The claim is recorded under the firing's own key, which
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
--   ARGV[4]  owner: '<base>/<n>', attempt n of a claim whose earlier
--            attempts (same base) got no reply (see below)
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
-- Returns {outcome, now, cursor, recount, run_deadline, wait_ms, orphan,
--          dropped, dropped_first, dropped_last, version}:
--   outcome 1 claimed, 2 taken, 3 skipped, 4 missed, 5 paused, 6 early,
--   7 unknown (no record), 8 none (ARGV[2] = '0'), 9 disabled; cursor before the claim
--   (claimed, skipped, missed) or current; recount 1 when the cursor was not
--   the expected one (ARGV[7] not counted); run_deadline of the taken
--   firing or the probe (0 if not unfinished); orphan: the oldest
--   unfinished firing whose lease lapsed (0 if none); dropped: how many
--   claims of earlier attempts this one dropped and counted as missed
--   (their fire times from dropped_first to dropped_last), beyond what
--   cursor and recount account for. version: the record's (a paused or
--   disabled outcome is as of that control; a process that applied a
--   newer one since keeps it).
--
-- Attempts. A claim whose reply never came (the client gave up: a frozen
-- or slow server) may still be executed later: Redis runs what it had
-- buffered. Its firing never runs, since its caller never heard of it, but
-- its lease would block the task (overlap skip) and then be re-run as
-- recovered. So the caller sends its next claim as the next attempt of
-- the same base owner, and this script treats what earlier attempts of
-- that base recorded as never run: the same firing is taken over (the
-- reply of the earlier attempt, again), another one is dropped and
-- counted missed. An attempt older than one recorded changes nothing.
-- The run key of a claimed firing keeps, until its first renewal, what
-- the claim found: "owner\nexpected cursor\ncursor before\nrecount\nmissed",
-- so that a later attempt answers as the recorded one did, and counts the
-- fire times since it as one claim from the expected cursor would have.

local now = server_now()
local fire = tonumber(ARGV[2])
local h = redis.call('HMGET', KEYS[1], 'cursor', 'paused', 'done', 'disabled', 'version')
local version = tonumber(h[5]) or 0
if not h[1] then
  return {7, now, 0, 0, 0, 0, 0, 0, 0, 0, version}
end
local cursor = tonumber(h[1])
if h[3] == '1' then
  return {2, now, cursor, 0, 0, 0, 0, 0, 0, 0, version}
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

if fire == 0 then return {8, now, cursor, 0, probe, 0, orphan, 0, 0, 0, version} end

-- The run key of firing f (KEYS[4] is the one of ARGV[2]).
local function run_key(f) return string.sub(KEYS[4], 1, #KEYS[4] - #ARGV[2]) .. f end

-- Records the claim of this firing by ARGV[4] (see Attempts).
local function record_claim(attempt, prev, recount)
  lease(ARGV[2], ARGV[4], attempt, tonumber(ARGV[5]), now)
  redis.call('SET', KEYS[4], ARGV[4] .. '\n' .. ARGV[6] .. '\n' .. ms(prev) .. '\n' .. recount .. '\n' .. ARGV[7],
    'PX', ARGV[5])
  follow_expiry()
end

-- Earlier attempts of this claim (see Attempts).
local dropped, dfirst, dlast = 0, 0, 0
local chain -- what the latest dropped attempt found, if the cursor is still its
local base, try = string.match(ARGV[4], '^(.*)/(%d+)$')
if base then
  try = tonumber(try)
  -- A first attempt can only meet itself (a client that sent it twice).
  local runs = {ARGV[2], redis.call('HGET', KEYS[2], ARGV[2])}
  if try > 1 then runs = redis.call('HGETALL', KEYS[2]) end
  local mine = {}
  for i = 1, #runs, 2 do
    local b, k = string.match(runs[i + 1] or '', '^%d+|(.*)/(%d+)$')
    if b == base then
      k = tonumber(k)
      if k > try then return {2, now, cursor, 0, 0, 0, orphan, 0, 0, 0, version} end
      mine[#mine + 1] = {fs = runs[i], f = tonumber(runs[i]), k = k}
    end
  end
  table.sort(mine, function(a, b) return a.k < b.k end)
  for _, m in ipairs(mine) do
    local info = redis.call('GET', run_key(m.fs))
    local o, expect, prev, recount, missed
    if info then
      o, expect, prev, recount, missed = string.match(info, '^(.*)\n(%-?%d+)\n(%-?%d+)\n(%d)\n(%d+)$')
    end
    if m.f == fire then
      -- Recorded already: this attempt takes it over and answers as it.
      local attempt = run_of(ARGV[2])
      if not o then prev, recount = ARGV[2], 1 end
      record_claim(attempt, tonumber(prev), tonumber(recount))
      return {1, now, tonumber(prev), tonumber(recount), 0, 0, orphan, 0, 0, 0, version}
    end
    redis.call('HDEL', KEYS[2], m.fs)
    redis.call('ZREM', KEYS[3], m.fs)
    redis.call('DEL', run_key(m.fs))
    dropped = dropped + 1
    if dfirst == 0 or m.f < dfirst then dfirst = m.f end
    if m.f > dlast then dlast = m.f end
    chain = nil
    if o and expect == ARGV[6] and cursor == m.f then
      chain = {prev = tonumber(prev), recount = tonumber(recount), missed = tonumber(missed)}
    end
  end
end
-- Counts the dropped firings that nothing else accounts for.
local function count_dropped()
  if dropped > 0 then redis.call('HINCRBY', KEYS[1], 'missed', dropped) end
  return dropped, dfirst, dlast
end

if h[4] == '1' then
  local d, df, dl = count_dropped()
  return {9, now, cursor, 0, probe, 0, orphan, d, df, dl, version}
end
if h[2] == '1' then
  local d, df, dl = count_dropped()
  return {5, now, cursor, 0, probe, 0, orphan, d, df, dl, version}
end
if fire <= cursor then
  local d, df, dl = count_dropped()
  return {2, now, cursor, 0, deadline_of(ARGV[2]), 0, orphan, d, df, dl, version}
end
local early = tonumber(ARGV[10])
if now < fire - early then
  local d, df, dl = count_dropped()
  return {6, now, cursor, 0, probe, fire - early - now, orphan, d, df, dl, version}
end

redis.call('HSET', KEYS[1], 'cursor', ARGV[2])
local prev, recount = cursor, 1
if chain then
  -- The dropped attempts and this one settle, together, what one claim
  -- from the expected cursor would have: the first of them counted (or
  -- left to its caller to recount) the fire times up to its own, each
  -- later one the fire times since the one before it, its fire included.
  prev, recount, dropped = chain.prev, chain.recount, 0
  local add = tonumber(ARGV[7]) - chain.missed
  if recount == 0 and add > 0 then redis.call('HINCRBY', KEYS[1], 'missed', add) end
elseif cursor == tonumber(ARGV[6]) then
  recount = 0
  if ARGV[7] ~= '0' then redis.call('HINCRBY', KEYS[1], 'missed', ARGV[7]) end
end
local d, df, dl = count_dropped()
if ARGV[11] == '1' or now - fire > tonumber(ARGV[9]) then
  redis.call('HINCRBY', KEYS[1], 'missed', 1)
  if ARGV[12] ~= '0' then
    redis.call('HSET', KEYS[1], 'done', '1')
    redis.call('PEXPIRE', KEYS[1], ARGV[12])
    follow_expiry()
    redis.call('PUBLISH', ARGV[13], 'remove\n' .. ARGV[14])
  end
  return {4, now, prev, recount, 0, 0, orphan, d, df, dl, version}
end
if ARGV[8] == '1' and redis.call('ZCOUNT', KEYS[3], ms(now), '+inf') > 0 then
  redis.call('HINCRBY', KEYS[1], 'skipped', 1)
  return {3, now, prev, recount, 0, 0, orphan, d, df, dl, version}
end
record_claim(1, prev, recount)
return {1, now, prev, recount, 0, 0, orphan, d, df, dl, version}
