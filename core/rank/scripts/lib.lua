-- lib.lua: shared functions, prepended to every rank script (so script
-- errors count lines from the top of this file). Every script has:
--
-- KEYS[1]  the board's zset:           <prefix>rank:{name}
-- KEYS[2]  uid -> zset member hash:    <prefix>rank:members:{name} (ties 'reach' only)
-- KEYS[3]  meta hash:                  <prefix>rank:meta:{name}
--          fields: version (changes so far), seq (last reach sequence
--          number given), ties (policy of the members), reset (date of
--          the last archive_and_clear)
-- ARGV[1]  the handle's tie policy: 'reach' or 'uid'
--
-- Zset scores are the scores. Under 'reach' a member is 15 decimal digits,
-- 999999999999999 - seq, then the uid: ZREVRANGE lists equal scores in
-- descending member order, so the earliest reach comes first. Under 'uid'
-- a member is the uid.
--
-- Lua string comparison uses strcoll (the server's locale), so uids are
-- compared with bytes_after, never with < or >. Numbers are doubles: the
-- counters stay exact below 2^53.
local zkey, hkey, mkey = KEYS[1], KEYS[2], KEYS[3]
local ties = ARGV[1]
local reach = ties == 'reach'

-- board_policy makes a read follow the policy the board's members were
-- written under (meta 'ties'), whatever the handle's: a read through a
-- handle of the other policy finds and returns the right members, as on
-- memory. Writes refuse a mismatch instead (load_meta).
local function board_policy()
	local t = redis.call('HGET', mkey, 'ties')
	if t then
		ties, reach = t, t == 'reach'
	end
end
local SEQ_TOP = 999999999999999
-- The meta fields, read once by load_meta (every write script calls it
-- first) and written back once by finish.
local meta_ties, seq, version

-- member_of returns uid's zset member, or nil when uid is not on the board.
local function member_of(uid)
	if reach then
		local m = redis.call('HGET', hkey, uid)
		if m then return m end
		return nil
	end
	if redis.call('ZSCORE', zkey, uid) then return uid end
	return nil
end

local function uid_of(member)
	if reach then return string.sub(member, 16) end
	return member
end

-- bytes_after reports whether a sorts after b in byte order.
local function bytes_after(a, b)
	for i = 1, math.min(#a, #b) do
		local x, y = string.byte(a, i), string.byte(b, i)
		if x ~= y then return x > y end
	end
	return #a > #b
end

-- load_meta reads the meta hash and returns an error reply when the board
-- holds members written under another tie policy, else nil.
local function load_meta()
	local m = redis.call('HMGET', mkey, 'ties', 'seq', 'version')
	meta_ties, seq, version = m[1], tonumber(m[2] or '0'), tonumber(m[3] or '0')
	if meta_ties and meta_ties ~= ties and redis.call('ZCARD', zkey) > 0 then
		return redis.error_reply('RANKTIES the board orders ties by ' .. meta_ties .. ', this handle by ' .. ties)
	end
	return nil
end

-- next_member returns uid's member for a new score (a new reach).
local function next_member(uid)
	if not reach then return uid end
	seq = seq + 1
	if seq > SEQ_TOP then error('rank: the reach sequence of the board is exhausted') end
	return string.format('%015d', SEQ_TOP - seq) .. uid
end

-- place gives uid (member old, or nil when new) score and a new reach.
local function place(uid, old, score)
	local m = next_member(uid)
	if old and old ~= m then redis.call('ZREM', zkey, old) end
	redis.call('ZADD', zkey, score, m)
	if reach then redis.call('HSET', hkey, uid, m) end
end

-- admits reports whether a newcomer ranks before the last member of a
-- board full under max (max <= 0: unlimited). Under 'reach' a newcomer
-- ranks after every member with its score.
local function admits(uid, score, max)
	if max <= 0 or redis.call('ZCARD', zkey) < max then return true end
	local last = redis.call('ZRANGE', zkey, 0, 0, 'WITHSCORES')
	local low = tonumber(last[2])
	if score ~= low then return score > low end
	return (not reach) and bytes_after(uid, last[1])
end

-- trim evicts the lowest members down to max (max <= 0: unlimited).
local function trim(max)
	if max <= 0 then return end
	local extra = redis.call('ZCARD', zkey) - max
	if extra <= 0 then return end
	local gone = redis.call('ZRANGE', zkey, 0, extra - 1)
	redis.call('ZREMRANGEBYRANK', zkey, 0, extra - 1)
	if not reach then return end
	for i = 1, #gone, 1000 do
		local uids = {}
		for j = i, math.min(i + 999, #gone) do uids[#uids + 1] = uid_of(gone[j]) end
		redis.call('HDEL', hkey, unpack(uids))
	end
end

-- update applies one update of uid (mode 'set', 'max' or 'min') and
-- returns changed, ranked, score, existed, previous.
local function update(uid, score, mode, max)
	local old = member_of(uid)
	if old then
		local prev = tonumber(redis.call('ZSCORE', zkey, old))
		if score == prev or (mode == 'max' and score < prev) or (mode == 'min' and score > prev) then
			return false, true, prev, true, prev
		end
		place(uid, old, score)
		return true, true, score, true, prev
	end
	if not admits(uid, score, max) then return false, false, 0, false, 0 end
	place(uid, nil, score)
	trim(max)
	return true, true, score, false, 0
end

-- finish records a write (in the meta hash, when it changed the board)
-- and returns the board version after it.
local function finish(changed)
	if not changed then return version end
	version = version + 1
	local v = string.format('%.0f', version)
	if meta_ties == ties then
		redis.call('HSET', mkey, 'seq', string.format('%.0f', seq), 'version', v)
	else
		redis.call('HSET', mkey, 'seq', string.format('%.0f', seq), 'version', v, 'ties', ties)
	end
	return version
end

-- fmtnum is the exact decimal text of x: integers up to 2^53 in plain
-- digits, else the shortest of %.15g, %.16g, %.17g that reads back as x
-- (json.go's formatNumber, byte for byte).
local function fmtnum(x)
	if x == 0 then return '0' end
	if x == math.floor(x) and x >= -9007199254740992 and x <= 9007199254740992 then
		return string.format('%.0f', x)
	end
	local s = string.format('%.15g', x)
	if tonumber(s) == x then return s end
	s = string.format('%.16g', x)
	if tonumber(s) == x then return s end
	return string.format('%.17g', x)
end

local function b2i(b) if b then return 1 end return 0 end

-- quote is s as a JSON string: `"` and `\` escaped, control bytes as
-- \u00XX (json.go's quote).
local function quote(s)
	return '"' .. (string.gsub(s, '[%z\1-\31"\\\127]', function(c)
		if c == '"' or c == '\\' then return '\\' .. c end
		return string.format('\\u%04x', string.byte(c))
	end)) .. '"'
end
