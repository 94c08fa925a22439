-- shield.rate_limiter: token bucket (decided in local memory; on Redis the
-- process's share of a global rate, the whole of it for a process alone on
-- a key) and sliding window (one Redis script per allow on Redis). Runs on
-- every backend with the same results.
local shield = require("shield")

local run = tostring(shield.now_ms()) .. tostring(math.random(1e9))
local function name(n) return "spec:" .. run .. ":" .. n end

describe("token bucket", function()
	it("allows the burst at once, then rejects", function()
		local l = shield.rate_limiter(name("burst"), { rate = 0.001, burst = 3 })
		assert.are.equal(3, l:remaining("ip1"))
		for _ = 1, 3 do
			assert.is_true(l:allow("ip1"))
		end
		local ok, why = l:allow("ip1")
		assert.is_false(ok)
		assert.are.equal("rejected", why)
		assert.are.equal(0, l:remaining("ip1"))
		shield.sleep(50) -- the key's first report (Redis) must not add tokens
		assert.is_false((l:allow("ip1")))
		assert.is_true(l:allow("ip2"), "every key is its own bucket")
	end)

	it("takes n tokens at once, all or nothing", function()
		local l = shield.rate_limiter(name("n"), { rate = 0.001, burst = 5 })
		assert.is_true(l:allow("k", 3))
		local ok, why = l:allow("k", 3)
		assert.is_false(ok)
		assert.are.equal("rejected", why)
		assert.are.equal(2, l:remaining("k"))
		assert.is_false((l:allow("k", 6)), "more than the burst never fits")
		assert.is_true(l:allow("k", 2))
	end)

	it("refills at the rate", function()
		-- one token per 500 ms: a stalled loop between the first two calls
		-- does not refill it, and the refill comes no sooner than the rate
		local l = shield.rate_limiter(name("refill"), { rate = 2, burst = 1 })
		local t0 = shield.now_ms()
		assert.is_true(l:allow("k"))
		assert.is_false((l:allow("k")))
		local deadline = t0 + 5000
		while not l:allow("k") do
			assert.is_true(shield.now_ms() < deadline, "no refill within 5 s")
			shield.sleep(5)
		end
		assert.is_true(shield.now_ms() - t0 >= 499, "refilled faster than the rate")
	end)

	it("defaults burst to rate", function()
		assert.are.equal(20, shield.rate_limiter(name("default"), { rate = 20 }):remaining("k"))
	end)

	it("waits for a token without blocking other tasks", function()
		-- one token per second, so the wait really waits (a faster rate may
		-- refill before the call and answer without yielding)
		local l = shield.rate_limiter(name("wait"), { rate = 1, burst = 1 })
		assert.is_true(l:allow("k"))
		local other = false
		shield.spawn(function() other = true end)
		assert.is_true(l:wait("k", 5000))
		assert.is_true(other)
	end)

	it("times out a wait", function()
		local l = shield.rate_limiter(name("timeout"), { rate = 0.001, burst = 1 })
		assert.is_true(l:wait("k", 1000))
		local t0 = shield.now_ms()
		local ok, why = l:wait("k", 30)
		assert.is_false(ok)
		assert.are.equal("timeout", why)
		assert.is_true(shield.now_ms() - t0 >= 29)
	end)

	it("is one limiter per name: the same options give the same limiter, others raise", function()
		local a = shield.rate_limiter(name("same"), { rate = 0.001, burst = 1 })
		local b = shield.rate_limiter(name("same"), { rate = 0.001, burst = 1 })
		assert.is_true(a:allow("k"))
		assert.is_false((b:allow("k")))
		assert.error_matches(function() shield.rate_limiter(name("same"), { rate = 1, burst = 1 }) end, "exists with")
	end)

	it("counts its decisions", function()
		local l = shield.rate_limiter(name("stats"), { rate = 0.001, burst = 1 })
		l:allow("a"); l:allow("a"); l:allow("b")
		local st = l:stats()
		assert.are.equal("token_bucket", st.algorithm)
		assert.are.equal(2, st.allowed)
		assert.are.equal(1, st.rejected)
		assert.are.equal(1, st.rejected_today)
		assert.are.equal(2, st.active)
		assert.are.equal(0, st.degraded)
		assert.are.equal(1, st.processes)
	end)
end)

describe("sliding window", function()
	local function sw(n, window, max)
		return shield.rate_limiter(name("sw:" .. n), { window = window, max_requests = max, sliding = true })
	end

	it("allows max_requests per window, then rejects", function()
		local l = sw("max", 60000, 3)
		assert.are.equal(3, l:remaining("k"))
		for _ = 1, 3 do
			assert.is_true(l:allow("k"))
		end
		local ok, why = l:allow("k")
		assert.is_false(ok)
		assert.are.equal("rejected", why)
		assert.are.equal(0, l:remaining("k"))
		assert.is_true(l:allow("other"))
	end)

	it("takes n requests at once, all or nothing", function()
		local l = sw("n", 60000, 5)
		assert.is_true(l:allow("k", 4))
		assert.is_false((l:allow("k", 2)))
		assert.is_false((l:allow("k", 6)), "more than max_requests never fits")
		assert.is_true(l:allow("k", 1))
	end)

	it("slides: a request leaves the window after window ms", function()
		local l = sw("slide", 100, 2)
		assert.is_true(l:allow("k"))
		assert.is_true(l:allow("k"))
		assert.is_false((l:allow("k")))
		shield.sleep(150)
		assert.is_true(l:allow("k"))
	end)

	it("is exact under concurrent tasks", function()
		local l = sw("concurrent", 60000, 5)
		local allowed, done = 0, 0
		for _ = 1, 20 do
			shield.spawn(function()
				if l:allow("k") then allowed = allowed + 1 end
				done = done + 1
			end)
		end
		while done < 20 do shield.sleep(5) end
		assert.are.equal(5, allowed)
	end)

	it("waits until the window has room", function()
		local l = sw("wait", 100, 1)
		-- t0 before the first request, so the window's promise (no two
		-- requests in any 100 ms) bounds the second one from below; 99 for
		-- the rounding of two clocks to whole ms
		local t0 = shield.now_ms()
		assert.is_true(l:allow("k"))
		assert.is_true(l:wait("k", 5000))
		assert.is_true(shield.now_ms() - t0 >= 99, "two requests within one window")
	end)

	it("times out a wait", function()
		local l = sw("timeout", 60000, 1)
		assert.is_true(l:allow("k"))
		local ok, why = l:wait("k", 30)
		assert.is_false(ok)
		assert.are.equal("timeout", why)
	end)

	it("counts its decisions", function()
		local l = sw("stats", 60000, 1)
		l:allow("k"); l:allow("k")
		local st = l:stats()
		assert.are.equal("sliding_window", st.algorithm)
		assert.are.equal(1, st.allowed)
		assert.are.equal(1, st.rejected)
		assert.are.equal(1, st.rejected_today)
		assert.are.equal(0, st.unavailable)
	end)
end)

describe("bad input", function()
	it("raises for impossible options and keys", function()
		local function raises(pattern, fn) assert.error_matches(fn, pattern, nil, true) end
		raises("option rate: number expected, got string", function() shield.rate_limiter(name("bad"), { rate = "100" }) end)
		raises("option burst must be a finite number >= 1", function() shield.rate_limiter(name("bad"), { rate = 10, burst = 0 }) end)
		raises("option window must be a number of milliseconds from 1 to 1e+12, got 0", function()
			shield.rate_limiter(name("bad"), { window = 0, max_requests = 1, sliding = true })
		end)
		raises('option algorithm must be "token_bucket" or "sliding_window"', function()
			shield.rate_limiter(name("bad"), { rate = 1, algorithm = "fixed_window" })
		end)
		raises('unknown option "rte"', function() shield.rate_limiter(name("bad"), { rte = 1 }) end)
		local l = shield.rate_limiter(name("badkey"), { rate = 1 })
		raises("bad argument #2 to 'allow' (string expected, got number)", function() l:allow(123) end)
		local w = shield.rate_limiter(name("badkey_sw"), { window = 1000, max_requests = 1, sliding = true })
		raises("bad argument #2 to 'allow' (string expected, got table)", function() w:allow({}) end)
	end)
end)
