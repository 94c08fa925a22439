-- acquire.lua: one atomic attempt to take a lock (exclusive or shared).
--
-- KEYS (all share the hash tag {name}; every lock script gets all seven):
--   KEYS[1] lock       hash   the exclusive hold: owner, count, token, acquired_at (ms), service
--                             (the holder's service_name, for info); PEXPIRE = lease
--   KEYS[2] readers    hash   the shared holds: owner -> "count:token:acquired_at_ms:service_name"
--   KEYS[3] deadlines  zset   owner -> lease deadline (ms) of its shared hold
--   KEYS[4] queue      zset   fair waiters: owner -> enqueue time (ms, strictly increasing)
--   KEYS[5] waiters    zset   fair waiters: owner -> liveness deadline (ms); purged once passed
--   KEYS[6] token      string fencing-token counter, advanced once per new hold (see next_token),
--                             never expires
--   KEYS[7] writers    zset   waiting writers outside fair mode: owner -> liveness deadline (ms);
--                             a live one of another owner holds back new shared holds
-- ARGV (few of them: each argument costs the server about as much as a small command):
--   ARGV[1] owner
--   ARGV[2] flags, four characters:
--           [1] mode: "x" exclusive, "s" shared
--           [2] reentrant: "1" or "0"
--           [3] fair: "1" or "0"
--           [4] waiting: "1" when the caller retries if refused (it is queued, fair, or records a
--               writer intent, exclusive); "0" for a single try
--   ARGV[3] lease ttl (ms, >= 1)
--   ARGV[4] waiter ttl (ms): liveness of a queued waiter or a writer intent
--   ARGV[5] wake-up channel (PUBLISHed when the fair queue's head departed and the lock is not held exclusively)
--   ARGV[6] the token of the hold the caller has in this mode (a re-entry), "0" when it holds none. A hold
--           of owner with another token is not the caller's: to a caller that holds none it is a stale hold
--           (a failover rolled the hash back, or an acquire that timed out in the client ran late), refused
--           like another owner's until its lease ends; a re-entry whose hold is gone is refused with {-1}.
--   ARGV[7] the holder's service_name (global.service_name), stored with a new hold for info.lua: another
--           process's info shows it
-- Returns:
--   {1, token, count, acquired_at_ms, ttl_ms}  granted (count > 1: a re-entry, token and acquired_at of the hold)
--   {0, retry_in_ms}                            not obtained; retry_in >= 1 is a hint
--   {-1}                                        the re-entry's hold (ARGV[6]) is gone: the caller's hold is lost
--   {-2}                                        refused: owner holds a shared hold and asked for the exclusive one
-- Time is the server's (TIME), in milliseconds. A new hold's token is max(counter + 1, now_ms * 1024),
-- stored back to the counter: above every earlier token even when the counter was lost (an empty restart)
-- or rolled back (a failover), as long as the clock is ahead of the lost grants. Below 2^53 until 2248.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner = ARGV[1]
local flags = ARGV[2]
local exclusive = string.byte(flags, 1) == 120 -- 'x'
local ttl = tonumber(ARGV[3])
local mine = ARGV[6]

-- The next fencing token. The clock part makes a counter that was lost or
-- rolled back jump past the tokens it may have handed out.
local function next_token()
  local token = redis.call('INCR', KEYS[6])
  local floor = now * 1024
  if token < floor then
    token = floor
    redis.call('SET', KEYS[6], token)
  end
  return token
end

-- Fast path: an exclusive attempt on a lock that nobody holds, reads,
-- queues or waits for (no lock hash, readers, fair queue or writers) is
-- granted at once. Numbers go to Redis as they are (integers below 2^53
-- print exactly), without string.format.
if exclusive and redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[4], KEYS[7]) == 0 then
  if mine ~= '0' then return {-1} end
  local token = next_token()
  redis.call('HSET', KEYS[1], 'owner', owner, 'count', 1, 'token', token, 'acquired_at', now, 'service', ARGV[7])
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, token, 1, now, ttl}
end

local reentrant = string.byte(flags, 2) == 49 -- '1'
local fair = string.byte(flags, 3) == 49
local waiting = string.byte(flags, 4) == 49
local wttl = tonumber(ARGV[4])

local function ms(x) return string.format('%d', x) end

-- Drop every key in list from hash h, in chunks (unpack has a stack limit).
local function hdel_all(h, list)
  for i = 1, #list, 1000 do
    redis.call('HDEL', h, unpack(list, i, math.min(i + 999, #list)))
  end
end

local function zrem_all(z, list)
  for i = 1, #list, 1000 do
    redis.call('ZREM', z, unpack(list, i, math.min(i + 999, #list)))
  end
end

-- Expire a zset (and its companion) at its highest score, or delete both when empty.
local function expire_at_max(z, other)
  local last = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', z, other)
    return
  end
  redis.call('PEXPIREAT', z, ms(tonumber(last[2]) + 1))
  redis.call('PEXPIREAT', other, ms(tonumber(last[2]) + 1))
end

-- Shared holds whose lease ended are gone.
local function purge_readers()
  local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ms(now))
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ms(now))
    hdel_all(KEYS[2], dead)
  end
end

-- Fair waiters that stopped retrying are gone.
local function purge_waiters()
  local dead = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. ms(now))
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. ms(now))
    zrem_all(KEYS[4], dead)
  end
end

-- Record (or refresh) owner's writer intent; intents whose writer stopped
-- retrying are purged.
local function intend()
  redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', '(' .. ms(now))
  redis.call('ZADD', KEYS[7], ms(now + wttl), owner)
  local last = redis.call('ZRANGE', KEYS[7], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[7], ms(tonumber(last[2]) + 1))
end

-- The earliest liveness deadline of another owner's live writer intent, or nil.
local function other_writer()
  local w = redis.call('ZRANGEBYSCORE', KEYS[7], ms(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 2)
  for i = 1, #w, 2 do
    if w[i] ~= owner then return tonumber(w[i + 1]) end
  end
  return nil
end

local function head()
  local h = redis.call('ZRANGE', KEYS[4], 0, 0)
  return h[1]
end

-- Queue owner (at the tail, if not queued yet) and push its liveness deadline.
local function enqueue()
  if redis.call('ZSCORE', KEYS[4], owner) == false then
    local score = now
    local last = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
    if #last > 0 and tonumber(last[2]) >= score then
      score = tonumber(last[2]) + 1
    end
    redis.call('ZADD', KEYS[4], ms(score), owner)
  end
  redis.call('ZADD', KEYS[5], ms(now + wttl), owner)
  expire_at_max(KEYS[5], KEYS[4])
end

local function leave_queue()
  if redis.call('ZREM', KEYS[4], owner) == 1 then
    redis.call('ZREM', KEYS[5], owner)
    expire_at_max(KEYS[5], KEYS[4])
  end
end

local function pttl()
  return math.max(redis.call('PTTL', KEYS[1]), 1)
end

-- Time until every shared hold has ended, if nobody renews.
local function readers_left()
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  if #last == 0 then return 1 end
  return math.max(tonumber(last[2]) - now, 1)
end

-- Refused: a waiting caller takes (or keeps) its place: in the fair queue,
-- or as a waiting writer.
local function refuse(retry_in)
  if waiting then
    if fair then enqueue() elseif exclusive then intend() end
  end
  return {0, retry_in}
end

local function attempt()
  purge_readers()
  if fair and redis.call('ZSCORE', KEYS[5], owner) ~= false then
    -- The caller is alive: refresh it before purging the silent ones.
    redis.call('ZADD', KEYS[5], ms(now + wttl), owner)
    expire_at_max(KEYS[5], KEYS[4])
  end
  purge_waiters()

  local held = redis.call('HMGET', KEYS[1], 'owner', 'token')
  local holder = held[1]
  if exclusive then
    if holder == owner and held[2] == mine then
      if not reentrant then return {0, pttl()} end
      local count = redis.call('HINCRBY', KEYS[1], 'count', 1)
      redis.call('PEXPIRE', KEYS[1], ms(ttl))
      return {1, tonumber(mine), count, tonumber(redis.call('HGET', KEYS[1], 'acquired_at')), ttl}
    end
    if mine ~= '0' then return {-1} end
    if holder then return refuse(pttl()) end
    if redis.call('HEXISTS', KEYS[2], owner) == 1 then return {-2} end
    if redis.call('HLEN', KEYS[2]) > 0 then return refuse(readers_left()) end
  else
    local r = redis.call('HGET', KEYS[2], owner)
    local c, tk, at, svc
    if r then c, tk, at, svc = string.match(r, '^(%d+):(%d+):(%d+):?(.*)$') end
    if r and tk == mine then
      local deadline = tonumber(redis.call('ZSCORE', KEYS[3], owner))
      if not reentrant then return {0, math.max(deadline - now, 1)} end
      local count = tonumber(c) + 1
      redis.call('HSET', KEYS[2], owner, count .. ':' .. tk .. ':' .. at .. ':' .. svc)
      redis.call('ZADD', KEYS[3], ms(now + ttl), owner)
      expire_at_max(KEYS[3], KEYS[2])
      return {1, tonumber(tk), count, tonumber(at), ttl}
    end
    if mine ~= '0' then return {-1} end
    if r then
      -- A stale shared hold of owner (live: purge_readers kept it): not
      -- the caller's, and the readers hash has one entry per owner.
      return refuse(math.max(tonumber(redis.call('ZSCORE', KEYS[3], owner)) - now, 1))
    end
    if holder and holder ~= owner then return refuse(pttl()) end
    -- Writer preference: a new reader waits while another owner's writer
    -- waits (the writer's own downgrade is not held back).
    if not fair and holder ~= owner then
      local wd = other_writer()
      if wd then return {0, math.max(wd - now, 1)} end
    end
  end

  -- Available. A fair caller must be at the head of the queue (a writer
  -- downgrading to a shared hold on its own lock never waits).
  if fair and holder ~= owner then
    local h = head()
    if h and h ~= owner then
      if waiting then enqueue() end
      local hd = redis.call('ZSCORE', KEYS[5], h)
      return {0, math.max(tonumber(hd) - now, 1)}
    end
  end
  leave_queue()
  if exclusive then redis.call('ZREM', KEYS[7], owner) end

  local token = next_token()
  if exclusive then
    redis.call('HSET', KEYS[1], 'owner', owner, 'count', 1, 'token', ms(token), 'acquired_at', ms(now), 'service', ARGV[7])
    redis.call('PEXPIRE', KEYS[1], ms(ttl))
  else
    redis.call('HSET', KEYS[2], owner, '1:' .. ms(token) .. ':' .. ms(now) .. ':' .. ARGV[7])
    redis.call('ZADD', KEYS[3], ms(now + ttl), owner)
    expire_at_max(KEYS[3], KEYS[2])
  end
  return {1, token, 1, now, ttl}
end

local head_before = head()
local res = attempt()
if head_before then
  local head_after = head()
  if head_after and head_after ~= head_before and redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('PUBLISH', ARGV[5], 'queue')
  end
end
return res
