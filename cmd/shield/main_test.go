package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testlog"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// shieldBin builds the shield command once per test binary.
func shieldBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shield-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "shield")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type result struct {
	code           int
	stdout, stderr string
}

func runShield(t *testing.T, ctx context.Context, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(ctx, shieldBin(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, stdout.String(), stderr.String()}
}

func TestRunExitsNonZeroWithATraceback(t *testing.T) {
	script := writeFile(t, "fail.lua", "local function boom()\n  shield.sleep(1)\n  error('kaboom')\nend\nboom()\n")
	r := runShield(t, context.Background(), "run", script)
	if r.code != 1 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"fail.lua:3: kaboom", "stack traceback:", "fail.lua:3: in function 'boom'", "fail.lua:5: in main chunk"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

func TestRunPassesArgumentsAndEndsWhenIdle(t *testing.T) {
	script := writeFile(t, "args.lua", "local a, b = ...\nprint(a .. '+' .. b, arg[1], arg[0] ~= nil)\nshield.spawn(function() shield.sleep(20); print('spawned done') end)\n")
	r := runShield(t, context.Background(), "run", script, "x", "y")
	if r.code != 0 || r.stdout != "x+y\tx\ttrue\nspawned done\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// A script with a subscription stays up until SIGTERM, then stops cleanly.
func TestRunStaysUpWhileSubscribedUntilSIGTERM(t *testing.T) {
	script := writeFile(t, "serve.lua", "shield.global():subscribe('x', function() end)\nprint('subscribed')\n")
	cmd := exec.Command(shieldBin(t), "run", script)
	var stdout, stderr testlog.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stdout.String(), "subscribed") {
		select {
		case err := <-done:
			t.Fatalf("exited while subscribed: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("script did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("exited while subscribed: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("did not stop on SIGTERM")
	}
}

func TestRunRejectsABadConfigNamingTheLine(t *testing.T) {
	cfg := writeFile(t, "bad.yaml", "global:\n  cache:\n    max_sise: 5\n")
	script := writeFile(t, "ok.lua", "")
	r := runShield(t, context.Background(), "run", "--config", cfg, script)
	if r.code != 2 || !strings.Contains(r.stderr, "bad.yaml:3") || !strings.Contains(r.stderr, "max_sise") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestTestCommandCountsAndFails(t *testing.T) {
	spec := writeFile(t, "x_spec.lua", `describe("d", function()
		it("passes", function() shield.sleep(1); assert.are.equal(1, 1) end)
		it("fails", function() assert.are.equal(1, 2) end)
		pending("later")
	end)`)
	r := runShield(t, context.Background(), "test", spec)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 1 || lines[len(lines)-1] != "1 passed, 1 failed, 1 skipped" {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// Two `shield run` processes on one Redis: pub/sub messages cross processes
// and a write in one process evicts the key from the other's local cache.
func TestTwoProcessesShareCacheAndPubSub(t *testing.T) {
	url := testredis.URL(t)
	prefix := testredis.Prefix(t)
	cfg := writeFile(t, "redis.yaml", fmt.Sprintf("global:\n  redis:\n    url: %q\n    prefix: %q\n", url, prefix))
	listener := writeFile(t, "listener.lua", `
		local g, run = shield.global(), ...
		local got = {}
		local sub = g:subscribe(run .. ":chan", function(_, msg) got[#got + 1] = msg.n end)
		assert(g:get_cached(run .. ":cfg", 600000) == "v1")
		g:set(run .. ":ready", true)
		local deadline = shield.now_ms() + 15000
		while #got < 3 or g:get_cached(run .. ":cfg", 600000) ~= "v2" do
			assert(shield.now_ms() < deadline, "timed out with " .. #got .. " messages")
			shield.sleep(10)
		end
		print("messages " .. table.concat(got, ","))
		sub:unsubscribe()`)
	writer := writeFile(t, "writer.lua", `
		local g, run = shield.global(), ...
		local deadline = shield.now_ms() + 15000
		while not g:get(run .. ":ready") do
			assert(shield.now_ms() < deadline, "listener never got ready")
			shield.sleep(10)
		end
		for i = 1, 3 do g:publish(run .. ":chan", { n = i }) end
		g:set(run .. ":cfg", "v2")`)
	run := "mp"
	client := testredis.Standalone(t)
	if err := client.Set(context.Background(), prefix+"global:"+run+":cfg", `"v1"`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var lr, wr result
	wg.Add(2)
	go func() { defer wg.Done(); lr = runShield(t, ctx, "run", "--config", cfg, listener, run) }()
	go func() { defer wg.Done(); wr = runShield(t, ctx, "run", "--config", cfg, writer, run) }()
	wg.Wait()
	if lr.code != 0 || wr.code != 0 {
		t.Fatalf("listener exit %d:\n%s\nwriter exit %d:\n%s", lr.code, lr.stderr, wr.code, wr.stderr)
	}
	if lr.stdout != "messages 1,2,3\n" {
		t.Fatalf("listener stdout %q", lr.stdout)
	}
}
