package main

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/internal/testlog"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// proc is a `shield run` process whose output the test reads as it comes.
type proc struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr *testlog.Buffer
	exited         chan error
}

// startProc starts `shield run --config cfg script args...` and waits until
// it prints "ready".
func startProc(t *testing.T, cfg, script string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, stdout: &testlog.Buffer{}, stderr: &testlog.Buffer{}, exited: make(chan error, 1)}
	argv := []string{"run"}
	if cfg != "" {
		argv = append(argv, "--config", cfg)
	}
	p.cmd = exec.Command(shieldBin(t), append(append(argv, script), args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { p.cmd.Process.Kill() })
	p.waitFor("ready", 1, 60*time.Second)
	return p
}

// count is the number of stdout lines starting with prefix.
func (p *proc) count(prefix string) int {
	n := 0
	for _, l := range strings.Split(p.stdout.String(), "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func (p *proc) waitFor(prefix string, n int, d time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for p.count(prefix) < n {
		select {
		case err := <-p.exited:
			p.exited <- err
			if p.count(prefix) >= n {
				return
			}
			p.t.Fatalf("process exited (%v) before printing %d × %q:\nstdout tail: %s\nstderr:\n%s", err, n, prefix, tail(p.stdout.String()), p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %d × %q after %v:\nstdout tail: %s\nstderr:\n%s", n, prefix, d, tail(p.stdout.String()), p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wait waits for the process to exit by itself and fails on a non-zero
// status.
func (p *proc) wait(d time.Duration) {
	p.t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			p.t.Fatalf("process failed: %v\nstderr:\n%s", err, p.stderr.String())
		}
	case <-time.After(d):
		p.t.Fatalf("process still running after %v:\nstdout tail: %s\nstderr:\n%s", d, tail(p.stdout.String()), p.stderr.String())
	}
}

// fieldsOf returns the numeric fields after prefix on each matching line:
// "done 12 1700000000000" -> [12 1700000000000].
func (p *proc) fieldsOf(prefix string) [][]int64 {
	var out [][]int64
	for _, l := range strings.Split(p.stdout.String(), "\n") {
		rest, ok := strings.CutPrefix(l, prefix)
		if !ok {
			continue
		}
		var row []int64
		for _, f := range strings.Fields(rest) {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				p.t.Fatalf("bad line %q", l)
			}
			row = append(row, v)
		}
		out = append(out, row)
	}
	return out
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

// queueConfig writes a config for Redis at url under a private prefix with
// extra queue settings (YAML under queue:).
func queueConfig(t *testing.T, url, queueYAML string) (string, string) {
	prefix := testredis.Prefix(t)
	return writeFile(t, "queue.yaml", fmt.Sprintf("global:\n  redis:\n    url: %q\n    prefix: %q\nqueue:\n%s", url, prefix, queueYAML)), prefix
}

// goQueues opens the queue backend the processes use, for the test's own
// pushes and checks.
func goQueues(t *testing.T, c redis.UniversalClient, prefix string) queue.Backend {
	b := queue.NewRedis(c, prefix, nil, queue.RedisOptions{Consumer: "test"})
	t.Cleanup(func() { b.Close() })
	return b
}

func queueOptions(mut func(*queue.Options)) queue.Options {
	// The default config's queue section, as the module reads it.
	c, ms := config.Default().Queue, func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	o := queue.Options{MaxLength: c.Defaults.MaxLength, MessageTTL: ms(c.Defaults.MessageTTL), MaxRetries: c.Defaults.MaxRetries,
		RetryDelay: ms(c.Defaults.RetryDelay), VisibilityTimeout: ms(c.Defaults.VisibilityTimeout),
		DeadLetter: queue.DeadLetterOptions{Enabled: c.DeadLetter.Enabled, MaxLength: c.DeadLetter.MaxLength, TTL: ms(c.DeadLetter.TTL)}}
	if mut != nil {
		mut(&o)
	}
	return o
}

// pushNumbers pushes 1..n to a reliable queue in batches.
func pushNumbers(t *testing.T, r queue.Reliable, from, to int) {
	t.Helper()
	for i := from; i <= to; i += 500 {
		var batch [][]byte
		for j := i; j < i+500 && j <= to; j++ {
			batch = append(batch, []byte(strconv.Itoa(j)))
		}
		if _, err := r.PushBatch(batch).Do(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQueueExamples(t *testing.T) {
	redisCfg, _ := redisConfigFile(t)
	for name, cfg := range map[string]string{"memory": "", "redis": redisCfg} {
		t.Run(name, func(t *testing.T) {
			args := func(script string, rest ...string) []string {
				a := []string{"run"}
				if cfg != "" {
					a = append(a, "--config", cfg)
				}
				return append(append(a, "../../examples/"+script), rest...)
			}
			r := runShield(t, context.Background(), args("queue_delayed_reward.lua", "200", "20")...)
			if r.code != 0 || !strings.Contains(r.stdout, "granted=20 pending=0") {
				t.Fatalf("delayed reward: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			t.Logf("delayed reward: %s", lastLine(r.stdout))
			r = runShield(t, context.Background(), args("queue_event_broadcast.lua", "10")...)
			if r.code != 0 || !strings.Contains(r.stdout, "events=10 notified=10 checked=10") {
				t.Fatalf("event broadcast: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// reliableConsumer consumes the reliable queue "jobs": it prints
// "start n" when a handler starts and "done n <ms>" when it finishes (the ack
// follows), and exits once every message is acknowledged.
const reliableConsumer = `
local q = shield.reliable_queue("jobs")
local c = q:consume("worker", function(n)
	print("start " .. n)
	shield.sleep(math.random(0, 2))
	print("done " .. n .. " " .. shield.now_ms())
end, { concurrency = 8 })
print("ready")
repeat shield.sleep(100) until q:length() == 0
c:stop()
print("exit")
`

// 3 consumer processes on a reliable queue of 10 000 messages; one is
// SIGKILLed mid-message. Every message is processed at least once and none
// is left pending; only messages the killed process had started are
// processed twice.
func TestReliableQueueSurvivesAKilledConsumer(t *testing.T) {
	const total = 10000
	cfg, prefix := queueConfig(t, testredis.URL(t), "  defaults:\n    visibility_timeout: 1000\n")
	b := goQueues(t, testredis.Standalone(t), prefix)
	opts := queueOptions(func(o *queue.Options) { o.VisibilityTimeout = time.Second })
	r, err := b.Reliable("jobs", opts)
	if err != nil {
		t.Fatal(err)
	}
	pushNumbers(t, r, 1, total)
	script := writeFile(t, "consumer.lua", reliableConsumer)
	procs := []*proc{startProc(t, cfg, script), startProc(t, cfg, script), startProc(t, cfg, script)}
	victim := procs[0]
	victim.waitFor("done", 500, 60*time.Second)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now().UnixMilli()
	<-victim.exited
	for _, p := range procs[1:] {
		p.wait(120 * time.Second)
	}

	started := map[int64]bool{}
	for _, f := range victim.fieldsOf("start ") {
		started[f[0]] = true
	}
	doneCount := map[int64]int{}
	firstAfterKill := int64(0)
	for i, p := range procs {
		for _, f := range p.fieldsOf("done ") {
			doneCount[f[0]]++
			if i > 0 && started[f[0]] && f[1] >= killedAt && (firstAfterKill == 0 || f[1] < firstAfterKill) {
				firstAfterKill = f[1]
			}
		}
	}
	dups := 0
	for n := int64(1); n <= total; n++ {
		switch c := doneCount[n]; {
		case c == 0:
			t.Errorf("message %d was never processed", n)
		case c > 1 && !started[n]:
			t.Errorf("message %d was processed %d times but the killed process never started it", n, c)
		case c > 1:
			dups++
		}
	}
	st, err := r.Stats().Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Length != 0 || st.InFlight != 0 || st.Retrying != 0 || st.DeadLetters != 0 {
		t.Fatalf("left behind: %+v", st)
	}
	held := 0
	for n := range started {
		if victim.count(fmt.Sprintf("done %d ", n)) == 0 {
			held++
		}
	}
	t.Logf("victim started %d (%d unfinished when killed); duplicates %d; survivors took over a held message %d ms after the kill (visibility timeout 1000 ms); reclaimed %d",
		len(started), held, dups, firstAfterKill-killedAt, st.Reclaimed)
}

// broadcastSubscriber subscribes group arg[1] of "events" and prints
// "got n" for each message; it exits after arg[2] messages (or on SIGTERM
// when arg[2] is 0) and a short quiet period.
const broadcastSubscriber = `
local group, want = arg[1], tonumber(arg[2])
local q = shield.broadcast_queue("events")
local got = 0
local s = q:subscribe(group, function(n) got = got + 1; print("got " .. n) end, { concurrency = 4 })
print("ready")
if want == 0 then shield.sleep(math.huge) end
while got < want do shield.sleep(10) end
shield.sleep(300) -- a duplicate would show up here
s:stop()
`

// Broadcast to 3 groups in 3 processes, one group offline for part of the
// run: each group sees every message exactly once.
func TestBroadcastGroupsAcrossProcesses(t *testing.T) {
	const total = 300
	cfg, _ := queueConfig(t, testredis.URL(t), "  enabled: true\n")
	sub := writeFile(t, "sub.lua", broadcastSubscriber)
	producer := writeFile(t, "producer.lua", `
		local q = shield.broadcast_queue("events")
		local n = tonumber(arg[1])
		print("ready")
		for i = 1, n do
			q:push(i)
			if i % 10 == 0 then print("pushed " .. i); shield.sleep(5) end
		end`)
	a := startProc(t, cfg, sub, "A", strconv.Itoa(total))
	b := startProc(t, cfg, sub, "B", strconv.Itoa(total))
	c1 := startProc(t, cfg, sub, "C", "0") // creates group C, then goes offline
	prod := startProc(t, cfg, producer, strconv.Itoa(total))
	prod.waitFor("pushed", total/30, 60*time.Second)
	if err := c1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-c1.exited
	prod.wait(60 * time.Second)
	seenByC1 := c1.count("got ")
	c2 := startProc(t, cfg, sub, "C", strconv.Itoa(total-seenByC1))
	for _, p := range []*proc{a, b, c2} {
		p.wait(60 * time.Second)
	}
	check := func(group string, ps ...*proc) {
		counts := map[int64]int{}
		for _, p := range ps {
			for _, f := range p.fieldsOf("got ") {
				counts[f[0]]++
			}
		}
		for n := int64(1); n <= total; n++ {
			if counts[n] != 1 {
				t.Errorf("group %s saw message %d %d times", group, n, counts[n])
			}
		}
	}
	check("A", a)
	check("B", b)
	check("C", c1, c2)
	t.Logf("group C was offline after %d messages and caught up on %d", seenByC1, total-seenByC1)
}

// Delay accuracy across processes: one pushes 1 000 messages due 100 ms to
// 2 s later, another consumes them; the lateness (due -> handler start) is
// reported.
func TestDelayQueueLatenessAcrossProcesses(t *testing.T) {
	const total = 1000
	cfg, _ := queueConfig(t, testredis.URL(t), "  enabled: true\n")
	consumer := startProc(t, cfg, writeFile(t, "consumer.lua", `
		local q = shield.delay_queue("timers")
		local got, want = 0, tonumber(arg[1])
		local c = q:consume("w", function(m)
			print("late " .. (shield.now_ms() - m.due))
			got = got + 1
		end, { concurrency = 16 })
		print("ready")
		while got < want do shield.sleep(20) end
		c:stop()`), strconv.Itoa(total))
	producer := startProc(t, cfg, writeFile(t, "producer.lua", `
		local q = shield.delay_queue("timers")
		print("ready")
		for i = 1, tonumber(arg[1]) do
			local delay = 100 + (i * 7919) % 1900
			q:push({ due = shield.now_ms() + delay }, delay)
		end`), strconv.Itoa(total))
	producer.wait(60 * time.Second)
	consumer.wait(60 * time.Second)
	var late []int64
	for _, f := range consumer.fieldsOf("late ") {
		late = append(late, f[0])
	}
	if len(late) != total {
		t.Fatalf("delivered %d of %d", len(late), total)
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	t.Logf("delay lateness over %d messages (race-enabled binary, loaded machine): min %d ms, P50 %d ms, P99 %d ms, max %d ms",
		total, late[0], late[total/2], late[total*99/100], late[total-1])
}

// Redis frozen (SIGSTOP) for 5 s in the middle of a run, then restarted
// (its data is gone): the consumer resumes by itself each time, and no
// message pushed before the freeze is lost.
func TestReliableConsumerRidesOutAFrozenAndRestartedRedis(t *testing.T) {
	const total = 3000
	srv := testredis.StartServer(t)
	cfg, prefix := queueConfig(t, srv.URL(), "  enabled: true\n")
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	b := goQueues(t, client, prefix)
	r, err := b.Reliable("jobs", queueOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	pushNumbers(t, r, 1, total)
	p := startProc(t, cfg, writeFile(t, "consumer.lua", `
		local q = shield.reliable_queue("jobs")
		q:consume("worker", function(n)
			shield.sleep(1)
			print("done " .. n)
		end, { concurrency = 4 })
		print("ready")`))
	p.waitFor("done", total/4, 60*time.Second)
	pid := redisPID(t, client)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed := time.Now()
	before := p.count("done")
	p.waitFor("done", before+1, 30*time.Second)
	t.Logf("first message after the freeze: %v after SIGCONT", time.Since(thawed))
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := r.Length().Do(context.Background())
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still unacknowledged (%v)", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	seen := map[int64]int{}
	for _, f := range p.fieldsOf("done ") {
		seen[f[0]]++
	}
	dups := 0
	for n := int64(1); n <= total; n++ {
		if seen[n] == 0 {
			t.Errorf("message %d was lost in the freeze", n)
		}
		if seen[n] > 1 {
			dups++
		}
	}
	t.Logf("%d messages processed twice (acks lost in the freeze)", dups)

	srv.Restart()
	restarted := time.Now()
	const more = 200
	for {
		if _, err := r.Push([]byte("0")).Do(context.Background()); err == nil {
			break
		}
		if time.Since(restarted) > 30*time.Second {
			t.Fatal("cannot push after the restart")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 1; i < more; i++ {
		if _, err := r.Push([]byte("0")).Do(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	zeros := func() int { return p.count("done 0") }
	for zeros() < more {
		if time.Since(restarted) > 60*time.Second {
			t.Fatalf("after the restart the consumer processed %d of %d:\n%s", zeros(), more, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("after the restart: %d messages consumed within %v", more, time.Since(restarted))
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(30 * time.Second)
}

func redisPID(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ := strconv.Atoi(v)
			return pid
		}
	}
	t.Fatal("no process_id in INFO server")
	return 0
}
