-- info.lua: the state of a lock, read-only.
--
-- KEYS (all share the hash tag {name}; the layout is described in acquire.lua):
--   KEYS[1] lock  KEYS[2] readers  KEYS[3] deadlines  KEYS[4] queue  KEYS[5] waiters  KEYS[6] token  KEYS[7] writers
-- ARGV: none
-- Returns:
--   {mode, ttl_ms, acquired_at_ms, token, waiting, owner1, count1, service1, owner2, count2, service2, ...}
--   service: the holder's service_name as acquire.lua stored it ("" when none was)
--   mode: "x" (an exclusive hold; its owner alone is listed), "s" (shared holds, every live
--   one listed; ttl = the longest remaining lease, acquired_at = the oldest, token = the
--   highest) or "" (not held; waiting may still be > 0). waiting counts the fair waiters
--   and the waiting writers whose liveness deadline has not passed.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function ms(x) return string.format('%d', x) end

local waiting = redis.call('ZCOUNT', KEYS[5], ms(now), '+inf') + redis.call('ZCOUNT', KEYS[7], ms(now), '+inf')

local h = redis.call('HMGET', KEYS[1], 'owner', 'count', 'token', 'acquired_at', 'service')
if h[1] then
  return {'x', math.max(redis.call('PTTL', KEYS[1]), 0), tonumber(h[4]), tonumber(h[3]), waiting, h[1], tonumber(h[2]), h[5] or ''}
end

local live = redis.call('ZRANGEBYSCORE', KEYS[3], ms(now), '+inf', 'WITHSCORES')
if #live == 0 then
  return {'', 0, 0, 0, waiting}
end
local res = {'s', 0, 0, 0, waiting}
local maxd, oldest, top = 0, nil, 0
for i = 1, #live, 2 do
  local owner, deadline = live[i], tonumber(live[i + 1])
  local r = redis.call('HGET', KEYS[2], owner)
  if r then
    local c, tk, at, svc = string.match(r, '^(%d+):(%d+):(%d+):?(.*)$')
    maxd = math.max(maxd, deadline)
    if oldest == nil or tonumber(at) < oldest then oldest = tonumber(at) end
    top = math.max(top, tonumber(tk))
    res[#res + 1] = owner
    res[#res + 1] = tonumber(c)
    res[#res + 1] = svc
  end
end
if oldest == nil then
  return {'', 0, 0, 0, waiting}
end
res[2] = math.max(maxd - now, 0)
res[3] = oldest
res[4] = top
return res
