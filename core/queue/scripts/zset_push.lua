-- zset_push.lua: add messages to a delay or priority queue (all or none).
--
-- KEYS[1] zset     member = <16 hex digits of seq><enqueued_ms>:<body>
-- KEYS[2] meta     hash: kind, seq
-- KEYS[3] waiting  flag
-- ARGV[1] kind: 'delay' or 'priority'
-- ARGV[2] max_length
-- ARGV[3] notify channel
-- ARGV[4] score mode: 'd' = now + ARGV[5] ms (delay), 'a' = ARGV[5] ms
--         (push_at), 's' = ARGV[5] as given (priority: the exact score text)
-- ARGV[5] the delay, time or score
-- ARGV[6..] message bodies
-- Returns:
--   {1, length}
--   {0, length}  refused: the queue would exceed max_length
--   error WRONGKIND
-- Wake-ups: a priority push publishes when a process waits; a delay push
-- publishes its due time when a process waits and the message is due before
-- every other one (waiters sleep until the earliest due time they know).
local now = now_ms()
local bad = check_kind(KEYS[2], ARGV[1])
if bad then return bad end
local n = #ARGV - 5
local len = redis.call('ZCARD', KEYS[1])
if len + n > tonumber(ARGV[2]) then
  return {0, len}
end
local mode = ARGV[4]
local score = ARGV[5]
if mode == 'd' then
  score = ms(now + tonumber(ARGV[5]))
end
local first = nil
if ARGV[1] == 'delay' then
  first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
end
local stamp = ms(now) .. ':'
for i = 6, #ARGV do
  local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
  redis.call('ZADD', KEYS[1], score, string.format('%016x', seq) .. stamp .. ARGV[i])
end
len = len + n
if n > 0 then
  if ARGV[1] == 'priority' then
    wake(KEYS[3], ARGV[3], '')
  elseif #first == 0 or tonumber(score) < tonumber(first[2]) then
    if redis.call('EXISTS', KEYS[3]) == 1 then
      redis.call('PUBLISH', ARGV[3], score)
    end
  end
end
return {1, len}
