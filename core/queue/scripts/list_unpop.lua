-- list_unpop.lua: put popped messages back at the oldest end of a plain
-- queue, in their order (a waiter gave up while they were being popped).
--
-- KEYS[1] list
-- KEYS[2] waiting  flag
-- ARGV[1] notify channel
-- ARGV[2..] elements as list_pop returned them, in the order popped
-- Returns the list length.
local len = 0
for i = #ARGV, 2, -1 do
  len = redis.call('RPUSH', KEYS[1], ARGV[i])
end
wake(KEYS[2], ARGV[1], '')
return len
