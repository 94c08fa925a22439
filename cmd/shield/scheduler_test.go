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

	"github.com/shieldrt/shieldglobal/internal/testlog"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// Multi-process tests of shield.scheduler(): real `shield run` processes
// sharing the test Redis.

// startScheduled starts `shield run --config cfg script args...` and waits
// until it prints "ready".
func startScheduled(t *testing.T, cfg, script string, args ...string) (*exec.Cmd, *testlog.Buffer) {
	t.Helper()
	cmd := exec.Command(shieldBin(t), append([]string{"run", "--config", cfg, script}, args...)...)
	out := &testlog.Buffer{}
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
func stopScheduled(t *testing.T, cmd *exec.Cmd, out *testlog.Buffer) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("process did not stop cleanly: %v\n%s", err, out.String())
	}
}

// recorder is the task of the multi-process tests: a distributed 100 ms
// interval task (overlap allow: a firing whose runner died must not block
// the next ones) that records each run of each fire time in Redis, then
// works for 40 ms, and each missed event it is told (fire times that every
// process reached too late: docs/scheduler.md, Misfires). With a second
// argument (Unix ms), the first run started after that time prints
// hanging=<fire time> and never ends, so a test can kill the process
// mid-run whatever the machine's load. It prints ready=<Unix ms> once the
// task is registered.
const recorder = `
local who, hang_at = arg[1], tonumber(arg[2])
local s = shield.scheduler()
local g = shield.global()
s:interval("mp", 100, function(info)
	local k = string.format("%d", info.scheduled)
	g:incr("fired:" .. k)
	g:set("by:" .. k .. ":" .. who, info.recovered and "recovered" or "first")
	if hang_at and shield.now_ms() >= hang_at then
		hang_at = nil
		print("hanging=" .. k)
		shield.sleep(600000)
	end
	shield.sleep(40)
	g:set("done:" .. k .. ":" .. who, true)
end, { distributed = true, lock_ttl = 600, overlap = "allow" })
s:on("missed", function(name, info)
	g:set(string.format("missed:%d:%s", info.scheduled, who), string.format("%d %d", info.last_scheduled, info.count))
end)
print("ready=" .. shield.now_ms())
`

type fireLog struct {
	counts map[int64]int
	by     map[int64][]string // runners of each fire time
	done   map[int64][]string // runners that finished it
	told   map[int64][]string // processes told the fire time was missed
	missed int64              // the task's missed counter in its record
	// recovered: runners that re-ran the fire time as recovered (its first
	// runner stopped renewing its claim).
	recovered map[int64][]string
}

func readFires(t *testing.T, prefix string) fireLog {
	t.Helper()
	c := testredis.Standalone(t)
	ctx := context.Background()
	fl := fireLog{counts: map[int64]int{}, by: map[int64][]string{}, done: map[int64][]string{}, told: map[int64][]string{},
		recovered: map[int64][]string{}}
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
			if v, _ := c.Get(ctx, k).Result(); strings.Contains(v, "recovered") {
				fl.recovered[fire] = append(fl.recovered[fire], parts[2])
			}
		case "done":
			fl.done[fire] = append(fl.done[fire], parts[2])
		case "missed":
			v, err := c.Get(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			var last, count int64
			if _, err := fmt.Sscanf(strings.Trim(v, `"`), "%d %d", &last, &count); err != nil {
				t.Fatalf("%s = %q", k, v)
			}
			if n := (last-fire)/100 + 1; n != count || (last-fire)%100 != 0 {
				t.Fatalf("missed event from %d to %d counts %d firings", fire, last, count)
			}
			for f := fire; f <= last; f += 100 {
				fl.told[f] = append(fl.told[f], parts[2])
			}
		}
	}
	if v, err := c.HGet(ctx, prefix+"scheduler:task:{mp}", "missed").Result(); err == nil {
		fl.missed, _ = strconv.ParseInt(v, 10, 64)
	}
	return fl
}

// check asserts that every fire time of the 100 ms grid in [from, to] ran
// or was told missed (to one process, and then it did not run), that every
// told miss is in the record's missed counter, and that a fire time ran
// twice only when its first run was interrupted: killed was its first
// runner and died mid-run, or that runner's claim lapsed (a process starved
// of CPU for longer than lock_ttl cannot renew it: it logs that it lost the
// claim, and the other run is flagged recovered; docs/scheduler.md, "at
// least once"). outs are the processes' outputs by name.
func (fl fireLog) check(t *testing.T, from, to int64, killed string, outs map[string]*testlog.Buffer) (twice, told int) {
	t.Helper()
	var fires []int64
	for f := range fl.by {
		fires = append(fires, f)
	}
	sort.Slice(fires, func(i, j int) bool { return fires[i] < fires[j] })
	if len(fires) == 0 {
		t.Fatal("nothing ran")
	}
	first := from + ((fires[0]-from)%100+100)%100 // the grid's first fire time >= from
	if to-first < 2000 {
		t.Fatalf("a window of %d ms (%d..%d): too short to show anything", to-first, first, to)
	}
	for f := first; f <= to; f += 100 {
		switch ran, n := len(fl.by[f]), len(fl.told[f]); {
		case n > 0 && (ran > 0 || n > 1):
			t.Fatalf("fire time %d ran %d times (%v) and was told missed to %v", f, ran, fl.by[f], fl.told[f])
		case n > 0:
			told++
		case ran == 0:
			t.Fatalf("fire time %d did not run and no process was told it was missed (window %d..%d)", f, first, to)
		case len(fl.done[f]) == 0:
			t.Fatalf("fire time %d started (runners %v) but no run of it finished", f, fl.by[f])
		}
	}
	for _, f := range fires {
		if (f-first)%100 != 0 {
			t.Fatalf("fire time %d is off the 100 ms grid of %d", f, first)
		}
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
		if n > 2 || !diedMidRun && !fl.lapsed(f, outs) {
			t.Fatalf("fire time %d ran %d times (runners %v, finished by %v, recovered by %v; killed %q)", f, n, runners, fl.done[f], fl.recovered[f], killed)
		}
	}
	all := 0
	for _, ps := range fl.told {
		all += len(ps)
	}
	if int64(all) > fl.missed {
		t.Fatalf("%d fire times told missed, the record counts %d", all, fl.missed)
	}
	var outside []int64
	for f := range fl.told {
		if f < first || f > to {
			outside = append(outside, f-first)
		}
	}
	sort.Slice(outside, func(i, j int) bool { return outside[i] < outside[j] })
	t.Logf("told missed: %d in all, %d outside the window (ms from its start: %v); ran outside the window: %d", all, len(outside), outside, len(fires)-int((to-first)/100+1)+told)
	return twice, told
}

// lapsed tells whether fire time f's first run lost its claim: one of its
// two runs was a recovered re-run, and the other runner logged that its
// lease had passed.
func (fl fireLog) lapsed(f int64, outs map[string]*testlog.Buffer) bool {
	if len(fl.recovered[f]) != 1 {
		return false
	}
	at := time.UnixMilli(f).UTC().Format("2006-01-02T15:04:05.000")
	for _, r := range fl.by[f] {
		if r == fl.recovered[f][0] || outs[r] == nil {
			continue
		}
		for _, line := range strings.Split(outs[r].String(), "\n") {
			if strings.Contains(line, at) && (strings.Contains(line, "lost the claim of a running firing") ||
				strings.Contains(line, "finished after another process took its claim over")) {
				return true
			}
		}
	}
	return false
}

// readyAt returns when the process registered its task (Unix ms, its
// clock: the machine's).
func readyAt(t *testing.T, out *testlog.Buffer) int64 {
	t.Helper()
	m := regexp.MustCompile(`ready=(\d+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no ready=:\n%s", out.String())
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// lastRunBefore returns the latest fire time that ran and was due by at.
func (fl fireLog) lastRunBefore(at int64) int64 {
	var last int64
	for f := range fl.by {
		if f <= at {
			last = max(last, f)
		}
	}
	return last
}

// byName maps the processes' names (p0, p1, ...) to their outputs.
func byName(outs []*testlog.Buffer) map[string]*testlog.Buffer {
	m := map[string]*testlog.Buffer{}
	for i, o := range outs {
		m[fmt.Sprintf("p%d", i)] = o
	}
	return m
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
// every fire time due while all three were up (from the last one's
// registration to the latest fire time run before the first stop) runs
// once, and one that the starved machine made every process reach too
// late is told missed instead (docs/scheduler.md, Misfires); none runs
// twice unless its first runner, starved for longer than lock_ttl, lost its
// claim (it says so; the re-run is flagged recovered).
func TestSchedulerEachFiringRunsOnceAcrossProcesses(t *testing.T) {
	cfg, prefix := redisConfigFile(t)
	script := writeFile(t, "recorder.lua", recorder)
	var cmds []*exec.Cmd
	var outs []*testlog.Buffer
	var from int64
	for i := 0; i < 3; i++ {
		c, o := startScheduled(t, cfg, script, fmt.Sprintf("p%d", i))
		cmds, outs = append(cmds, c), append(outs, o)
		from = max(from, readyAt(t, o))
	}
	time.Sleep(10 * time.Second)
	stopAt := nowMs()
	for i, c := range cmds {
		stopScheduled(t, c, outs[i])
	}
	fl := readFires(t, prefix)
	to := fl.lastRunBefore(stopAt)
	twice, told := fl.check(t, from, to, "", byName(outs))
	perProcess := map[string]int{}
	for f, runners := range fl.by {
		if f < from || f > to {
			continue
		}
		for _, r := range runners {
			perProcess[r]++
		}
	}
	// Which process runs a firing is not promised (docs/scheduler.md,
	// Exactly once per firing: each claims for itself, the first claim
	// wins), so the spread is only logged; exactly once is checked above.
	t.Logf("window %d..%d: %d fire times, runs per process %v, %d told missed (the record counts %d), %d run twice after a lapsed claim",
		from, to, (to-from)/100, perProcess, told, fl.missed, twice)
}

// The same with one process SIGKILLed in the middle of a run (its run
// hangs until then): still none missed silently (the firing it was running
// is re-run once its lease lapses, flagged recovered), and a fire time runs
// twice only if the killed process was running it.
func TestSchedulerKilledProcessMissesNothing(t *testing.T) {
	cfg, prefix := redisConfigFile(t)
	script := writeFile(t, "recorder.lua", recorder)
	var cmds []*exec.Cmd
	var outs []*testlog.Buffer
	var from int64
	for i := 2; i >= 0; i-- {
		var args []string
		if i == 0 {
			args = append(args, strconv.FormatInt(nowMs()+3000, 10)) // p0's run after 3 s hangs
		}
		c, o := startScheduled(t, cfg, script, append([]string{fmt.Sprintf("p%d", i)}, args...)...)
		cmds, outs = append([]*exec.Cmd{c}, cmds...), append([]*testlog.Buffer{o}, outs...)
		from = max(from, readyAt(t, o))
	}
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(outs[0].String(), "hanging="); {
		if time.Now().After(deadline) {
			t.Fatalf("p0 runs nothing:\n%s", outs[0].String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmds[0].Process.Signal(syscall.SIGKILL)
	cmds[0].Wait()
	hung, _ := strconv.ParseInt(fields(t, outs[0].String())["hanging"], 10, 64)
	time.Sleep(6 * time.Second)
	stopAt := nowMs()
	for i := 1; i < 3; i++ {
		stopScheduled(t, cmds[i], outs[i])
	}
	fl := readFires(t, prefix)
	to := fl.lastRunBefore(stopAt)
	if hung <= from || hung >= to {
		t.Fatalf("the hung fire time %d is outside the window %d..%d", hung, from, to)
	}
	twice, told := fl.check(t, from, to, "p0", byName(outs))
	recovered := 0
	for f := range fl.by {
		v, _ := testredis.Standalone(t).Get(context.Background(), prefix+"global:by:"+strconv.FormatInt(f, 10)+":p1").Result()
		w, _ := testredis.Standalone(t).Get(context.Background(), prefix+"global:by:"+strconv.FormatInt(f, 10)+":p2").Result()
		if strings.Contains(v+w, "recovered") {
			recovered++
		}
	}
	// The hung fire time ran twice: on p0, cut short, and re-run elsewhere.
	if runners := fl.by[hung]; len(runners) != 2 || !slicesContains(runners, "p0") || slicesContains(fl.done[hung], "p0") || recovered == 0 {
		t.Fatalf("the fire time p0 was killed running (%d): runners %v, finished by %v; %d re-run as recovered", hung, runners, fl.done[hung], recovered)
	}
	t.Logf("window %d..%d: %d fire times; %d re-run after the kill, %d of them twice (the killed process was mid-run); %d told missed (the record counts %d)",
		from, to, (to-from)/100, recovered, twice, told, fl.missed)
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
	var outs []*testlog.Buffer
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
	// Start polls PING until Redis answers, so Redis takes commands from a
	// moment between restarting and up: no claim can be run before restarting
	restarting := nowMs()
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
		if fire > down && fire < restarting && at >= restarting {
			waited = true // due while Redis was down, run once it was back
		}
		prev = fire
	}
	if !waited {
		t.Fatalf("no firing due during the outage (%d..%d) ran after it:\n%s", down, restarting, out.String())
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
			out := &testlog.Buffer{}
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
