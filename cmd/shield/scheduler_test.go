package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// Multi-process tests of shield.scheduler(): real `shield run` processes
// sharing the test Redis.

// startScheduled starts `shield run --config cfg script args...` and waits
// until it prints "ready".
func startScheduled(t *testing.T, cfg, script string, args ...string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(shieldBin(t), append([]string{"run", "--config", cfg, script}, args...)...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "ready") {
		if time.Now().After(deadline) {
			t.Fatalf("process never got ready:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd, out
}

// stopScheduled sends SIGTERM and waits: a clean stop exits 0.
func stopScheduled(t *testing.T, cmd *exec.Cmd, out *lockedBuffer) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("process did not stop cleanly: %v\n%s", err, out.String())
	}
}

// recorder is the task of the multi-process tests: a distributed 100 ms
// interval task (overlap allow: a firing whose runner died must not block
// the next ones) that records each run of each fire time in Redis, then
// works for 40 ms (printing running=<fire time> when it starts, so a test
// can kill a process mid-run).
const recorder = `
local who = arg[1]
local s = shield.scheduler()
local g = shield.global()
s:interval("mp", 100, function(info)
	local k = string.format("%d", info.scheduled)
	g:incr("fired:" .. k)
	g:set("by:" .. k .. ":" .. who, info.recovered and "recovered" or "first")
	print("running=" .. k)
	shield.sleep(40)
	g:set("done:" .. k .. ":" .. who, true)
end, { distributed = true, lock_ttl = 600, overlap = "allow" })
print("ready")
`

type fireLog struct {
	counts map[int64]int
	by     map[int64][]string // runners of each fire time
	done   map[int64][]string // runners that finished it
}

func readFires(t *testing.T, prefix string) fireLog {
	t.Helper()
	c := testredis.Standalone(t)
	ctx := context.Background()
	fl := fireLog{counts: map[int64]int{}, by: map[int64][]string{}, done: map[int64][]string{}}
	keys, err := c.Keys(ctx, prefix+"global:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		parts := strings.Split(strings.TrimPrefix(k, prefix+"global:"), ":")
		fire, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil {
			t.Fatalf("key %q", k)
		}
		switch parts[0] {
		case "fired":
			v, err := c.Get(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			n, err := strconv.ParseFloat(v, 64) // INCRBYFLOAT keeps a plain number
			if err != nil {
				t.Fatalf("%s = %q", k, v)
			}
			fl.counts[fire] = int(n)
		case "by":
			fl.by[fire] = append(fl.by[fire], parts[2])
		case "done":
			fl.done[fire] = append(fl.done[fire], parts[2])
		}
	}
	return fl
}

// check asserts that every fire time of the 100 ms grid in [from, to] ran,
// and that a fire time ran twice only when killed was its first runner and
// died mid-run.
func (fl fireLog) check(t *testing.T, from, to int64, killed string) (twice int) {
	t.Helper()
	var fires []int64
	for f := range fl.by {
		fires = append(fires, f)
	}
	sort.Slice(fires, func(i, j int) bool { return fires[i] < fires[j] })
	if len(fires) == 0 {
		t.Fatal("nothing ran")
	}
	var inWindow []int64
	for _, f := range fires {
		if f >= from && f <= to {
			inWindow = append(inWindow, f)
		}
	}
	if len(inWindow) < 20 {
		t.Fatalf("only %d fire times in the window", len(inWindow))
	}
	for i := 1; i < len(inWindow); i++ {
		if d := inWindow[i] - inWindow[i-1]; d != 100 {
			t.Fatalf("fire times %d and %d are %d ms apart: %d firings missed", inWindow[i-1], inWindow[i], d, d/100-1)
		}
	}
	if first := inWindow[0]; first-from >= 100 {
		t.Fatalf("firings missed at the start of the window: first %d, window from %d", first, from)
	}
	if last := inWindow[len(inWindow)-1]; to-last >= 100 {
		t.Fatalf("firings missed at the end of the window: last %d, window to %d", last, to)
	}
	for _, f := range inWindow {
		if len(fl.done[f]) == 0 {
			t.Fatalf("fire time %d started (runners %v) but no run of it finished", f, fl.by[f])
		}
	}
	for _, f := range fires {
		runners := fl.by[f]
		n := fl.counts[f]
		if n != len(runners) {
			t.Fatalf("fire time %d: count %d, runners %v", f, n, runners)
		}
		if n == 1 {
			continue
		}
		twice++
		diedMidRun := killed != "" && slicesContains(runners, killed) && !slicesContains(fl.done[f], killed)
		if n > 2 || !diedMidRun {
			t.Fatalf("fire time %d ran %d times (runners %v, finished by %v; killed %q)", f, n, runners, fl.done[f], killed)
		}
	}
	return twice
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func nowMs() int64 { return time.Now().UnixMilli() }

// Three processes register the same distributed 100 ms task for 10 s:
// every fire time in the window runs, none twice.
func TestSchedulerEachFiringRunsOnceAcrossProcesses(t *testing.T) {
	cfg, prefix := redisConfigFile(t)
	script := writeFile(t, "recorder.lua", recorder)
	var cmds []*exec.Cmd
	var outs []*lockedBuffer
	for i := 0; i < 3; i++ {
		c, o := startScheduled(t, cfg, script, fmt.Sprintf("p%d", i))
		cmds, outs = append(cmds, c), append(outs, o)
	}
	from := nowMs() + 200
	time.Sleep(10 * time.Second)
	to := nowMs() - 300 // the stop below cuts off what is in flight
	for i, c := range cmds {
		stopScheduled(t, c, outs[i])
	}
	fl := readFires(t, prefix)
	if twice := fl.check(t, from, to, ""); twice != 0 {
		t.Fatalf("%d fire times ran twice", twice)
	}
	perProcess := map[string]int{}
	for _, runners := range fl.by {
		for _, r := range runners {
			perProcess[r]++
		}
	}
	if len(perProcess) != 3 {
		t.Fatalf("runs per process %v: every process should have taken some", perProcess)
	}
	t.Logf("%d fire times, runs per process %v", len(fl.by), perProcess)
}

// The same with one process SIGKILLed midway: still none missed (its
// claimed firings are re-run once their lease lapses), and a fire time
// runs twice only if the killed process was running it.
func TestSchedulerKilledProcessMissesNothing(t *testing.T) {
	cfg, prefix := redisConfigFile(t)
	script := writeFile(t, "recorder.lua", recorder)
	var cmds []*exec.Cmd
	var outs []*lockedBuffer
	for i := 0; i < 3; i++ {
		c, o := startScheduled(t, cfg, script, fmt.Sprintf("p%d", i))
		cmds, outs = append(cmds, c), append(outs, o)
	}
	from := nowMs() + 200
	time.Sleep(4 * time.Second)
	// Kill p0 mid-run: right after it prints that a run started.
	seen := strings.Count(outs[0].String(), "running=")
	for deadline := time.Now().Add(20 * time.Second); strings.Count(outs[0].String(), "running=") == seen; {
		if time.Now().After(deadline) {
			t.Fatalf("p0 runs nothing:\n%s", outs[0].String())
		}
		time.Sleep(time.Millisecond)
	}
	cmds[0].Process.Signal(syscall.SIGKILL)
	cmds[0].Wait()
	time.Sleep(6 * time.Second)
	to := nowMs() - 300
	for i := 1; i < 3; i++ {
		stopScheduled(t, cmds[i], outs[i])
	}
	fl := readFires(t, prefix)
	twice := fl.check(t, from, to, "p0")
	recovered := 0
	for f := range fl.by {
		v, _ := testredis.Standalone(t).Get(context.Background(), prefix+"global:by:"+strconv.FormatInt(f, 10)+":p1").Result()
		w, _ := testredis.Standalone(t).Get(context.Background(), prefix+"global:by:"+strconv.FormatInt(f, 10)+":p2").Result()
		if strings.Contains(v+w, "recovered") {
			recovered++
		}
	}
	midRun := 0
	for f, runners := range fl.by {
		if slicesContains(runners, "p0") && !slicesContains(fl.done[f], "p0") {
			midRun++ // check made sure another process finished it
		}
	}
	if midRun == 0 || recovered == 0 {
		t.Fatalf("the kill did not land mid-run (%d firings cut short, %d re-run): the test proves nothing", midRun, recovered)
	}
	t.Logf("%d fire times; %d re-run after the kill, %d of them twice (the killed process was mid-run)", len(fl.by), recovered, twice)
}

// A pause from one process stops the task in all three, and no firing
// after the pause is claimed.
func TestSchedulerPauseStopsTheTaskEverywhere(t *testing.T) {
	cfg, prefix := redisConfigFile(t)
	script := writeFile(t, "watched.lua", recorder+`
		shield.spawn(function()
			while true do
				local t = s:get("mp")
				if t and t:status() == "paused" then
					print("paused_at=" .. shield.now_ms())
					return
				end
				shield.sleep(5)
			end
		end)`)
	var cmds []*exec.Cmd
	var outs []*lockedBuffer
	for i := 0; i < 3; i++ {
		c, o := startScheduled(t, cfg, script, fmt.Sprintf("p%d", i))
		cmds, outs = append(cmds, c), append(outs, o)
	}
	time.Sleep(time.Second)
	r := runShield(t, context.Background(), "run", "--config", cfg, writeFile(t, "pause.lua", `
		assert(shield.scheduler():pause("mp"))
		print("paused=" .. shield.now_ms())`))
	if r.code != 0 {
		t.Fatalf("pause: exit %d\n%s", r.code, r.stderr)
	}
	paused, _ := strconv.ParseInt(fields(t, r.stdout)["paused"], 10, 64)
	var worst int64
	for i, o := range outs {
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(o.String(), "paused_at=") {
			if time.Now().After(deadline) {
				t.Fatalf("process %d never saw the pause:\n%s", i, o.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		at, _ := strconv.ParseInt(fields(t, o.String())["paused_at"], 10, 64)
		worst = max(worst, at-paused)
	}
	time.Sleep(500 * time.Millisecond)
	fl := readFires(t, prefix)
	for f := range fl.by {
		// A firing is claimed 20 ms ahead, and a claim checks the pause.
		if f > paused+100 {
			t.Fatalf("fire time %d ran after the pause at %d", f, paused)
		}
	}
	if worst > time.Second.Milliseconds() {
		t.Fatalf("the pause took %d ms to reach every process", worst)
	}
	t.Logf("every process saw the pause within %d ms (polling every 5 ms)", worst)
	for i, c := range cmds {
		stopScheduled(t, c, outs[i])
	}
}

// A restart keeps run_count and last_run.
func TestSchedulerRestartKeepsRunCount(t *testing.T) {
	cfg, _ := redisConfigFile(t)
	script := writeFile(t, "counter.lua", `
		local s = shield.scheduler()
		local t = s:interval("kept", 50, function() end, { distributed = true })
		print("registered count=" .. t:run_count())
		if arg[1] == "first" then
			while s:get("kept"):run_count() < 5 do shield.sleep(10) end
			print("ready count=" .. s:get("kept"):run_count())
		else
			print("ready last_run=" .. tostring(t:last_run()))
		end`)
	a, aOut := startScheduled(t, cfg, script, "first")
	stopScheduled(t, a, aOut)
	before := atoi(t, regexp.MustCompile(`ready count=(\d+)`).FindStringSubmatch(aOut.String())[1])
	b, bOut := startScheduled(t, cfg, script, "second")
	after := atoi(t, regexp.MustCompile(`registered count=(\d+)`).FindStringSubmatch(bOut.String())[1])
	if after < before {
		t.Fatalf("run_count %d after the restart, %d before", after, before)
	}
	if strings.Contains(bOut.String(), "last_run=nil") {
		t.Fatalf("last_run lost:\n%s", bOut.String())
	}
	stopScheduled(t, b, bOut)
}

// Redis stopped across firings: the latest firing due while it was down
// waits and runs once Redis is back (within catch_up, default 60 s), even
// though Redis restarts empty (the process re-creates the record with its
// fire times); the earlier ones are counted missed (or skipped, when the
// firing that waited still runs as the next is claimed), none is lost
// silently and none runs twice.
func TestSchedulerFiringWaitsForRedis(t *testing.T) {
	srv := testredis.StartServer(t)
	cfg := writeFile(t, "private.yaml", fmt.Sprintf("global:\n  redis:\n    url: %q\n    prefix: %q\n", srv.URL(), testredis.Prefix(t)))
	cmd, out := startScheduled(t, cfg, writeFile(t, "late.lua", `
		local s = shield.scheduler()
		s:interval("through_outage", 500, function(info)
			local at = shield.now_ms()
			local ti = s:get("through_outage"):info()
			print(string.format("ran=%d at=%d late=%s missed=%d skipped=%d", info.scheduled, at, tostring(info.late),
				ti.missed, ti.skipped))
		end, { distributed = true })
		print("ready")`))
	for !strings.Contains(out.String(), "ran=") {
		time.Sleep(10 * time.Millisecond)
	}
	down := nowMs()
	srv.Stop()
	time.Sleep(1500 * time.Millisecond)
	srv.Start() // empty: the process re-creates the record, keeping its fire times
	up := nowMs()
	runs := regexp.MustCompile(`ran=(\d+) at=(\d+)`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		last := runs.FindAllStringSubmatch(out.String(), -1)
		if n, _ := strconv.ParseInt(last[len(last)-1][1], 10, 64); n > up+1000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no runs after Redis came back:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopScheduled(t, cmd, out)
	var prev int64
	waited, gaps := false, int64(0)
	for _, m := range runs.FindAllStringSubmatch(out.String(), -1) {
		fire, _ := strconv.ParseInt(m[1], 10, 64)
		at, _ := strconv.ParseInt(m[2], 10, 64)
		if prev != 0 && (fire <= prev || (fire-prev)%500 != 0) {
			t.Fatalf("after fire time %d came %d:\n%s", prev, fire, out.String())
		}
		if prev != 0 && fire-prev > 500 {
			if prev+500 <= down || fire-500 >= up {
				t.Fatalf("fire times %d..%d skipped outside the outage %d..%d:\n%s", prev+500, fire-500, down, up, out.String())
			}
			gaps += (fire-prev)/500 - 1
		}
		if fire > down && fire < up && at >= up-100 {
			waited = true // due while Redis was down, run once it was back
		}
		prev = fire
	}
	if !waited {
		t.Fatalf("no firing due during the outage (%d..%d) ran after it:\n%s", down, up, out.String())
	}
	// A fire time that did not run was counted missed, or skipped: the
	// firing that waited for Redis may still run when the next one is
	// claimed (overlap "skip").
	all := regexp.MustCompile(`missed=(\d+) skipped=(\d+)`).FindAllStringSubmatch(out.String(), -1)
	missed, _ := strconv.ParseInt(all[len(all)-1][1], 10, 64)
	skipped, _ := strconv.ParseInt(all[len(all)-1][2], 10, 64)
	if missed+skipped != gaps {
		t.Fatalf("%d fire times did not run but %d were reported missed and %d skipped:\n%s", gaps, missed, skipped, out.String())
	}
}

// The scheduler examples run on the embedded backend: "demo" runs their
// tasks now and exits; without it they stay up until SIGTERM.
func TestSchedulerExamples(t *testing.T) {
	for _, c := range []struct {
		file string
		want []string
	}{
		{"scheduler_daily_rank_reset.lua", []string{`daily_rank_reset: schedule "0 0 * * *"`, "archived 5 entries, leader player_5; board now empty"}},
		{"scheduler_double_exp.lua", []string{`double_exp_event: schedule "0 20 * * 6"`, "activity_started: double_exp, status active",
			"multiplier while on: 2", "activity_ended: double_exp, status inactive"}},
		{"scheduler_backup.lua", []string{`data_backup: schedule "0 3 * * *"`, "backed up 3 players, season 7", "run_count 1"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			path := "../../examples/" + c.file
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			r := runShield(t, ctx, "run", path, "demo")
			if r.code != 0 {
				t.Fatalf("demo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stdout, w) {
					t.Fatalf("demo output lacks %q:\n%s", w, r.stdout)
				}
			}
			cmd := exec.Command(shieldBin(t), "run", path)
			out := &lockedBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "next run"); {
				if time.Now().After(deadline) {
					t.Fatalf("never registered:\n%s", out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			if cmd.ProcessState != nil {
				t.Fatalf("exited with its tasks scheduled:\n%s", out.String())
			}
			stopScheduled(t, cmd, out)
			if strings.Contains(out.String(), "level=ERROR") {
				t.Fatalf("errors:\n%s", out.String())
			}
		})
	}
}
