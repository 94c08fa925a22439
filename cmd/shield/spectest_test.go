package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A test that blocks forever (or never yields) fails at --timeout; the
// others still run.
func TestSpecTimeout(t *testing.T) {
	spec := writeFile(t, "hang_spec.lua", `
describe("hang", function()
	it("blocks forever", function() shield.sleep(math.huge) end)
	it("spins forever", function() while true do end end)
	it("still runs", function() assert.is_true(true) end)
end)`)
	start := time.Now()
	r := runShield(t, context.Background(), "test", "--timeout", "300ms", spec)
	if r.code != 1 || !strings.Contains(r.stdout, "1 passed, 2 failed") {
		t.Fatalf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"FAIL - hang blocks forever", "FAIL - hang spins forever", "timed out after 300ms", "ok - hang still runs"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("missing %q:\n%s", want, r.stdout)
		}
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Fatalf("took %v", took)
	}
}

// Ctrl-C prints the results so far and an interrupted summary.
func TestSpecInterruptPrintsPartialSummary(t *testing.T) {
	spec := writeFile(t, "slow_spec.lua", `
describe("slow", function()
	it("passes first", function() end)
	it("waits", function() print("waiting"); io.stdout:flush(); shield.sleep(60000) end)
end)`)
	cmd, _, exited := startShield(t, "waiting", "test", spec)
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("shield test did not stop on SIGINT")
	}
	if cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit %d", cmd.ProcessState.ExitCode())
	}
}

func TestSpecRunnerReports(t *testing.T) {
	spec := writeFile(t, "misc_spec.lua", `
describe("misc", function()
	it("fails when a task it spawned raises", function()
		shield.spawn(function() shield.sleep(1); error("spawned boom") end)
		shield.sleep(20)
	end)
	it("reports a late failure of a spawned task", function()
		shield.spawn(function() shield.sleep(30); error("late boom") end)
	end)
	it("names unknown assertions", function() assert.are.banana(1, 1) end)
	it("waits for late tasks", function() shield.sleep(60) end)
end)
describe("background", function()
	it("leaves a task running", function() shield.spawn(function() shield.sleep(600000) end) end)
end)`)
	start := time.Now()
	r := runShield(t, context.Background(), "test", spec)
	out := r.stdout
	for _, want := range []string{
		"FAIL - misc fails when a task it spawned raises", "a task spawned by the test failed", "spawned boom",
		"FAIL - misc reports a late failure of a spawned task\n    a task spawned by this test failed after it ended", "late boom",
		"unknown assertion 'banana' (assert.are.banana)",
		"ok - background leaves a task running",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q:\n%s", want, out)
		}
	}
	// The background task costs no shutdown grace (5 s by default).
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("took %v: the file's background task held up the run", took)
	}
}

func TestSpecSyntaxErrorIsReported(t *testing.T) {
	spec := writeFile(t, "broken_spec.lua", "describe('x', function()\n  it('y', function() end\nend)\n")
	r := runShield(t, context.Background(), "test", spec)
	if r.code != 1 || !strings.Contains(r.stdout, "broken_spec.lua") || !strings.Contains(r.stdout, "line:3") && !strings.Contains(r.stdout, ":3:") {
		t.Fatalf("exit %d:\n%s", r.code, r.stdout)
	}
	if strings.Contains(r.stdout, "stack traceback:\n") {
		t.Fatalf("an empty traceback was printed:\n%s", r.stdout)
	}
}
