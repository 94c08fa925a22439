package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// shield test --virtual-time runs a spec that waits out a month of
// scheduled logic in well under the wall time it names.
func TestSpecVirtualTimeFlag(t *testing.T) {
	spec := writeFile(t, "month_spec.lua", `
describe("a month", function()
  it("runs a daily cron 30 times", function()
    local n = 0
    shield.scheduler():cron("daily_bonus", "0 0 * * *", function() n = n + 1 end)
    shield.test.set_time("2025-01-31T00:00:01Z")
    assert.are.equal(30, n)
    assert.are.equal("2025-01-31", os.date("!%Y-%m-%d"))
  end)
end)`)
	// Without the flag the clock is real: set_time says what it needs.
	// (This first run also builds the binary, outside the timed part.)
	r := runShield(t, context.Background(), "test", spec)
	if r.code != 1 || !strings.Contains(r.stdout, "shield.test.set_time needs virtual time: run shield test --virtual-time") {
		t.Fatalf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	start := time.Now()
	r = runShield(t, context.Background(), "test", "--virtual-time", spec)
	if r.code != 0 || !strings.Contains(r.stdout, "ok - a month runs a daily cron 30 times") || !strings.Contains(r.stdout, "1 passed, 0 failed") {
		t.Fatalf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	took := time.Since(start)
	t.Logf("a virtual month: %v wall time, process start included", took)
	if took > 10*time.Second {
		t.Fatalf("a virtual month took %v", took)
	}
}

// On Redis --virtual-time is a usage error that says why.
func TestSpecVirtualTimeFlagOnRedis(t *testing.T) {
	cfg, _ := redisConfigFile(t)
	spec := writeFile(t, "x_spec.lua", `it("x", function() end)`)
	r := runShield(t, context.Background(), "test", "--config", cfg, "--virtual-time", spec)
	if r.code != 2 || !strings.Contains(r.stderr, "virtual time needs the memory backend") {
		t.Fatalf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
