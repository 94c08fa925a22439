-- reset.lua: archive the top of the board and clear it, once per date.
--
-- KEYS[1..3], ARGV[1]  see lib.lua
-- KEYS[4]  the archive hash <prefix>rank:archive:{name}:<date>
-- ARGV[2]  date, YYYYMMDD
-- ARGV[3]  entries to archive (0: clear without archiving)
-- ARGV[4]  archive TTL, milliseconds
-- Returns  {done 0|1, entries archived, members cleared, version}, or the
--          error RANKTIES. Not done (nothing touched) when the board was
--          reset for this date or a later one (meta field reset; dates
--          compare as strings) or the archive exists.
local conflict = load_meta()
if conflict then return conflict end
local date, top = ARGV[2], tonumber(ARGV[3])
local last = redis.call('HGET', mkey, 'reset')
if (last and not bytes_after(date, last)) or redis.call('EXISTS', KEYS[4]) == 1 then
	return {0, 0, 0, finish(false)}
end
local archived = 0
if top > 0 then
	local list = redis.call('ZREVRANGE', zkey, 0, top - 1, 'WITHSCORES')
	local parts = {}
	for i = 1, #list, 2 do
		parts[#parts + 1] = '{"uid":' .. quote(uid_of(list[i])) .. ',"score":' .. fmtnum(tonumber(list[i + 1])) ..
			',"rank":' .. ((i + 1) / 2) .. '}'
	end
	redis.call('HSET', KEYS[4], 'data', '[' .. table.concat(parts, ',') .. ']')
	redis.call('PEXPIRE', KEYS[4], ARGV[4])
	archived = #parts
end
local n = redis.call('ZCARD', zkey)
if n > 0 then redis.call('DEL', zkey, hkey) end
redis.call('HSET', mkey, 'reset', date)
return {1, archived, n, finish(n > 0)}
