-- trigger.lua: "run now" of a distributed task (Engine.TriggerAny): send a
-- trigger, claim it, or read who claimed it. Each trigger has its own key,
-- the manual counterpart of a firing's claim key; exactly one claim of it
-- succeeds, so exactly one process runs it.
--
-- KEYS (all share the hash tag {name}):
--   KEYS[1] task     hash   the record
--   KEYS[2] trigger  string <prefix>scheduler:run:{name}:manual:<id>: '' until
--                           claimed, then the runner's owner id; PX the window
-- ARGV:
--   ARGV[1] time override ('0' = TIME)
--   ARGV[2] op: send | claim | state
--   ARGV[3] send: the window (ms) within which a process may claim it;
--           claim: the claiming owner (the same for every attempt of one
--           claim, so an attempt whose earlier attempt's reply was lost
--           finds it won)
--   ARGV[4] control channel (send)
--   ARGV[5] trigger id (send)
--   ARGV[6] task name (send)
-- Returns {n, now, owner}:
--   send:  n = 1 sent (the key is set and "trigger\n<id>\n<name>" PUBLISHed),
--          0 no record (nothing sent)
--   claim, state: n = 0 the trigger is unknown or its window passed,
--          1 unclaimed (state only), 2 claimed by owner (claim: it was
--          unclaimed and is now ARGV[3]'s; the caller won if owner is ARGV[3])

local now = server_now()
local op = ARGV[2]
if op == 'send' then
  if not exists() then return {0, now, ''} end
  redis.call('SET', KEYS[2], '', 'PX', ARGV[3])
  redis.call('PUBLISH', ARGV[4], 'trigger\n' .. ARGV[5] .. '\n' .. ARGV[6])
  return {1, now, ''}
end
local v = redis.call('GET', KEYS[2])
if op == 'claim' then
  if not v then return {0, now, ''} end
  if v == '' then
    redis.call('SET', KEYS[2], ARGV[3], 'KEEPTTL')
  end
  return {2, now, redis.call('GET', KEYS[2])}
end
if op == 'state' then
  if not v then return {0, now, ''} end
  if v == '' then return {1, now, ''} end
  return {2, now, v}
end
return redis.error_reply('ERR scheduler trigger: unknown op ' .. op)
