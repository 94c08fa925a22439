-- control.lua: pause, resume, disable, enable or remove a distributed task
-- and tell every process; also get (read the record) and missed (add to its count).
--
-- KEYS (all share the hash tag {name}):
--   KEYS[1] task    hash  the record
--   KEYS[2] runs    hash  unfinished firings: fire ms -> "attempt|owner"
--   KEYS[3] leases  zset  unfinished firings: fire ms -> lease deadline (ms)
-- ARGV:
--   ARGV[1] time override ('0' = TIME)
--   ARGV[2] op: pause | resume | disable | enable | remove | get | missed
--   ARGV[3] control channel (pause, resume, disable, enable, remove)
--   ARGV[4] task name
--   ARGV[5] missed: the count to add
-- Returns {found, now, record, version}: found 0 when there is no record;
-- record (get) as prelude's record(), else empty; version the record's
-- version after a pause, resume, disable or enable (0 otherwise). The
-- message is "op\nname\nversion" ("remove\nname" for remove).
-- Resume and enable move the cursor to now, so firings while paused or
-- disabled count as nothing. paused and disabled are two flags: a task
-- fires only when neither is set (enable leaves a paused task paused).

local now = server_now()
local op = ARGV[2]
if not exists() then return {0, now, {}} end
if op == 'get' then return {1, now, record(now)} end
if op == 'missed' then
  redis.call('HINCRBY', KEYS[1], 'missed', ARGV[5])
  return {1, now, {}}
end
local version = 0
if op == 'pause' then
  redis.call('HSET', KEYS[1], 'paused', '1')
elseif op == 'resume' then
  redis.call('HSET', KEYS[1], 'paused', '0', 'cursor', ms(math.max(num(KEYS[1], 'cursor'), now)))
elseif op == 'disable' then
  redis.call('HSET', KEYS[1], 'disabled', '1')
elseif op == 'enable' then
  if redis.call('HGET', KEYS[1], 'disabled') == '1' then
    redis.call('HSET', KEYS[1], 'disabled', '0', 'cursor', ms(math.max(num(KEYS[1], 'cursor'), now)))
  end
elseif op == 'remove' then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
else
  return redis.error_reply('ERR scheduler control: unknown op ' .. op)
end
if op == 'remove' then
  redis.call('PUBLISH', ARGV[3], op .. '\n' .. ARGV[4])
else
  version = redis.call('HINCRBY', KEYS[1], 'version', 1)
  redis.call('PUBLISH', ARGV[3], op .. '\n' .. ARGV[4] .. '\n' .. version)
end
return {1, now, {}, version}
