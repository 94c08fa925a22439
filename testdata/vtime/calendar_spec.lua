--!virtual-time
-- Scheduled logic over days of virtual time (docs/testing.md, "Virtual
-- time"). The clock starts at 2025-01-01 00:00 UTC (a Wednesday) and jumps to
-- the next timer whenever every task waits, so this file runs in
-- milliseconds and the same way every time.
local DAY = 86400000

local function utc(ms) return os.date("!%Y-%m-%d %H:%M:%S", math.floor(ms / 1000)) end

describe("virtual time", function()
  it("starts at 2025-01-01 00:00 UTC; sleep and os.time follow the clock", function()
    assert.is_true(shield.test.virtual())
    local t0 = shield.now_ms()
    assert.are.equal("2025-01-01 00:00:00", utc(t0))
    assert.are.equal(math.floor(t0 / 1000), os.time())
    shield.sleep(3 * DAY)
    assert.are.equal(t0 + 3 * DAY, shield.now_ms())
    assert.are.equal("2025-01-04", os.date("!%Y-%m-%d"))
  end)

  it("set_time moves to a date; advance moves by ms; neither goes back", function()
    shield.test.set_time("2025-03-09T23:59:00Z")
    assert.are.equal("2025-03-09 23:59:00", utc(shield.now_ms()))
    shield.test.advance(90 * 1000)
    assert.are.equal("2025-03-10 00:00:30", utc(shield.now_ms()))
    shield.test.set_time({ year = 2025, month = 3, day = 11 })
    assert.are.equal("2025-03-11 00:00:00", utc(shield.now_ms()))
    local ok, err = pcall(shield.test.set_time, "2025-01-01T00:00:00Z")
    assert.is_false(ok)
    assert.matches("cannot go back in time", err)
  end)

  it("resets the daily leaderboard at 00:00 UTC and archives the day", function()
    shield.test.set_time("2025-04-01T23:00:00Z")
    local board = shield.rank("daily_score", { reset = "daily", reset_time = "00:00" })
    board:update("alice", 300)
    board:update("bob", 200)
    shield.test.set_time("2025-04-01T23:59:59Z")
    assert.are.equal(2, board:count()) -- not yet
    shield.test.advance(1000) -- 00:00:00: the reset is due
    assert.are.equal(0, board:count())
    local archived = board:archive(shield.now_ms() - DAY)
    assert.are.equal(2, #archived)
    assert.are.equal("alice", archived[1].uid)
    assert.are.equal(300, archived[1].score)
    -- and the next night again
    board:update("carol", 50)
    shield.test.advance(DAY)
    assert.are.equal(0, board:count())
    assert.are.equal("carol", board:archive(shield.now_ms() - DAY)[1].uid)
  end)

  it("delivers a 7-day delayed message after exactly 7 days", function()
    local q = shield.delay_queue("weekly_reward")
    local t0 = shield.now_ms()
    q:push_at({ player = "p1", gold = 100 }, os.time() + 7 * 86400)
    assert.is_nil(q:pop()) -- not due
    local msg = q:pop(8 * DAY)
    assert.are.same({ player = "p1", gold = 100 }, msg)
    assert.are.equal(t0 + 7 * DAY, shield.now_ms())
  end)

  it("fires a weekly cron on Mondays at 00:00", function()
    shield.test.set_time("2025-05-01T12:00:00Z") -- a Thursday
    local fired = {}
    local s = shield.scheduler()
    s:cron("weekly_chest", "0 0 * * 1", function()
      local now = os.date("!*t")
      assert(now.wday == 2, "not a Monday") -- os.date's wday: Sunday is 1
      fired[#fired + 1] = os.date("!%Y-%m-%d %H:%M")
    end)
    shield.test.advance(21 * DAY)
    s:remove("weekly_chest")
    assert.are.same({ "2025-05-05 00:00", "2025-05-12 00:00", "2025-05-19 00:00" }, fired)
  end)

  it("expires a distributed lock's ttl and refills a limiter", function()
    local held = shield.distributed_mutex("vt_lock", { ttl = 300000, auto_extend = false })
    assert.is_true(held:acquire(0))
    local other
    shield.spawn(function()
      local m = shield.distributed_mutex("vt_lock", { ttl = 300000, auto_extend = false })
      other = { m:acquire(2 * 300000) }
      m:release()
    end)
    shield.sleep(3 * 300000)
    assert.are.same({ false, "lost" }, { held:release() })
    assert.are.same({ true }, other) -- after the first hold's 5 minutes ran out

    local limiter = shield.rate_limiter("vt_daily", { rate = 1 / 3600, burst = 1 }) -- one per hour
    assert.is_true(limiter:allow("p1"))
    assert.is_false(limiter:allow("p1"))
    local t0 = shield.now_ms()
    assert.is_true(limiter:wait("p1", 2 * 3600000))
    local waited = shield.now_ms() - t0
    assert.is_true(waited > 0 and waited <= 3600000, "waited " .. waited .. " ms")
  end)
end)
