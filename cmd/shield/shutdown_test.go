package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startShield starts `shield args...` and waits until it prints ready on
// stdout. The process is killed when the test ends.
func startShield(t *testing.T, ready string, args ...string) (*exec.Cmd, *bytes.Buffer, <-chan error) {
	t.Helper()
	cmd := exec.Command(shieldBin(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	seen := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), ready) {
				close(seen)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-seen:
	case <-time.After(20 * time.Second):
		t.Fatalf("shield did not print %q; stderr:\n%s", ready, stderr.String())
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, &stderr, exited
}

// SIGTERM ends `shield run` within the grace period plus 2 s even when the
// main chunk never yields; the exit status is non-zero and the running task
// is named.
func TestSIGTERMInterruptsATaskThatNeverYields(t *testing.T) {
	cfg := writeFile(t, "shield.yaml", "global:\n  runtime:\n    shutdown_grace: 500\n")
	script := writeFile(t, "spin.lua", "print('ready')\nlocal n = 0\nwhile true do n = n + 1 end\n")
	cmd, stderr, exited := startShield(t, "ready", "run", "--config", cfg, script)
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		took := time.Since(sent)
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() == 0 {
			t.Fatalf("exit %v after SIGTERM, want non-zero; stderr:\n%s", err, stderr.String())
		}
		if took > 500*time.Millisecond+2*time.Second+time.Second { // + process start-up slack
			t.Fatalf("took %v to stop", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("shield run ignored SIGTERM; stderr:\n%s", stderr.String())
	}
	out := stderr.String()
	if !strings.Contains(out, "interrupted after the 500ms shutdown grace period") || !strings.Contains(out, "spin.lua") {
		t.Fatalf("stderr does not name the interrupted task:\n%s", out)
	}
	if !strings.Contains(out, "spin.lua:3:") {
		t.Fatalf("stderr does not give the line it was interrupted at:\n%s", out)
	}
}

// A main chunk parked in a long sleep stops at SIGTERM after the grace too.
func TestSIGTERMStopsAParkedMainChunk(t *testing.T) {
	cfg := writeFile(t, "shield.yaml", "global:\n  runtime:\n    shutdown_grace: 300\n")
	script := writeFile(t, "nap.lua", "print('ready')\nshield.sleep(600000)\n")
	cmd, stderr, exited := startShield(t, "ready", "run", "--config", cfg, script)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatalf("shield run did not stop; stderr:\n%s", stderr.String())
	}
}

// stopWithin sends sig to cmd and waits up to bound for it to exit; it
// returns the exit status and how long that took, or fails the test (the
// process is killed by startShield's cleanup).
func stopWithin(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer, exited <-chan error, sig syscall.Signal, bound time.Duration) (int, time.Duration) {
	t.Helper()
	sent := time.Now()
	cmd.Process.Signal(sig)
	select {
	case err := <-exited:
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, time.Since(sent)
	case <-time.After(bound):
		t.Fatalf("shield run did not exit within %v of %v; stderr:\n%s", bound, sig, stderr.String())
		return 0, 0
	}
}

// A task spawned by the main chunk that spins after the main chunk returned
// does not keep the process up after SIGTERM: it is interrupted after the
// grace period and named with the line it spun at. (It used to run forever:
// the wait for the script's tasks asked the hogged loop for a count.)
func TestSIGTERMStopsASpawnedTaskThatSpinsAfterTheMainChunk(t *testing.T) {
	cfg := writeFile(t, "shield.yaml", "global:\n  runtime:\n    shutdown_grace: 500\n")
	script := writeFile(t, "spin.lua", "shield.spawn(function()\n  shield.sleep(200)\n  print('ready')\n  while true do end\nend)\n")
	cmd, stderr, exited := startShield(t, "ready", "run", "--config", cfg, script)
	time.Sleep(200 * time.Millisecond) // into the loop
	// The documented bound is the grace plus 2 s; 20 s tells a hang from a
	// slow machine.
	code, _ := stopWithin(t, cmd, stderr, exited, syscall.SIGTERM, 20*time.Second)
	out := stderr.String()
	if code != 1 {
		t.Fatalf("exit %d, want 1 (a task was interrupted); stderr:\n%s", code, out)
	}
	for _, want := range []string{
		"shield: stopping (terminated signal received); tasks get 500ms to finish",
		"shield: interrupted after the 500ms shutdown grace period: spawn (did not yield; at " + script + ":4)",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, out)
		}
	}
}

// A second signal ends the process at once, without waiting out the grace.
func TestASecondSignalStopsAtOnce(t *testing.T) {
	cfg := writeFile(t, "shield.yaml", "global:\n  runtime:\n    shutdown_grace: 600000\n")
	script := writeFile(t, "nap.lua", "shield.spawn(function() shield.sleep(600000) end)\nprint('ready')\n")
	cmd, stderr, exited := startShield(t, "ready", "run", "--config", cfg, script)
	// Two different signals, so that they cannot merge into one while
	// pending: whichever comes first starts the 10-minute grace, the other
	// ends it.
	cmd.Process.Signal(syscall.SIGTERM)
	code, _ := stopWithin(t, cmd, stderr, exited, syscall.SIGINT, 20*time.Second)
	if out := stderr.String(); code != 1 || !strings.Contains(out, "shield: stopping now (second signal: ") {
		t.Fatalf("exit %d; stderr:\n%s", code, out)
	}
}

// Stopping tasks parked in blocking calls after the main chunk returned:
// one stopping line, the right count, and each task named as waiting in its
// call at its line, never as one that did not yield.
func TestSIGTERMNamesParkedTasks(t *testing.T) {
	cfg := writeFile(t, "shield.yaml", "global:\n  runtime:\n    shutdown_grace: 300\n")
	script := writeFile(t, "nap.lua", "for i = 1, 2 do\n  shield.spawn(function()\n    shield.sleep(600000)\n  end)\nend\nprint('ready')\n")
	cmd, stderr, exited := startShield(t, "ready", "run", "--config", cfg, script)
	code, _ := stopWithin(t, cmd, stderr, exited, syscall.SIGTERM, 20*time.Second)
	out := stderr.String()
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, out)
	}
	if n := strings.Count(out, "shield: stopping"); n != 1 {
		t.Fatalf("%d stopping lines, want 1:\n%s", n, out)
	}
	parked := "spawn (waiting in shield.sleep at " + script + ":3)"
	for _, want := range []string{
		"tasks still alive after the shutdown grace period; interrupting them\" grace=300ms tasks=2\n",
		"count=2 tasks=\"" + parked + ", " + parked + "\"",
		"shield: interrupted after the 300ms shutdown grace period: " + parked + ", " + parked + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "did not yield") || strings.Contains(out, "running=") {
		t.Fatalf("parked tasks reported as running:\n%s", out)
	}
}
