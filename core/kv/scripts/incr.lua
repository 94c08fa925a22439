-- incr.lua: INCRBYFLOAT with a float64 range check.
--
-- KEYS[1]  the value's key (<prefix>global:<key>)
-- ARGV[1]  the increment (a number)
-- Returns  the new value as INCRBYFLOAT formats it, or the error
--          "ERR increment would produce NaN or Infinity" (the old value and
--          its TTL are restored). INCRBYFLOAT's own errors ("not a valid
--          float") abort before any write.
--
-- Redis computes in long double, so a result beyond ±1.8e308 would be stored
-- as a number no float64 decoder (nor the memory backend) accepts.
local old = redis.call('GET', KEYS[1])
local new = redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
local x = tonumber(new)
if x == nil or x ~= x or x == math.huge or x == -math.huge then
	if old then
		redis.call('SET', KEYS[1], old, 'KEEPTTL')
	else
		redis.call('DEL', KEYS[1])
	end
	return redis.error_reply('ERR increment would produce NaN or Infinity')
end
return new
