-- shield.global(): KV, local cache and pub/sub. Runs on every backend.
local shield = require("shield")
local g = shield.global()

-- keys unique to this run, so repeated runs on one Redis never collide
local run = tostring(shield.now_ms()) .. tostring(math.random(1e9))
local function key(name) return "spec:" .. run .. ":" .. name end

local function wait_for(cond, ms)
	local deadline = shield.now_ms() + (ms or 5000)
	while not cond() do
		if shield.now_ms() > deadline then return false end
		shield.sleep(5)
	end
	return true
end

describe("shield.global KV", function()
	it("round-trips every kind of value", function()
		local values = {
			str = "hello", empty = "", num = 42, neg = -7.5, t = true, f = false,
			bin = "\0\1\255\254binary", utf8 = "中文",
			tbl = { hp = 10000, status = "alive", drops = { "sword", "shield" }, nested = { deep = { x = 1 } } },
			sparse = { [1] = "a", [3] = "c", [-1] = "neg" },
			dollar = { ["$bin"] = "not binary" },
			strkey = { ["1"] = "string one", [1] = "number one" },
		}
		for name, v in pairs(values) do
			assert.is_true(g:set(key(name), v))
			assert.are.same(v, g:get(key(name)), name)
		end
	end)

	it("returns nil for missing keys and deletes", function()
		assert.is_nil(g:get(key("missing")))
		g:set(key("del"), "x")
		assert.is_true(g:delete(key("del")))
		assert.is_false(g:delete(key("del")))
		assert.is_nil(g:get(key("del")))
	end)

	it("treats set(key, nil) as delete", function()
		g:set(key("nil"), 1)
		g:set(key("nil"), nil)
		assert.is_nil(g:get(key("nil")))
	end)

	it("expires values after their ttl", function()
		g:set(key("ttl"), "short", 1000)
		g:set(key("long"), "long", 60000)
		assert.are.equal("short", g:get(key("ttl")))
		assert.is_true(wait_for(function() return g:get(key("ttl")) == nil end))
		assert.are.equal("long", g:get(key("long")))
	end)

	it("sets and gets many keys at once", function()
		assert.is_true(g:mset({ [key("m1")] = "v1", [key("m2")] = { n = 2 } }))
		local values = g:mget(key("m1"), key("m2"), key("m3"))
		assert.are.equal("v1", values[key("m1")])
		assert.are.same({ n = 2 }, values[key("m2")])
		assert.is_nil(values[key("m3")])
		local again = g:mget({ key("m1"), key("m2") })
		assert.are.equal("v1", again[key("m1")])
	end)

	it("counts atomically with incr and decr", function()
		assert.are.equal(1, g:incr(key("counter")))
		assert.are.equal(6, g:incr(key("counter"), 5))
		assert.are.equal(4, g:decr(key("counter"), 2))
		assert.are.equal(3, g:decr(key("counter")))
		assert.are.equal(3.5, g:incr(key("counter"), 0.5))
		assert.are.equal(3.5, g:get(key("counter")))
		g:set(key("fromset"), 10)
		assert.are.equal(11, g:incr(key("fromset")))
	end)

	it("counts exactly from many concurrent tasks", function()
		-- The tasks interleave on every backend (the yield after each incr
		-- lets the others in), and every increment counts.
		local done, order = 0, {}
		for t = 1, 20 do
			shield.spawn(function()
				for _ = 1, 10 do
					g:incr(key("concurrent"))
					order[#order + 1] = t
					shield.sleep(0)
				end
				done = done + 1
			end)
		end
		assert.is_true(wait_for(function() return done == 20 end))
		assert.are.equal(200, g:get(key("concurrent")))
		local switches = 0
		for i = 2, #order do
			if order[i] ~= order[i - 1] then switches = switches + 1 end
		end
		assert.is_true(switches > 20, "the tasks did not interleave (" .. switches .. " switches)")
	end)

	it("refuses to incr a value that is not a number", function()
		g:set(key("word"), "abc")
		assert.error_matches(function() g:incr(key("word")) end, "shield.global:incr: .*not a number")
		assert.are.equal("abc", g:get(key("word")))
	end)

	-- One failure, one message, at the caller's line, on every backend:
	-- also when the line is in the frame that resumed the call (a Redis call
	-- completes after its task yielded, when the coroutine that made it has
	-- no parent any more).
	it("reports an incr overflow with the same message and line everywhere", function()
		local k = key("huge")
		g:set(k, 1.7976931348623157e308)
		local line = debug.getinfo(1, "l").currentline
		local ok1, e1 = pcall(g.incr, g, k, 1e300)
		local ok2, e2 = pcall(function() return g:incr(k, 1e300) end)
		local ok3, e3 = pcall(function() local v = g:incr(k, 1e300) return v end)
		local want = 'shield.global:incr: kv: increment would produce NaN or Infinity: "' .. k .. '"'
		assert.is_false(ok1 or ok2 or ok3)
		assert.are.equal("global_spec.lua:" .. (line + 1) .. ": " .. want, e1:match("[^/]*$"))
		assert.are.equal("global_spec.lua:" .. (line + 2) .. ": " .. want, e2:match("[^/]*$"))
		assert.are.equal("global_spec.lua:" .. (line + 3) .. ": " .. want, e3:match("[^/]*$"))
		assert.are.equal(1.7976931348623157e308, g:get(k))
	end)

	it("rejects bad arguments clearly", function()
		assert.error_matches(function() g:set(42, "v") end,
			"shield.global: bad argument #2 to 'set' %(string expected, got number%)")
		assert.error_matches(function() g:set("", "v") end, "key must not be empty")
		assert.error_matches(function() g:set(key("x"), "v", -5) end, "ttl must be a positive number")
		assert.error_matches(function() g:set(key("x"), function() end) end, "cannot encode function")
		assert.error_matches(function() g:get() end, "bad argument #2 to 'get'")
		assert.error_matches(function() g:mset("nope") end, "bad argument #2 to 'mset' %(table expected")
		assert.error_matches(function() g:mset({ [1] = "v" }) end, "keys must be non%-empty strings")
		assert.error_matches(function() g:incr(key("x"), "many") end, "bad argument #3 to 'incr'")
		assert.error_matches(function() g.get("k") end, "call it with ':'")
		local cyclic = {}
		cyclic.self = cyclic
		assert.error_matches(function() g:set(key("cyc"), cyclic) end, "cyclic")
	end)
end)

describe("shield.global local cache", function()
	it("serves cached reads until a write evicts them", function()
		g:set(key("hot"), "v1")
		local before = g:cache_stats()
		assert.is_true(before.enabled)
		assert.are.equal("v1", g:get_cached(key("hot"), 60000)) -- a miss fills the cache
		assert.are.equal("v1", g:get_cached(key("hot"), 60000)) -- served from it
		local after = g:cache_stats()
		assert.are.equal(before.misses + 1, after.misses)
		assert.are.equal(before.hits + 1, after.hits)
		g:set(key("hot"), "v2")
		assert.are.equal("v2", g:get_cached(key("hot"), 60000))
		assert.are.equal(after.misses + 1, g:cache_stats().misses) -- the write evicted it
	end)

	it("invalidates on demand", function()
		g:set(key("inv"), "a")
		assert.are.equal("a", g:get_cached(key("inv")))
		g:invalidate(key("inv"))
		g:set(key("inv"), "b")
		assert.are.equal("b", g:get_cached(key("inv")))
	end)

	it("returns nil for a missing key", function()
		assert.is_nil(g:get_cached(key("nothing")))
	end)

	it("rejects a bad ttl", function()
		assert.error_matches(function() g:get_cached(key("x"), 0) end, "ttl must be a positive number")
	end)
end)

describe("shield.global pub/sub", function()
	it("delivers table messages to subscribers", function()
		local got = {}
		local sub = g:subscribe(key("notice"), function(channel, message)
			got[#got + 1] = { channel = channel, message = message }
		end)
		assert.is_true(g:publish(key("notice"), { text = "Hello!" }) >= 1)
		assert.is_true(wait_for(function() return #got == 1 end))
		assert.are.equal(key("notice"), got[1].channel)
		assert.are.same({ text = "Hello!" }, got[1].message)
		sub:unsubscribe()
	end)

	it("delivers messages in order to a callback that blocks", function()
		local got = {}
		local sub = g:subscribe(key("ordered"), function(_, message)
			shield.sleep(2)
			got[#got + 1] = message
		end)
		for i = 1, 5 do g:publish(key("ordered"), i) end
		assert.is_true(wait_for(function() return #got == 5 end))
		assert.are.same({ 1, 2, 3, 4, 5 }, got)
		sub:unsubscribe()
	end)

	it("matches patterns", function()
		local got = {}
		local sub = g:psubscribe(key("player") .. ".*", function(channel, message, pattern)
			got[#got + 1] = channel
		end)
		g:publish(key("player") .. ".1", "a")
		g:publish(key("other") .. ".1", "b")
		g:publish(key("player") .. ".2", "c")
		assert.is_true(wait_for(function() return #got == 2 end))
		assert.are.same({ key("player") .. ".1", key("player") .. ".2" }, got)
		sub:unsubscribe()
	end)

	it("stops delivering after unsubscribe", function()
		local count = 0
		local sub = g:subscribe(key("unsub"), function() count = count + 1 end)
		g:publish(key("unsub"), "one")
		assert.is_true(wait_for(function() return count == 1 end))
		sub:unsubscribe()
		sub:unsubscribe() -- idempotent
		-- Redis may still count the subscription until its connection's
		-- UNSUBSCRIBE arrives (a loaded machine published first once); it
		-- delivers nothing either way.
		g:publish(key("unsub"), "two")
		assert.is_true(wait_for(function() return g:publish(key("unsub"), "three") == 0 end))
		shield.sleep(20)
		assert.are.equal(1, count)
	end)

	it("keeps consuming after a callback raises", function()
		local seen = 0
		local sub = g:subscribe(key("raise"), function(_, message)
			seen = seen + 1
			if message == "bad" then error("callback failure") end
		end)
		g:publish(key("raise"), "bad")
		g:publish(key("raise"), "good")
		assert.is_true(wait_for(function() return seen == 2 end))
		sub:unsubscribe()
	end)

	it("reports zero receivers with nobody listening", function()
		assert.are.equal(0, g:publish(key("nobody"), "x"))
	end)

	it("rejects bad arguments", function()
		assert.error_matches(function() g:subscribe(key("c"), "notfn") end, "bad argument #3 to 'subscribe' %(function expected")
		assert.error_matches(function() g:publish(key("c"), function() end) end, "cannot encode function")
	end)
end)

describe("shield.global ttl rounding", function()
	it("rounds a fractional ttl up instead of storing without expiry", function()
		local k = "spec:" .. run .. ":frac"
		g:set(k, "brief", 0.5)
		assert.is_true(wait_for(function() return g:get(k) == nil end))
	end)
end)
