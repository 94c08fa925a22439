-- zset_count.lua: count a delay queue's messages by due time.
--
-- KEYS[1] zset
-- ARGV[1] 'pending' (due after now) or 'ready' (due now or before)
-- Returns the count.
local now = now_ms()
if ARGV[1] == 'pending' then
  return redis.call('ZCOUNT', KEYS[1], '(' .. ms(now), '+inf')
end
return redis.call('ZCOUNT', KEYS[1], '-inf', ms(now))
