package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// opsProducer dead-letters three jobs (no retries), and leaves a
// distributed task and a board behind in Redis.
const opsProducer = `
local q = shield.reliable_queue("jobs")
for i = 1, 3 do q:push({ job = i }) end
for i = 1, 3 do local _, h = q:pop(2000); assert(h:nack(0)) end
assert(q:dead_letter():length() == 3)
shield.scheduler():cron("nightly", "0 3 * * *", function() end, { distributed = true })
local b = shield.rank("arena")
for i = 1, 5 do b:update("p" .. i, i * 10) end
print("ready")
`

// opsConsumer consumes "jobs" and prints "got <job>" per message; it holds
// the distributed lock "cli_lock" meanwhile.
const opsConsumer = `
local m = shield.distributed_mutex("cli_lock")
shield.spawn(function() m:acquire(); held = true; shield.sleep(math.huge) end)
while not held do shield.sleep(1) end
shield.reliable_queue("jobs"):consume("worker", function(msg) print("got " .. msg.job) end)
print("ready")
`

// The admin CLI against a real Redis with shield processes around it: one
// process dead-letters messages, the CLI lists them and requeues them, and a
// consumer in another process receives them; tasks, boards and locks are
// read and changed the same way.
func TestOpsCLI(t *testing.T) {
	url := testredis.URL(t)
	cfg, _ := queueConfig(t, url, "  defaults:\n    max_retries: 0\n    retry_delay: 0\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ops := func(args ...string) result {
		t.Helper()
		return runShield(t, ctx, append([]string{"ops", "--config", cfg}, args...)...)
	}
	okJSON := func(v any, args ...string) string {
		t.Helper()
		r := ops(append(args, "--json")...)
		if r.code != 0 {
			t.Fatalf("shield ops %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
			t.Fatalf("shield ops %v: %v\n%s", args, err, r.stdout)
		}
		return r.stdout
	}

	// It stays up: it registered a task.
	startProc(t, cfg, writeFile(t, "producer.lua", opsProducer))

	// queues: a table by default, JSON with --json.
	r := ops("queues")
	if r.code != 0 || !strings.Contains(r.stdout, "QUEUE") || !strings.Contains(r.stdout, "jobs") {
		t.Fatalf("shield ops queues: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var qs struct {
		Queues []struct {
			Name, Kind  string
			DeadLetters int64  `json:"dead_letters"`
			OldestAgeMs *int64 `json:"oldest_age_ms"`
		}
	}
	okJSON(&qs, "queues")
	if len(qs.Queues) != 1 || qs.Queues[0].Name != "jobs" || qs.Queues[0].Kind != "reliable" || qs.Queues[0].DeadLetters != 3 ||
		qs.Queues[0].OldestAgeMs != nil {
		t.Fatalf("queues: %+v", qs)
	}

	var dead struct {
		DeadLetters []struct{ ID, Preview string } `json:"dead_letters"`
	}
	okJSON(&dead, "dead", "jobs")
	if len(dead.DeadLetters) != 3 || dead.DeadLetters[0].Preview != `{"job":1}` {
		t.Fatalf("dead letters: %+v", dead)
	}

	// The consumer in its own process gets what the CLI requeues: one by
	// id, then the rest.
	consumer := startProc(t, cfg, writeFile(t, "consumer.lua", opsConsumer))
	if r := ops("requeue", "jobs", dead.DeadLetters[1].ID); r.code != 0 || !strings.Contains(r.stdout, "requeued 1") {
		t.Fatalf("requeue one: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	consumer.waitFor("got 2", 1, 30*time.Second)
	if n := consumer.count("got "); n != 1 {
		t.Fatalf("consumer got %d messages after one requeue:\n%s", n, consumer.stdout.String())
	}
	if r := ops("requeue", "jobs", dead.DeadLetters[1].ID); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("requeue of a requeued id: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := ops("requeue", "jobs", "--all"); r.code != 0 || !strings.Contains(r.stdout, "requeued 2") {
		t.Fatalf("requeue --all: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	consumer.waitFor("got 1", 1, 30*time.Second)
	consumer.waitFor("got 3", 1, 30*time.Second)
	okJSON(&dead, "dead", "jobs")
	if len(dead.DeadLetters) != 0 {
		t.Fatalf("dead letters left: %+v", dead)
	}

	// tasks: the distributed task the producer left, paused and resumed
	// for every process, then removed.
	taskStatus := func() string {
		var ts struct {
			Tasks []struct{ Name, Status string }
		}
		okJSON(&ts, "tasks")
		for _, tk := range ts.Tasks {
			if tk.Name == "nightly" {
				return tk.Status
			}
		}
		return "absent"
	}
	if s := taskStatus(); s != "active" {
		t.Fatalf("nightly is %s", s)
	}
	for _, step := range []struct{ action, want string }{{"pause", "paused"}, {"resume", "active"}, {"disable", "disabled"}, {"enable", "active"}, {"remove", "absent"}} {
		if r := ops(step.action, "nightly"); r.code != 0 {
			t.Fatalf("%s: %d\n%s%s", step.action, r.code, r.stdout, r.stderr)
		}
		if s := taskStatus(); s != step.want {
			t.Fatalf("after %s nightly is %s, want %s", step.action, s, step.want)
		}
	}
	if r := ops("pause", "nightly"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("pause of a removed task: %d\n%s", r.code, r.stderr)
	}

	// board and lock.
	var board struct {
		Count int
		Top   []struct {
			Rank int
			UID  string
		}
	}
	okJSON(&board, "board", "arena", "--top", "3")
	if board.Count != 5 || len(board.Top) != 3 || board.Top[0].UID != "p5" || board.Top[2].Rank != 3 {
		t.Fatalf("board: %+v", board)
	}
	var lk struct {
		Held   bool
		TTLMs  int64 `json:"ttl_ms"`
		Owners []struct{ Owner string }
	}
	okJSON(&lk, "lock", "cli_lock")
	if !lk.Held || lk.TTLMs <= 0 || len(lk.Owners) != 1 {
		t.Fatalf("lock: %+v", lk)
	}
	if r := ops("lock", "cli_lock"); r.code != 0 || !strings.Contains(r.stdout, "held, exclusive") {
		t.Fatalf("lock table: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Bad input.
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"requeue", "jobs"}, 2, "or QUEUE --all"},
		{[]string{"requeue", "jobs", "1-0", "--all"}, 2, "or QUEUE --all"},
		{[]string{"dead", "nosuch"}, 1, "no such queue"},
		{[]string{"frobnicate"}, 2, `unknown ops command "frobnicate"`},
		{[]string{"board", "arena", "--top", "0"}, 2, "--top 0"},
		{[]string{"trigger", "nightly"}, 1, "not found"},
	} {
		if r := ops(c.args...); r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("shield ops %v: exit %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.msg)
		}
	}
}

// opsHolder registers the distributed task "job" (it never fires during
// the test) and prints "ran <manual>" at each run.
const opsHolder = `
shield.scheduler():cron("job", "0 3 1 1 *", function(info) print("ran " .. tostring(info.manual)) end, { distributed = true })
print("ready")
`

// shield ops trigger from a CLI that registers nothing: with two shield
// processes holding a distributed task, each trigger runs it once in one
// of them (a manual run, counted in run_count); with none up, the CLI says
// it did not run.
func TestOpsCLITrigger(t *testing.T) {
	url := testredis.URL(t)
	cfg, _ := queueConfig(t, url, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ops := func(args ...string) result {
		t.Helper()
		return runShield(t, ctx, append([]string{"ops", "--config", cfg}, args...)...)
	}
	procs := []*proc{startProc(t, cfg, writeFile(t, "a.lua", opsHolder)), startProc(t, cfg, writeFile(t, "b.lua", opsHolder))}
	ran := func() (manual, other int) {
		for _, p := range procs {
			manual += p.count("ran true")
			other += p.count("ran false")
		}
		return manual, other
	}
	const n = 4
	for i := 1; i <= n; i++ {
		args := []string{"trigger", "job"}
		if i == n {
			args = append(args, "--json")
		}
		r := ops(args...)
		if r.code != 0 {
			t.Fatalf("trigger %d: exit %d\n%s%s", i, r.code, r.stdout, r.stderr)
		}
		if i < n && !strings.Contains(r.stdout, "job: trigger done, run by ") {
			t.Fatalf("trigger %d: %q", i, r.stdout)
		}
		if i == n {
			var res struct {
				Runner string
				OK     bool
			}
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || !res.OK || res.Runner == "" {
				t.Fatalf("trigger --json: %v %q", err, r.stdout)
			}
		}
		// The CLI returns once a process claimed it; the run follows.
		deadline := time.Now().Add(30 * time.Second)
		for m, _ := ran(); m < i; m, _ = ran() {
			if time.Now().After(deadline) {
				t.Fatalf("trigger %d: %d manual runs after 30s\n%s\n%s", i, m, procs[0].stdout.String(), procs[1].stdout.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var ts struct {
		Tasks []struct {
			Name string
			Runs int64
		}
	}
	r := ops("tasks", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &ts); err != nil || len(ts.Tasks) != 1 || ts.Tasks[0].Runs != n {
		t.Fatalf("tasks after %d triggers: %v %s%s", n, err, r.stdout, r.stderr)
	}
	if m, o := ran(); m != n || o != 0 {
		t.Fatalf("%d manual and %d scheduled runs after %d triggers\n%s\n%s", m, o, n, procs[0].stdout.String(), procs[1].stdout.String())
	}

	if r := ops("trigger", "nosuch"); r.code != 1 || !strings.Contains(r.stderr, "not found") || !strings.Contains(r.stderr, "only distributed tasks") {
		t.Fatalf("trigger nosuch: %d\n%s", r.code, r.stderr)
	}
	// Nobody holds it: the record stays, the trigger runs nowhere, and the
	// CLI says so.
	for _, p := range procs {
		p.cmd.Process.Kill()
		<-p.exited
	}
	r = ops("trigger", "job")
	if r.code != 1 || !strings.Contains(r.stderr, "no process that registered it took the trigger") {
		t.Fatalf("trigger with no process up: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// On the memory backend there is nothing to reach: a clear error.
func TestOpsCLIRefusesTheMemoryBackend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := runShield(t, ctx, "ops", "queues")
	if r.code != 1 || !strings.Contains(r.stderr, "no Redis configured") || !strings.Contains(r.stderr, "SHIELD_REDIS_URL") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}
