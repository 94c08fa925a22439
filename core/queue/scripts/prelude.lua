-- prelude.lua: helpers prepended to every queue script (one source per
-- script: Redis scripts cannot share code).

-- now: server time in milliseconds.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function ms(x) return string.format('%d', x) end

-- check_kind records kind in the meta hash on first use; a queue of another
-- kind under the same name is an error reply (WRONGKIND).
local function check_kind(meta, kind)
  local k = redis.call('HGET', meta, 'kind')
  if not k then
    redis.call('HSET', meta, 'kind', kind)
  elseif k ~= kind then
    return redis.error_reply('WRONGKIND queue is a ' .. k .. ' queue, not a ' .. kind .. ' queue')
  end
  return nil
end

-- wake publishes payload on channel when a process waits (the flag is set),
-- and clears the flag: the woken waiters set it again when they find nothing.
local function wake(flag, channel, payload)
  if redis.call('DEL', flag) == 1 then
    redis.call('PUBLISH', channel, payload)
  end
end

-- waiting sets the flag when the caller is a waiter that found nothing.
local function waiting(flag, ttl)
  if ttl > 0 then
    redis.call('SET', flag, '1', 'PX', ttl)
  end
end

-- seen records consumer in the consumers sorted set.
local function seen(consumers, consumer, now)
  if consumer ~= '' then
    redis.call('ZADD', consumers, now, consumer)
  end
end

-- id_ms is the millisecond part of a stream id.
local function id_ms(id)
  return tonumber(string.match(id, '^(%d+)'))
end

-- field returns the value of name in a flat field list, or nil.
local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return nil
end
