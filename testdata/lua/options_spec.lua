-- Options tables: every capability reports the same mistake the same way
-- (one reader in the runtime). Runs on every backend; every call below
-- raises before it reaches the backend.
local shield = require("shield")
local s = shield.scheduler()

local run = tostring(shield.now_ms()) .. tostring(math.random(1e9))
local function name(n) return "spec:" .. run .. ":" .. n end

local function raises(text, fn) assert.error_matches(fn, text, nil, true) end

-- Each entry calls one options-taking function with the options table it
-- is given; bad_type is an option of that function and the type it wants.
local takers = {
	{ "mutex", function(o) return shield.mutex(name("m"), o) end, "ttl", "number" },
	{ "distributed_mutex", function(o) return shield.distributed_mutex(name("dm"), o) end, "fair", "boolean" },
	{ "queue", function(o) return shield.queue(name("q"), o) end, "max_length", "number" },
	{ "reliable_queue", function(o) return shield.reliable_queue(name("rq"), o) end, "dead_letter", "table" },
	{ "consume", function(o) return shield.queue(name("cq")):consume("w", function() end, o) end, "concurrency", "number" },
	{ "rank", function(o) return shield.rank(name("r"), o) end, "ties", "string" },
	{ "update", function(o) return shield.rank(name("r")):update("a", 1, o) end, "mode", "string" },
	{ "rate_limiter", function(o) return shield.rate_limiter(name("l"), o) end, "rate", "number" },
	{ "cron", function(o) return s:cron(name("t"), "0 0 * * *", function() end, o) end, "on_error", "function" },
	{ "load", function(o) return s:load(".", o) end, "recursive", "boolean" },
}

describe("options tables", function()
	for _, t in ipairs(takers) do
		local fn_name, call, key, want = t[1], t[2], t[3], t[4]
		it(fn_name .. " reports a non-string key, an unknown key and a wrong type one way", function()
			raises("bad argument", function() call({ 1 }) end)
			raises("(option keys must be strings, got number 1)", function() call({ 1 }) end)
			raises('(unknown option "bogus" (known: ', function() call({ bogus = 1 }) end)
			raises('; did you mean "' .. key .. '"?)', function() call({ [key .. "x"] = 1 }) end)
			local wrong = want == "string" and 1 or "x"
			raises("(option " .. key .. ": " .. want .. " expected, got " .. type(wrong) .. ")", function()
				call({ [key] = wrong })
			end)
		end)
	end

	it("reports the first mistake by key name, whatever the table's order", function()
		for _ = 1, 20 do
			raises('unknown option "aaa"', function() shield.mutex(name("m"), { zzz = 1, ttl = "x", aaa = 1 }) end)
			raises("option retry: number expected", function() shield.mutex(name("m"), { zzz = 1, ttl = "x", retry = "y" }) end)
		end
	end)
end)
