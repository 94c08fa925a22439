-- prelude.lua: helpers every scheduler script starts with (prepended by
-- redis.go). ARGV[1] of every script is the time override: '0' reads the
-- server's TIME; tests pass a fake clock's Unix ms.

local function server_now()
  if ARGV[1] ~= '0' then return tonumber(ARGV[1]) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function ms(x) return string.format('%d', x) end

-- The record fields, in the order the Go decoder reads them.
local FIELDS = {'kind', 'spec', 'text', 'tz', 'anchor', 'paused', 'cursor', 'last_run', 'run_count',
  'missed', 'skipped', 'late', 'failed', 'last_error', 'errored', 'version', 'done', 'disabled'}

-- {fields..., orphaned (0/1), running} of the task whose keys are KEYS[1..3].
local function record(now)
  local r = redis.call('HMGET', KEYS[1], unpack(FIELDS))
  local orphaned = redis.call('ZCOUNT', KEYS[3], '-inf', '(' .. ms(now))
  local running = redis.call('ZCOUNT', KEYS[3], ms(now), '+inf')
  if orphaned > 0 then orphaned = 1 end
  r[#r + 1] = orphaned
  r[#r + 1] = running
  return r
end

-- A one-shot task that ran leaves a tombstone (done = 1) that answers
-- as no record, except to claims (its cursor settles the firing).
local function exists()
  return redis.call('EXISTS', KEYS[1]) == 1 and redis.call('HGET', KEYS[1], 'done') ~= '1'
end

local function num(key, field)
  return tonumber(redis.call('HGET', key, field) or '0')
end

-- "attempt|owner" of an unfinished firing, or nil.
local function run_of(fire)
  local v = redis.call('HGET', KEYS[2], fire)
  if not v then return nil end
  local attempt, owner = string.match(v, '^(%d+)|(.*)$')
  return tonumber(attempt), owner
end

-- Gives owner the lease of firing fire (its run key is KEYS[4]).
local function lease(fire, owner, attempt, ttl, now)
  redis.call('HSET', KEYS[2], fire, attempt .. '|' .. owner)
  redis.call('ZADD', KEYS[3], ms(now + ttl), fire)
  redis.call('SET', KEYS[4], owner, 'PX', ttl)
end

-- Keeps the runs and leases keys alive as long as the record.
-- (Only one-shot records expire.)
local function follow_expiry()
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl > 0 then
    redis.call('PEXPIRE', KEYS[2], pttl)
    redis.call('PEXPIRE', KEYS[3], pttl)
  end
end

