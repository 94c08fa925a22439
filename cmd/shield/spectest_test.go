package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	if r.code != 1 || !strings.Contains(r.stdout, "1 passed, 0 failed, 2 errors") {
		t.Fatalf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"ERROR - hang blocks forever", "ERROR - hang spins forever", "timed out after 300ms", "ok - hang still runs"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("missing %q:\n%s", want, r.stdout)
		}
	}
	// The claim is that neither test hangs the run (one sleeps forever, one
	// never yields); 30 s is far below forever and above what a starved
	// machine needs (13.7 s seen at load average 13 for ~1 s of work).
	if took := time.Since(start); took > 30*time.Second {
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
		"ERROR - misc fails when a task it spawned raises", "a task spawned by the test failed", "spawned boom",
		"ERROR - misc reports a late failure of a spawned task\n    a task spawned by this test failed after it ended", "late boom",
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

const mixedSpec = `
describe("mix", function()
	it("passes", function() end)
	it("fails", function() assert.are.equal(1, 2) end)
	pending("later")
end)`

func TestSpecOutputTAP(t *testing.T) {
	r := runShield(t, context.Background(), "test", "--output", "tap", writeFile(t, "mix_spec.lua", mixedSpec))
	want := []string{"TAP version 13", "ok 1 - mix passes", "not ok 2 - mix fails", "  message: |", "expected: 1", "ok 3 - mix later # SKIP", "1..3"}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Fatalf("missing %q:\n%s", w, r.stdout)
		}
	}
	if r.code != 1 {
		t.Fatalf("exit %d", r.code)
	}
}

// The JUnit document has the elements and attributes the JUnit schema
// requires (testsuites > testsuite[name tests failures errors skipped time
// timestamp] > testcase[name classname time] with failure[message type] /
// skipped).
func TestSpecOutputJUnit(t *testing.T) {
	r := runShield(t, context.Background(), "test", "--output", "junit", writeFile(t, "mix_spec.lua", mixedSpec))
	var doc struct {
		XMLName xml.Name `xml:"testsuites"`
		Tests   string   `xml:"tests,attr"`
		Suites  []struct {
			Name      string `xml:"name,attr"`
			Tests     string `xml:"tests,attr"`
			Failures  string `xml:"failures,attr"`
			Errors    string `xml:"errors,attr"`
			Skipped   string `xml:"skipped,attr"`
			Time      string `xml:"time,attr"`
			Timestamp string `xml:"timestamp,attr"`
			Cases     []struct {
				Name      string `xml:"name,attr"`
				Classname string `xml:"classname,attr"`
				Time      string `xml:"time,attr"`
				Failure   *struct {
					Message string `xml:"message,attr"`
					Type    string `xml:"type,attr"`
				} `xml:"failure"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, r.stdout)
	}
	if len(doc.Suites) != 1 || doc.Tests != "3" {
		t.Fatalf("suites %d, tests %q", len(doc.Suites), doc.Tests)
	}
	s := doc.Suites[0]
	for attr, v := range map[string]string{"name": s.Name, "tests": s.Tests, "failures": s.Failures, "errors": s.Errors, "skipped": s.Skipped, "time": s.Time, "timestamp": s.Timestamp} {
		if v == "" {
			t.Fatalf("testsuite lacks %s", attr)
		}
	}
	if s.Tests != "3" || s.Failures != "1" || s.Skipped != "1" || len(s.Cases) != 3 {
		t.Fatalf("suite %+v", s)
	}
	for _, c := range s.Cases {
		if c.Name == "" || c.Classname == "" || c.Time == "" {
			t.Fatalf("testcase lacks a required attribute: %+v", c)
		}
	}
	if f := s.Cases[1].Failure; f == nil || f.Message == "" || f.Type == "" {
		t.Fatalf("failure: %+v", s.Cases[1])
	}
	if s.Cases[2].Skipped == nil {
		t.Fatal("the pending test is not skipped")
	}
}

// The test running when Ctrl-C arrives is listed as interrupted (an error),
// after the results so far.
func TestSpecInterruptListsTheRunningTest(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	spec := writeFile(t, "slow_spec.lua", `
describe("slow", function()
	it("passes first", function() end)
	it("waits", function()
		local f = assert(io.open(`+strconv.Quote(ready)+`, "w")); f:close()
		shield.sleep(60000)
	end)
	it("never starts", function() end)
end)`)
	cmd := exec.Command(shieldBin(t), "test", spec)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the spec never reached its waiting test")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("shield test did not stop on SIGINT")
	}
	out := stdout.String()
	if cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit %d:\n%s", cmd.ProcessState.ExitCode(), out)
	}
	for _, want := range []string{"ok - slow passes first\nINTERRUPTED - slow waits\n", "1 passed, 0 failed, 1 error (interrupted)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "never starts") {
		t.Fatalf("a test after the interrupted one ran:\n%s", out)
	}
}
