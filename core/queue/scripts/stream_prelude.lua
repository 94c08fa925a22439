-- stream_prelude.lua: helpers of the reliable and broadcast scripts,
-- prepended after prelude.lua.

local function split_id(id)
  local a, b = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(a), tonumber(b)
end

-- id_less: stream id x sorts before y.
local function id_less(x, y)
  local xa, xb = split_id(x)
  local ya, yb = split_id(y)
  return xa < ya or (xa == ya and xb < yb)
end

local function id_next(id)
  local a, b = split_id(id)
  return string.format('%d-%d', a, b + 1)
end

-- groups_of lists a stream's consumer groups: {name, pending, last, lag}.
local function groups_of(stream)
  local out = {}
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    out[#out + 1] = {name = field(g, 'name'), pending = field(g, 'pending'),
      last = field(g, 'last-delivered-id'), lag = field(g, 'lag')}
  end
  return out
end

-- trim_broadcast drops the entries every group has acknowledged (not
-- counted), then, to make room for n more under maxlen, the oldest entries,
-- and the entries older than ttl ms (both counted in meta 'trimmed').
local function trim_broadcast(stream, meta, maxlen, ttl, now, n)
  if redis.call('EXISTS', stream) == 0 then return end
  local frontier = nil
  for _, g in ipairs(groups_of(stream)) do
    local f
    if g.pending > 0 then
      f = redis.call('XPENDING', stream, g.name)[2]
    else
      f = id_next(g.last)
    end
    if frontier == nil or id_less(f, frontier) then frontier = f end
  end
  if frontier == nil then
    redis.call('XTRIM', stream, 'MAXLEN', 0)
  else
    redis.call('XTRIM', stream, 'MINID', frontier)
  end
  local trimmed = 0
  local keep = maxlen - n
  if keep < 0 then keep = 0 end
  if redis.call('XLEN', stream) > keep then
    trimmed = trimmed + redis.call('XTRIM', stream, 'MAXLEN', keep)
  end
  if ttl > 0 then
    trimmed = trimmed + redis.call('XTRIM', stream, 'MINID', ms(now - ttl))
  end
  if trimmed > 0 then redis.call('HINCRBY', meta, 'trimmed', trimmed) end
end

-- dead_letter moves entry id of group (body, deliveries so far) to the dead
-- letters, or drops it when they are disabled, and only then acknowledges it
-- (XDEL too on a reliable queue). c: {stream, meta, dead, group, reliable,
-- enabled, maxlen, ttl, now}.
local function dead_letter(c, id, body, deliveries)
  if c.enabled then
    local f = {'id', id, 'd', body, 'n', deliveries}
    if not c.reliable then
      f[#f + 1] = 'g'
      f[#f + 1] = c.group
    end
    redis.call('XADD', c.dead, '*', unpack(f))
    local dropped = 0
    if c.ttl > 0 then dropped = dropped + redis.call('XTRIM', c.dead, 'MINID', ms(c.now - c.ttl)) end
    dropped = dropped + redis.call('XTRIM', c.dead, 'MAXLEN', c.maxlen)
    if dropped > 0 then redis.call('HINCRBY', c.meta, 'dead_dropped', dropped) end
  else
    redis.call('HINCRBY', c.meta, 'dead_dropped', 1)
  end
  redis.call('HINCRBY', c.meta, 'dead:' .. c.group, 1)
  redis.call('XACK', c.stream, c.group, id)
  if c.reliable then redis.call('XDEL', c.stream, id) end
end

-- pending_of returns {consumer, deliveries} of a pending entry, or nil.
local function pending_of(stream, group, id)
  local p = redis.pcall('XPENDING', stream, group, id, id, 1)
  if type(p) ~= 'table' or p.err or #p == 0 then return nil end
  return p[1][2], p[1][4]
end
