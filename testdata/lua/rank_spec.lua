-- shield.rank: leaderboards. Runs on every backend (memory, Redis,
-- Cluster, Sentinel); docs/rank.md is the contract checked here.
local shield = require("shield")

-- board names unique to this run, so repeated runs on one Redis never collide
local run = tostring(shield.now_ms()) .. tostring(math.random(1e9))
local n = 0
local function board(opts)
	n = n + 1
	return shield.rank("spec:" .. run .. ":" .. n, opts)
end

local function uids(entries)
	local out = {}
	for i, e in ipairs(entries) do out[i] = e.uid end
	return out
end

-- the error raised by fn(...), which must raise
local function err_of(fn, ...)
	local ok, err = pcall(fn, ...)
	assert(not ok, "expected an error")
	return tostring(err)
end

describe("shield.rank", function()
	it("keeps the spec's return shapes", function()
		local r = board()
		r:update("player_1", 1000)
		r:mupdate({ player_1 = 1000, player_2 = 950, player_3 = 1100 })
		assert.are.equal(2, r:position("player_1"))
		assert.are.equal(1000, r:score("player_1"))
		assert.are.same({
			{ uid = "player_3", score = 1100, rank = 1 },
			{ uid = "player_1", score = 1000, rank = 2 },
			{ uid = "player_2", score = 950, rank = 3 },
		}, r:top(10))
		assert.are.same({ { uid = "player_1", score = 1000, rank = 2 } }, r:range(2, 2))
		assert.are.same({ "player_3", "player_1" }, uids(r:range_by_score(1000, 1100)))
		assert.are.same({
			above = { { uid = "player_3", score = 1100, rank = 1 } },
			target = { uid = "player_1", score = 1000, rank = 2 },
			below = { { uid = "player_2", score = 950, rank = 3 } },
		}, r:around("player_1", 5))
		assert.are.equal(3, r:count())
		r:remove("player_1")
		assert.is_nil(r:position("player_1"))
		assert.is_nil(r:score("player_1"))
		r:clear()
		assert.are.equal(0, r:count())
		assert.are.same({}, r:top(10))
	end)

	it("returns the board version last from every write", function()
		local r = board()
		assert.are.equal(0, r:version())
		local score, changed, v = r:update("a", 10)
		assert.are.same({ 10, true, 1 }, { score, changed, v })
		score, changed, v = r:update("a", 10) -- same score: no change, same version
		assert.are.same({ 10, false, 1 }, { score, changed, v })
		assert.are.same({ 2, 2 }, { r:mupdate({ b = 20, c = 30, a = 10 }) })
		assert.are.same({ 0, 2 }, { r:mupdate({}) })
		assert.are.same({ 15, 3 }, { r:incr("a", 5) })
		assert.are.same({ 30, 15, 4 }, { r:swap("a", "c") })
		assert.are.same({ true, 5 }, { r:remove("b") })
		assert.are.same({ false, 5 }, { r:remove("b") })
		assert.are.same({ 2, 6 }, { r:clear() })
		assert.are.same({ 0, 6 }, { r:clear() })
		assert.are.equal(6, r:version())
	end)

	it("ranks higher scores first and equal scores by who reached them first", function()
		local r = board()
		r:update("late", 100)
		r:update("early", 50)
		r:update("early", 100) -- reaches 100 after late
		r:update("first", 100)
		r:update("late", 100) -- unchanged: keeps its place
		assert.are.same({ "late", "early", "first" }, uids(r:top(3)))
		r:update("late", 99)
		r:update("late", 100) -- left and came back: last among equals
		assert.are.same({ "early", "first", "late" }, uids(r:top(3)))
		r:mupdate({ z = 200, y = 200, x = 200 }) -- one mupdate: uid order
		assert.are.same({ "x", "y", "z", "early" }, uids(r:top(4)))
	end)

	it("ranks equal scores by descending uid with ties = \"uid\"", function()
		local r = board({ ties = "uid" })
		r:update("a", 5)
		r:update("c", 5)
		r:update("b", 5)
		assert.are.same({ "c", "b", "a" }, uids(r:top(3)))
	end)

	it("keeps integer scores exact across the whole double range", function()
		local r = board()
		local big = 2 ^ 53
		r:mupdate({ hi = big, lo = -big, mid = big - 1, frac = 0.1 })
		assert.are.equal(big, r:score("hi"))
		assert.are.equal(big - 1, r:score("mid"))
		assert.are.equal(-big, r:score("lo"))
		assert.are.equal(0.1, r:score("frac"))
		assert.are.same({ "hi", "mid", "frac", "lo" }, uids(r:top(4)))
		assert.are.same({ big, 2 }, { r:incr("mid", 1) })
		assert.are.equal(big, r:score("mid"))
	end)

	it("raises only with mode = \"max\" and lowers only with \"min\"", function()
		local r = board()
		assert.are.same({ 500, true, 1 }, { r:update("p", 500, { mode = "max" }) }) -- new: inserted
		assert.are.same({ 500, false, 1 }, { r:update("p", 400, { mode = "max" }) })
		assert.are.same({ 700, true, 2 }, { r:update("p", 700, { mode = "max" }) })
		assert.are.same({ 600, true, 3 }, { r:update("p", 600, { mode = "min" }) })
		assert.are.same({ 600, false, 3 }, { r:update("p", 650, { mode = "min" }) })
		assert.are.same({ 1, true, 4 }, { r:update("p", 1, { mode = "set" }) })
	end)

	it("counts from 0 with incr", function()
		local r = board()
		assert.are.same({ 5, 1 }, { r:incr("p", 5) })
		assert.are.same({ 2.5, 2 }, { r:incr("p", -2.5) })
		assert.are.same({ 2.5, 2 }, { r:incr("p", 0) }) -- no change, same version
		assert.are.equal(2.5, r:score("p"))
	end)

	it("reads ranges by rank and by score, inclusive", function()
		local r = board()
		local scores = {}
		for i = 1, 10 do scores["p" .. i] = i * 10 end
		r:mupdate(scores)
		assert.are.same({ "p8", "p7", "p6" }, uids(r:range(3, 5)))
		assert.are.same({ 3, 4, 5 }, { r:range(3, 5)[1].rank, r:range(3, 5)[2].rank, r:range(3, 5)[3].rank })
		assert.are.same({ "p1" }, uids(r:range(10, 20)))
		assert.are.same({}, r:range(11, 20))
		assert.are.same({ "p5", "p4", "p3" }, uids(r:range_by_score(30, 50)))
		assert.are.equal(6, r:range_by_score(30, 50)[1].rank)
		assert.are.equal(10, #r:range_by_score(-1 / 0, 1 / 0))
		assert.are.equal(10, #r:range_by_score(-math.huge, math.huge))
		assert.are.same({}, r:range_by_score(31, 39))
		assert.are.same({ "p10", "p9" }, uids(r:top(2)))
		assert.are.equal(10, #r:top(1000))
	end)

	it("reads a count or stop beyond any board as to the end", function()
		local r = board()
		for i = 1, 3 do r:update("e" .. i, i) end
		assert.are.equal(3, #r:top(math.huge))
		assert.are.equal(3, #r:top(2 ^ 60))
		assert.are.equal(2, #r:range(2, 2 ^ 60))
		assert.are.equal(0, #r:range(2 ^ 50, 2 ^ 60))
		local around = r:around("e2", math.huge)
		assert.are.equal(1, #around.above)
		assert.are.equal(1, #around.below)
	end)

	it("finds the neighbours with around, clipped at the ends", function()
		local r = board()
		r:mupdate({ a = 5, b = 4, c = 3, d = 2, e = 1 })
		local top = r:around("a", 2)
		assert.are.same({}, top.above)
		assert.are.same({ "b", "c" }, uids(top.below))
		local mid = r:around("c", 1)
		assert.are.same({ "b" }, uids(mid.above))
		assert.are.same({ uid = "c", score = 3, rank = 3 }, mid.target)
		assert.are.same({ "d" }, uids(mid.below))
		local all = r:around("e", 100)
		assert.are.same({ "a", "b", "c", "d" }, uids(all.above))
		assert.are.same({}, all.below)
		local none, why = r:around("nobody", 3)
		assert.is_nil(none)
		assert.are.equal("not_found", why)
	end)

	it("swaps two players' places atomically and moves nobody else", function()
		local r = board()
		r:mupdate({ a = 300, b = 200, c = 200, d = 100 }) -- b before c (uid order)
		assert.are.same({ 100, 300, 2 }, { r:swap("a", "d") })
		assert.are.same({ "d", "b", "c", "a" }, uids(r:top(4)))
		-- equal scores: the places themselves are exchanged
		local _, _, v = r:swap("b", "c")
		assert.are.equal(3, v)
		assert.are.same({ "d", "c", "b", "a" }, uids(r:top(4)))
		assert.are.same({ 300, 200, 200, 100 }, { r:score("d"), r:score("c"), r:score("b"), r:score("a") })
	end)

	it("never inserts anyone in a swap", function()
		local r = board()
		r:update("a", 1)
		local res, why = r:swap("a", "ghost")
		assert.is_nil(res)
		assert.are.equal("not_found", why)
		res, why = r:swap("ghost", "a", { expect = { ghost = 1, a = 1 } })
		assert.are.same({ nil, "not_found" }, { res, why })
		assert.are.equal(1, r:count())
		assert.is_nil(r:score("ghost"))
		assert.are.equal(1, r:version())
	end)

	it("refuses a versioned swap when either score moved", function()
		local r = board()
		r:mupdate({ a = 10, b = 20 })
		local sa, sb = r:score("a"), r:score("b")
		r:incr("b", 1) -- a concurrent change
		local res, why = r:swap("a", "b", { expect = { a = sa, b = sb } })
		assert.are.same({ nil, "version_conflict" }, { res, why })
		assert.are.same({ 10, 21 }, { r:score("a"), r:score("b") })
		local v = r:version()
		assert.are.same({ 21, 10, v + 1 }, { r:swap("a", "b", { expect = { a = 10, b = 21 } }) })
		assert.are.same({ "a", "b" }, uids(r:top(2)))
	end)

	it("reads a snapshot atomically with its version and count", function()
		local r = board()
		r:mupdate({ a = 3, b = 2, c = 1 })
		local s = r:snapshot(1, 2)
		assert.are.same({
			entries = { { uid = "a", score = 3, rank = 1 }, { uid = "b", score = 2, rank = 2 } },
			count = 3,
			version = r:version(),
		}, s)
		local _, v = r:incr("c", 10)
		assert.are.equal(v, r:snapshot(1, 1).version)
		assert.are.equal("c", r:snapshot(1, 1).entries[1].uid)
	end)

	it("keeps a full board at max_members by dropping the lowest", function()
		local r = board({ max_members = 3 })
		r:mupdate({ a = 30, b = 20, c = 10 })
		local v = r:version()
		-- not admitted: equal to the last (it would rank after it) or lower
		assert.are.same({ nil, false, v }, { r:update("d", 10) })
		assert.are.same({ nil, v }, { r:incr("e", 5) })
		assert.is_nil(r:score("d"))
		-- admitted: the last one goes
		assert.are.same({ 25, true, v + 1 }, { r:update("d", 25) })
		assert.are.same({ "a", "d", "b" }, uids(r:top(10)))
		assert.is_nil(r:score("c"))
		-- members already on the board stay when they drop
		r:update("a", -100)
		assert.are.same({ "d", "b", "a" }, uids(r:top(10)))
	end)

	it("keeps the best per player under concurrent max updates", function()
		local r = board()
		local best, running = {}, 0
		for t = 1, 8 do
			running = running + 1
			shield.spawn(function()
				for i = 1, 40 do
					local uid = "p" .. (i % 5)
					local dmg = (t * 7919 + i * 104729) % 1000
					best[uid] = math.max(best[uid] or 0, dmg)
					r:update(uid, dmg, { mode = "max" })
					if i % 7 == 0 then shield.sleep(0) end
				end
				running = running - 1
			end)
		end
		while running > 0 do shield.sleep(1) end
		for uid, b in pairs(best) do assert.are.equal(b, r:score(uid), uid) end
	end)

	it("keeps the multiset of scores under concurrent swaps", function()
		local r = board()
		local scores, want = {}, {}
		for i = 1, 12 do
			scores["p" .. i] = i * 10
			want[#want + 1] = i * 10
		end
		r:mupdate(scores)
		local running, applied, conflicts = 0, 0, 0
		for t = 1, 8 do
			running = running + 1
			shield.spawn(function()
				for i = 1, 30 do
					local a = "p" .. ((t * 5 + i) % 12 + 1)
					local b = "p" .. ((t * 3 + i * 7) % 12 + 1)
					if a ~= b then
						if i % 2 == 0 then
							assert(r:swap(a, b))
						else
							local sa, sb = r:score(a), r:score(b)
							shield.sleep(0) -- let the others move them
							local ok, why = r:swap(a, b, { expect = { [a] = sa, [b] = sb } })
							if ok then applied = applied + 1 else
								assert.are.equal("version_conflict", why)
								conflicts = conflicts + 1
							end
						end
					end
				end
				running = running - 1
			end)
		end
		while running > 0 do shield.sleep(1) end
		assert.is_true(applied > 0)
		assert.is_true(conflicts > 0)
		local s = r:snapshot(1, 100)
		assert.are.equal(12, s.count)
		local got = {}
		for i, e in ipairs(s.entries) do
			assert.are.equal(i, e.rank)
			got[#got + 1] = e.score
		end
		table.sort(got)
		assert.are.same(want, got)
	end)

	it("reads archives back by date and says when there is none", function()
		local r = board()
		assert.are.same({ nil, "not_found" }, { r:archive("20240501") })
		assert.are.same({ nil, "not_found" }, { r:archive(shield.now_ms()) })
	end)

	it("registers its reset with the scheduler, or refuses it without one", function()
		if not shield.scheduler then
			assert.error_matches(function() board({ reset = "daily" }) end,
				"shield.rank: reset needs the scheduler (scheduler.enabled: false?)", nil, true)
			return
		end
		board({ reset = "weekly", reset_time = "05:15" })
		local name = "rank:spec:" .. run .. ":" .. n .. ":reset"
		local s = shield.scheduler()
		local task = s:get(name) -- registered before shield.rank returned
		assert.truthy(task, name .. " not registered")
		assert.are.equal("15 5 * * 1", task:schedule())
		assert.is_true(task:info().distributed)
		local listed = false
		for _, t in ipairs(s:list()) do listed = listed or t:name() == name end
		assert.is_true(listed, name .. " not listed")
		assert.is_true(s:remove(name))
	end)

	it("does not reset on a manual trigger of its reset task", function()
		if not shield.scheduler then return end
		local r = board({ reset = "daily" })
		r:update("a", 1)
		local name = "rank:spec:" .. run .. ":" .. n .. ":reset"
		local s = shield.scheduler()
		assert.is_true(s:trigger(name))
		local deadline = shield.now_ms() + 5000
		while s:get(name):run_count() < 1 do
			assert.is_true(shield.now_ms() < deadline, "the manual run did not finish")
			shield.sleep(5)
		end
		local info = s:get(name):info()
		assert.are.equal(1, info.failed)
		assert.truthy(info.last_error:find("a periodic reset runs only at its scheduled firings", 1, true), info.last_error)
		assert.are.equal(1, r:count())
		assert.are.equal(1, r:score("a"))
		assert.is_true(s:remove(name))
	end)

	it("prints as shield.rank(name)", function()
		local r = shield.rank("spec:" .. run .. ":print")
		assert.are.equal('shield.rank("spec:' .. run .. ':print")', tostring(r))
	end)
end)

describe("shield.rank bad input", function()
	local r = board()
	r:update("a", 1)
	r:update("b", 2)
	local cases = {
		{ function() r:update("a", "10") end, "shield.rank: bad argument #3 to 'update' (number expected, got string)" },
		{ function() r:update("a", 0 / 0) end, "bad argument #3 to 'update' (score must be a finite number, got NaN)" },
		{ function() r:update("a", 1 / 0) end, "bad argument #3 to 'update' (score must be a finite number, got +Inf)" },
		{ function() r:update("a", -1 / 0) end, "bad argument #3 to 'update' (score must be a finite number, got -Inf)" },
		{ function() r:update(42, 1) end, "bad argument #2 to 'update' (string expected, got number)" },
		{ function() r:update("", 1) end, "bad argument #2 to 'update' (uid must not be empty)" },
		{ function() r:update("a", 1, { mode = "best" }) end, [[option mode must be "set", "max" or "min", got "best"]] },
		{ function() r:update("a", 1, { mod = "max" }) end, [[unknown option "mod" (known: mode)]] },
		{ function() r.update({}, "a", 1) end, "bad argument #1 to 'update' (shield.rank expected, got table (call it with ':'))" },
		{ function() r:incr("a", 0 / 0) end, "bad argument #3 to 'incr' (delta must be a finite number, got NaN)" },
		{ function() r:mupdate({ a = "x" }) end, [[bad argument #2 to 'mupdate' (score of "a" must be a finite number, got "x")]] },
		{ function() r:mupdate({ 5 }) end, "bad argument #2 to 'mupdate' (keys must be non-empty uid strings, got 1)" },
		{ function() r:mupdate({ a = 0 / 0 }) end, [[score of "a" must be a finite number, got NaN]] },
		{ function() r:top(0) end, "bad argument #2 to 'top' (n must be an integer >= 1, got 0)" },
		{ function() r:top(-3) end, "bad argument #2 to 'top' (n must be an integer >= 1, got -3)" },
		{ function() r:top(1.5) end, "bad argument #2 to 'top' (n must be an integer >= 1, got 1.5)" },
		{ function() r:top() end, "bad argument #2 to 'top' (number expected, got no value)" },
		{ function() r:around("a", 0) end, "bad argument #3 to 'around' (n must be an integer >= 1, got 0)" },
		{ function() r:range(5, 2) end, "bad argument #3 to 'range' (stop 2 is before start 5)" },
		{ function() r:range(0, 2) end, "bad argument #2 to 'range' (start must be an integer >= 1, got 0)" },
		{ function() r:snapshot(3, 1) end, "bad argument #3 to 'snapshot' (stop 1 is before start 3)" },
		{ function() r:range_by_score(10, 1) end, "bad argument #3 to 'range_by_score' (max 1 is below min 10)" },
		{ function() r:range_by_score(0 / 0, 1) end, "bad argument #2 to 'range_by_score' (min must not be NaN)" },
		{ function() r:position(7) end, "bad argument #2 to 'position' (string expected, got number)" },
		{ function() r:score(nil) end, "bad argument #2 to 'score' (string expected, got nil)" },
		{ function() r:remove({}) end, "bad argument #2 to 'remove' (string expected, got table)" },
		{ function() r:swap("a", "a") end, [[bad argument #3 to 'swap' (the two uids must differ, got "a" twice)]] },
		{ function() r:swap("a", "b", { expect = { a = 1 } }) end, [[expect must give the scores of both "a" and "b"]] },
		{ function() r:swap("a", "b", { expect = { a = 1, c = 2 } }) end, [[expect: key "c" is neither "a" nor "b"]] },
		{ function() r:swap("a", "b", { expect = { a = 1, b = 0 / 0 } }) end, [[expect: score of "b" must be a finite number, got NaN]] },
		{ function() r:swap("a", "b", { expected = {} }) end, [[unknown option "expected" (known: expect)]] },
		{ function() r:archive("2024-05-01") end, [[bad argument #2 to 'archive' (date must be "YYYYMMDD" (a calendar date) or Unix milliseconds, got "2024-05-01")]] },
		{ function() r:archive("20240231") end, [[got "20240231"]] },
		{ function() r:archive(true) end, "bad argument #2 to 'archive' (string or number expected, got boolean)" },
		{ function() shield.rank("") end, "shield: bad argument #1 to 'rank' (board name must not be empty)" },
		{ function() shield.rank(5) end, "shield: bad argument #1 to 'rank' (string expected, got number)" },
		{ function() shield.rank("}x") end, "bad argument #1 to 'rank' (board name must not start with '}')" },
		{ function() board({ size = 3 }) end, [[bad argument #2 to 'rank' (unknown option "size" (known: max_members, ties, reset, reset_time, archive, distributed))]] },
		{ function() board({ max_members = 0 }) end, "option max_members must be a whole number from 1 to 2147483647, got 0" },
		{ function() board({ ties = "name" }) end, [[option ties must be "reach" or "uid", got "name"]] },
		{ function() board({ reset = "hourly" }) end, [[option reset must be "daily", "weekly" or "monthly", got "hourly"]] },
		{ function() board({ reset = "daily", reset_time = "24:00" }) end, [[option reset_time must be "HH:MM" (UTC, 00:00 to 23:59), got "24:00"]] },
		{ function() board({ reset = "daily", reset_time = "5:00" }) end, [[got "5:00"]] },
		{ function() board({ reset = "daily", archive = "yes" }) end, "option archive: boolean expected, got string" },
		{ function() board({ reset_time = "00:00", archive = true }) end, "option archive, reset_time needs the reset option" },
	}
	for i, c in ipairs(cases) do
		it("raises a clear error, case " .. i, function()
			local msg = err_of(c[1])
			assert(msg:find(c[2], 1, true), "got: " .. msg .. "\nwant: " .. c[2])
			assert(msg:find("rank_spec.lua:%d+: "), "no position in: " .. msg)
		end)
	end
end)
