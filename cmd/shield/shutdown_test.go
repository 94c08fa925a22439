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
