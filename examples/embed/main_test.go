package main

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The example end to end: build it, run the burst, wait for "serving",
// SIGTERM it: every request answered, every delayed reward granted, the kill
// announced once, a clean exit.
func TestEmbedExample(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "embed")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-config", "../../config/global.yaml", "-script", "game.lua", "-players", "100")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == "serving; SIGTERM to stop" {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, strings.Join(lines, "\n"))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop on SIGTERM")
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{"requests=200 failed=0", "rewards=100 notifications=1", "killed the world boss", "shutting down"} {
		if !strings.Contains(all, want) {
			t.Fatalf("output lacks %q:\n%s", want, all)
		}
	}
}
