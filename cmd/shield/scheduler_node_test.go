package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// The standalone scheduler node: `shield scheduler start|stop|restart|status`
// processes against the test Redis, and `shield run` processes that control
// its tasks.

// nodeTree writes a tree of task files: two distributed tasks that record
// each firing in Redis (global key fire:<task>:<scheduled ms>), one of
// them in a subdirectory and working 300 ms per run, and a broken file in
// a directory the tests skip.
func nodeTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"tick.lua": `return { name = "node_tick", expression = "every:1s", distributed = true,
	handle = function(info) shield.global():set(string.format("fire:node_tick:%d", info.scheduled), 1) end }`,
		"sub/work.lua": `return { name = "node_work", expression = "every:500ms", distributed = true,
	handle = function(info)
		shield.global():set(string.format("fire:node_work:%d", info.scheduled), 1)
		shield.sleep(300)
	end }`,
		"drafts/broken.lua": `return { name = "broken", expression = "every:1s", handle = "not a function" }`,
	}
	for name, src := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("local shield = require('shield')\n"+src+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// fireTimes returns the recorded fire times of task, sorted.
func fireTimes(t *testing.T, c *redis.Client, prefix, task string) []int64 {
	t.Helper()
	keys, err := c.Keys(context.Background(), prefix+"global:fire:"+task+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, k := range keys {
		n, err := strconv.ParseInt(k[strings.LastIndex(k, ":")+1:], 10, 64)
		if err != nil {
			t.Fatalf("key %q", k)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killNodeAtCleanup kills (SIGKILL) whatever node still holds pidfile when
// the test ends.
func killNodeAtCleanup(t *testing.T, pidfile string) {
	t.Cleanup(func() {
		if pid, running, _ := nodeStatus(pidfile); running {
			syscall.Kill(pid, syscall.SIGKILL)
			waitFor(t, 10*time.Second, "the killed node to exit", func() bool { _, r, _ := nodeStatus(pidfile); return !r })
		}
	})
}

func nodeStatusJSON(t *testing.T, pidfile string) (statusReport, result) {
	t.Helper()
	r := runShield(t, context.Background(), "scheduler", "status", "--pidfile", pidfile, "--json")
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	return rep, r
}

func taskOf(rep statusReport, name string) (found bool, status string, runs int64) {
	for _, tk := range rep.Tasks {
		if tk.Name == name {
			return true, tk.Status, tk.RunCount
		}
	}
	return false, "", 0
}

// luaControl runs `shield run` with a script that calls scheduler:<op>(name);
// it returns the time (Unix ms) just before the call and just after it.
func luaControl(t *testing.T, cfg, op, name string) (before, after int64) {
	t.Helper()
	script := writeFile(t, op+".lua", fmt.Sprintf(`
local s = shield.scheduler()
local at = shield.now_ms()
assert(s:%s(%q) == true)
print(string.format("at=%%d done=%%d", at, shield.now_ms()))
`, op, name))
	r := runShield(t, context.Background(), "run", "--config", cfg, script)
	if r.code != 0 {
		t.Fatalf("%s %s: exit %d\n%s", op, name, r.code, r.stderr)
	}
	f := fields(t, r.stdout)
	at, err1 := strconv.ParseInt(f["at"], 10, 64)
	done, err2 := strconv.ParseInt(f["done"], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: %q", op, r.stdout)
	}
	return at, done
}

func TestSchedulerNodeOnRedis(t *testing.T) {
	prefix := testredis.Prefix(t)
	const grace = 2 * time.Second
	cfg := writeFile(t, "node.yaml", fmt.Sprintf("global:\n  redis:\n    url: %q\n    prefix: %q\n  runtime:\n    shutdown_grace: %d\n",
		testredis.URL(t), prefix, grace.Milliseconds()))
	c := testredis.Standalone(t)
	tree := nodeTree(t)
	dir := t.TempDir()
	pid1, pid2 := filepath.Join(dir, "node1.pid"), filepath.Join(dir, "node2.pid")
	killNodeAtCleanup(t, pid1)
	killNodeAtCleanup(t, pid2)
	start := func(pidfile string) result {
		return runShield(t, context.Background(), "scheduler", "start", "--config", cfg, "--pidfile", pidfile,
			"--skip", "drafts", "--detach", tree)
	}

	// Two detached nodes on one tree (a pair for availability): each
	// firing runs once across them.
	for _, p := range []string{pid1, pid2} {
		if r := start(p); r.code != 0 || !strings.Contains(r.stdout, "node started") || !strings.Contains(r.stdout, "tasks 2") {
			t.Fatalf("start --detach: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("no pidfile after start: %v", err)
		}
	}
	waitFor(t, 30*time.Second, "both tasks fired twice", func() bool {
		return len(fireTimes(t, c, prefix, "node_tick")) >= 2 && len(fireTimes(t, c, prefix, "node_work")) >= 2
	})
	rep, r := nodeStatusJSON(t, pid1)
	if r.code != 0 || !rep.Running || rep.Pid == 0 || len(rep.Tasks) != 2 {
		t.Fatalf("status: exit %d, %+v\n%s", r.code, rep, r.stderr)
	}
	for _, tk := range rep.Tasks {
		if tk.Status != "active" || !tk.Distributed || tk.NextRun == nil {
			t.Fatalf("status task %+v", tk)
		}
	}
	human := runShield(t, context.Background(), "scheduler", "status", "--pidfile", pid1)
	if human.code != 0 || !strings.Contains(human.stdout, "running (pid") || !strings.Contains(human.stdout, "node_work") {
		t.Fatalf("status: exit %d\n%s%s", human.code, human.stdout, human.stderr)
	}

	// A second start on a live node's pidfile is refused; so is a
	// foreground one.
	for _, args := range [][]string{
		{"scheduler", "start", "--config", cfg, "--pidfile", pid1, "--skip", "drafts", "--detach", tree},
		{"scheduler", "start", "--config", cfg, "--pidfile", pid1, "--skip", "drafts", tree},
	} {
		if r := runShield(t, context.Background(), args...); r.code != 1 || !strings.Contains(r.stderr, "already running (pid "+strconv.Itoa(rep.Pid)) {
			t.Fatalf("%v on a live node's pidfile: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}

	// Disabled from another process: no firing anywhere, status says so.
	_, disabled := luaControl(t, cfg, "disable", "node_tick")
	for _, p := range []string{pid1, pid2} {
		waitFor(t, 10*time.Second, "status shows node_tick disabled", func() bool {
			rep, _ := nodeStatusJSON(t, p)
			_, st, _ := taskOf(rep, "node_tick")
			return st == "disabled"
		})
	}
	time.Sleep(300 * time.Millisecond) // a run claimed just before the disable may still record itself
	frozen := fireTimes(t, c, prefix, "node_tick")
	for _, f := range frozen {
		// A firing is claimed 20 ms ahead of its time (the Store takes
		// claims up to 70 ms ahead): one claimed just before the disable
		// runs; none later.
		if f > disabled+100 {
			t.Fatalf("node_tick fired at %d, after its disable (done at %d)", f, disabled)
		}
	}
	workBefore := len(fireTimes(t, c, prefix, "node_work"))

	// Restart node 1: the same tasks come back, with their counters, and
	// node_tick is still disabled.
	rep, _ = nodeStatusJSON(t, pid1)
	_, _, tickRuns := taskOf(rep, "node_tick")
	_, _, workRuns := taskOf(rep, "node_work")
	r = runShield(t, context.Background(), "scheduler", "restart", "--pidfile", pid1)
	if r.code != 0 || !strings.Contains(r.stdout, "node stopped") || !strings.Contains(r.stdout, "node started") {
		t.Fatalf("restart: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rep, r = nodeStatusJSON(t, pid1)
	if r.code != 0 || len(rep.Tasks) != 2 {
		t.Fatalf("status after restart: exit %d %+v\n%s", r.code, rep, r.stderr)
	}
	if _, st, runs := taskOf(rep, "node_tick"); st != "disabled" || runs != tickRuns {
		t.Fatalf("node_tick after restart: %s with %d runs; want disabled with %d", st, runs, tickRuns)
	}
	if _, _, runs := taskOf(rep, "node_work"); runs < workRuns {
		t.Fatalf("node_work after restart: %d runs; had %d", runs, workRuns)
	}
	waitFor(t, 30*time.Second, "node_work fires after the restart", func() bool {
		return len(fireTimes(t, c, prefix, "node_work")) >= workBefore+2
	})
	if got := fireTimes(t, c, prefix, "node_tick"); len(got) != len(frozen) {
		t.Fatalf("node_tick fired while disabled (%d firings before, %d after the restart)", len(frozen), len(got))
	}

	// Enabled: it fires from the next fire time on, without catching up
	// the disabled period, once per fire time.
	enabledAt, enabled := luaControl(t, cfg, "enable", "node_tick")
	waitFor(t, 30*time.Second, "node_tick fires after enable", func() bool {
		return len(fireTimes(t, c, prefix, "node_tick")) >= len(frozen)+2
	})
	after := fireTimes(t, c, prefix, "node_tick")[len(frozen):]
	for i, f := range after {
		if f < enabledAt {
			t.Fatalf("after enable at %d, node_tick ran the firing of %d (the disabled period)", enabledAt, f)
		}
		if i > 0 && f-after[i-1] != 1000 {
			t.Fatalf("fire times after enable %v are not one per second", after)
		}
	}
	if f := after[0]; f > enabled+1000+50 {
		t.Fatalf("first firing after enable (done at %d) is %d: not the next fire time", enabled, f)
	}
	waitFor(t, 10*time.Second, "node 2 shows node_tick active", func() bool {
		rep, _ := nodeStatusJSON(t, pid2)
		_, st, _ := taskOf(rep, "node_tick")
		return st == "active"
	})

	// Stop: within the grace + 2 s, the pidfile gone, status says so.
	for _, p := range []string{pid1, pid2} {
		began := time.Now()
		r := runShield(t, context.Background(), "scheduler", "stop", "--pidfile", p)
		took := time.Since(began)
		if r.code != 0 || !strings.Contains(r.stdout, "node stopped") {
			t.Fatalf("stop: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if took > grace+2*time.Second {
			t.Fatalf("stop took %v; want within the grace (%v) + 2 s", took, grace)
		}
		t.Logf("stop of %s took %v (the stop command's own start included)", filepath.Base(p), took)
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("pidfile after stop: %v", err)
		}
		rep, r := nodeStatusJSON(t, p)
		if r.code != 3 || rep.Running {
			t.Fatalf("status after stop: exit %d %+v", r.code, rep)
		}
	}
	if r := runShield(t, context.Background(), "scheduler", "stop", "--pidfile", pid1); r.code != 0 || !strings.Contains(r.stdout, "not running") {
		t.Fatalf("stop of a stopped node: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The record keeps the disabled state and counters for the next start.
	if v, err := c.HGet(context.Background(), prefix+"scheduler:task:{node_tick}", "disabled").Result(); err != nil || v != "0" {
		t.Fatalf("node_tick record: disabled = %q, %v", v, err)
	}
}

// On the memory backend: a node of its own (its tasks are local), status
// lists them, stop ends it; a stale pidfile is taken over; a bad task file
// fails the start naming the file and registers nothing.
func TestSchedulerNodeOnMemory(t *testing.T) {
	tree := nodeTree(t)
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "mem.pid")
	killNodeAtCleanup(t, pidfile)

	// A bad file: exit non-zero naming it, no pidfile left behind.
	r := runShield(t, context.Background(), "scheduler", "start", "--pidfile", pidfile, "--detach", tree)
	if r.code != 1 || !strings.Contains(r.stderr, filepath.Join("drafts", "broken.lua")+": handle must be a function") {
		t.Fatalf("start with a bad file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(pidfile); !os.IsNotExist(err) {
		t.Fatalf("pidfile after a failed start: %v", err)
	}
	r = runShield(t, context.Background(), "scheduler", "start", "--pidfile", pidfile, tree)
	if r.code != 1 || !strings.Contains(r.stderr, "broken.lua: handle must be a function") {
		t.Fatalf("foreground start with a bad file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A stale pidfile (a pid nobody holds the lock of) is taken over.
	if err := os.WriteFile(pidfile, []byte("999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runShield(t, context.Background(), "scheduler", "status", "--pidfile", pidfile); r.code != 3 {
		t.Fatalf("status with a stale pidfile: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runShield(t, context.Background(), "scheduler", "start", "--pidfile", pidfile, "--skip", "drafts", "--detach", tree)
	if r.code != 0 {
		t.Fatalf("start over a stale pidfile: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, 30*time.Second, "node_tick ran twice", func() bool {
		rep, _ := nodeStatusJSON(t, pidfile)
		_, _, runs := taskOf(rep, "node_tick")
		return runs >= 2
	})
	rep, _ := nodeStatusJSON(t, pidfile)
	if len(rep.Tasks) != 2 || rep.Tasks[0].Name != "node_tick" || rep.Tasks[1].Name != "node_work" {
		t.Fatalf("status on memory: %+v", rep)
	}
	if b, err := os.ReadFile(besidePidfile(pidfile, ".log")); err != nil || !strings.Contains(string(b), "999999 is gone") {
		t.Fatalf("log does not tell the stale pidfile: %v\n%s", err, b)
	}
	if r := runShield(t, context.Background(), "scheduler", "stop", "--pidfile", pidfile); r.code != 0 {
		t.Fatalf("stop: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(pidfile); !os.IsNotExist(err) {
		t.Fatalf("pidfile after stop: %v", err)
	}
}

// Bad command lines are refused before anything starts.
func TestSchedulerCommandLine(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"scheduler"}, "usage:"},
		{[]string{"scheduler", "begin"}, `unknown subcommand "begin"`},
		{[]string{"scheduler", "start", "--pidfile", filepath.Join(dir, "p.pid")}, "no task directory given"},
		{[]string{"scheduler", "start", "--pidfile", filepath.Join(dir, "p.pid"), filepath.Join(dir, "nope")}, "no such file or directory"},
		{[]string{"scheduler", "start", "--skip", "[", dir}, "skip"},
		{[]string{"scheduler", "restart", "--pidfile", filepath.Join(dir, "never.pid")}, "no recorded arguments"},
		{[]string{"scheduler", "stop", "extra"}, "unexpected arguments"},
		{[]string{"scheduler", "restart", "--skip", "x"}, "give them too"},
		{[]string{"scheduler", "start", "--log", filepath.Join(dir, "l.log"), dir}, "--log goes with --detach"},
	} {
		r := runShield(t, context.Background(), tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
