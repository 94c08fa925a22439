package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testlog"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// redisConfigFile writes a config for the standalone test Redis under a
// private prefix; it returns the file and the prefix.
func redisConfigFile(t *testing.T) (string, string) {
	prefix := testredis.Prefix(t)
	return writeFile(t, "redis.yaml", fmt.Sprintf("global:\n  redis:\n    url: %q\n    prefix: %q\n", testredis.URL(t), prefix)), prefix
}

// runMany runs `shield run --config cfg script args(i)...` for i in [0,n)
// as n concurrent processes and returns their results.
func runMany(t *testing.T, n int, cfg, script string, args func(i int) []string) []result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res := make([]result, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res[i] = runShield(t, ctx, append([]string{"run", "--config", cfg, script}, args(i)...)...)
		}(i)
	}
	wg.Wait()
	for i, r := range res {
		if r.code != 0 {
			t.Fatalf("process %d exited %d:\n%s", i, r.code, r.stderr)
		}
	}
	return res
}

var kvLine = regexp.MustCompile(`(\w+)=(\S+)`)

func fields(t *testing.T, out string) map[string]string {
	m := map[string]string{}
	for _, kv := range kvLine.FindAllStringSubmatch(out, -1) {
		m[kv[1]] = kv[2]
	}
	return m
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// Seed 004, scenario 1: 4 processes × 200 claimers, 100 items: exactly 100.
func TestLimitedGrantAcrossProcesses(t *testing.T) {
	cfg, _ := redisConfigFile(t)
	res := runMany(t, 4, cfg, "../../examples/limited_grant.lua", func(int) []string { return []string{"mp", "200"} })
	total := 0
	for _, r := range res {
		f := fields(t, r.stdout)
		total += atoi(t, f["granted_here"])
		if atoi(t, f["granted_total"])+atoi(t, f["stock"]) != 100 {
			t.Fatalf("granted_total + stock != 100: %s", r.stdout)
		}
	}
	if total != 100 {
		t.Fatalf("granted %d items in total, want exactly 100", total)
	}
}

// Seed 004, scenario 2: 3 servers see the kill; one reward.
func TestWorldBossRewardGrantedOnce(t *testing.T) {
	cfg, _ := redisConfigFile(t)
	res := runMany(t, 3, cfg, "../../examples/world_boss.lua", func(i int) []string { return []string{"boss-mp", fmt.Sprintf("server-%d", i)} })
	wins := 0
	for _, r := range res {
		f := fields(t, r.stdout)
		wins += atoi(t, f["granted_here"])
		if f["rewards_total"] != "1" {
			t.Fatalf("rewards_total = %s, want 1: %s", f["rewards_total"], r.stdout)
		}
	}
	if wins != 1 {
		t.Fatalf("the reward was granted %d times", wins)
	}
}

// Seed 004, scenario 3: 3 servers × 21 players: nobody matched twice, nobody lost.
func TestMatchingPoolAcrossProcesses(t *testing.T) {
	cfg, _ := redisConfigFile(t)
	const servers, players = 3, 21
	res := runMany(t, servers, cfg, "../../examples/matching_pool.lua", func(i int) []string {
		return []string{"mp", fmt.Sprintf("s%d", i), strconv.Itoa(players), strconv.Itoa(servers)}
	})
	seen := map[string]int{}
	var left []string
	for _, r := range res {
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			parts := strings.Fields(line)
			switch {
			case len(parts) == 3 && parts[0] == "match":
				seen[parts[1]]++
				seen[parts[2]]++
			case len(parts) >= 1 && parts[0] == "left":
				left = parts[1:] // every process prints the final pool; the last one is the truth
			}
		}
	}
	for p, n := range seen {
		if n > 1 {
			t.Fatalf("%s matched %d times", p, n)
		}
	}
	if len(seen)+len(left) != servers*players || len(left) > 1 {
		t.Fatalf("matched %d, left %v, want %d players in all and at most one left", len(seen), left, servers*players)
	}
}

// 4 processes × 8 tasks do read-modify-write increments of one counter
// under distributed_mutex: none is lost.
func TestMutualExclusionAcrossProcesses(t *testing.T) {
	cfg, _ := redisConfigFile(t)
	script := writeFile(t, "counter.lua", `
		local g = shield.global()
		local m = shield.distributed_mutex("counter", { ttl = 5000 })
		local done = 0
		for _ = 1, 8 do
			shield.spawn(function()
				for _ = 1, 25 do
					m:with(function()
						local v = g:get("counter") or 0
						shield.sleep(0) -- give every other task a chance to interleave
						g:set("counter", v + 1)
					end)
				end
				done = done + 1
			end)
		end
		while done < 8 do shield.sleep(5) end
		print("final=" .. g:get("counter"))`)
	res := runMany(t, 4, cfg, script, func(int) []string { return nil })
	max := 0
	for _, r := range res {
		if n := atoi(t, fields(t, r.stdout)["final"]); n > max {
			max = n
		}
	}
	if max != 4*8*25 {
		t.Fatalf("counter = %d, want %d (increments lost: mutual exclusion broken)", max, 4*8*25)
	}
}

// startHolder starts a `shield run` process and waits until it prints ready.
func startHolder(t *testing.T, cfg, script string) (*exec.Cmd, *testlog.Buffer) {
	t.Helper()
	cmd := exec.Command(shieldBin(t), "run", "--config", cfg, script)
	out := &testlog.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "ready") {
		if time.Now().After(deadline) {
			t.Fatalf("holder never got ready:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd, out
}

// A holder killed mid-section frees its lock after the ttl; the others continue.
func TestKilledHolderFreesItsLockAfterTTL(t *testing.T) {
	cfg, _ := redisConfigFile(t)
	holder, _ := startHolder(t, cfg, writeFile(t, "holder.lua", `
		local l = shield.distributed_mutex("crash", { ttl = 1000 })
		assert(l:acquire())
		print("ready")
		shield.sleep(600000)`))
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	r := runShield(t, context.Background(), "run", "--config", cfg, writeFile(t, "next.lua", `
		local l = shield.distributed_mutex("crash", { ttl = 1000 })
		local ok, why = l:acquire(15000)
		print("acquired=" .. tostring(ok) .. " why=" .. tostring(why))
		l:release()`))
	if r.code != 0 || !strings.Contains(r.stdout, "acquired=true") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// A holder paused (SIGSTOP) past its lease loses the lock to another
// process; when it wakes, its late write carries an old fencing token and
// the fenced resource rejects it.
func TestPausedHolderIsRejectedByAFencedResource(t *testing.T) {
	cfg, prefix := redisConfigFile(t)
	client := testredis.Standalone(t)
	// The fenced resource: a service that applies writes only with a token
	// at least as high as any it has seen.
	type write struct {
		Token float64 `json:"token"`
		Who   string  `json:"who"`
	}
	var mu sync.Mutex
	var highest float64
	var accepted, rejected []string
	ps := client.Subscribe(context.Background(), prefix+"pubsub:fenced")
	defer ps.Close()
	if _, err := ps.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	go func() {
		for msg := range ps.Channel() {
			var w write
			if json.Unmarshal([]byte(msg.Payload), &w) != nil {
				continue
			}
			mu.Lock()
			if w.Token >= highest {
				highest = w.Token
				accepted = append(accepted, w.Who)
			} else {
				rejected = append(rejected, w.Who)
			}
			mu.Unlock()
		}
	}()
	writer := `
		local who = ...
		local l = shield.distributed_mutex("fenced", { ttl = 500, extend_interval = 150 })
		assert(l:acquire(20000))
		print("ready token=" .. l:token())
		shield.sleep(1000) -- the section; SIGSTOP lands here
		shield.global():publish("fenced", { token = l:token(), who = who })
		local ok, why = l:release()
		print("released=" .. tostring(ok) .. " why=" .. tostring(why))`
	script := writeFile(t, "writer.lua", writer)
	a := exec.Command(shieldBin(t), "run", "--config", cfg, script, "A")
	aOut := &testlog.Buffer{}
	a.Stdout, a.Stderr = aOut, aOut
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Process.Kill()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(aOut.String(), "ready"); {
		if time.Now().After(deadline) {
			t.Fatalf("A never acquired:\n%s", aOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.Process.Signal(syscall.SIGSTOP)
	b := runShield(t, context.Background(), "run", "--config", cfg, script, "B") // waits out A's lease
	if b.code != 0 {
		t.Fatalf("B exit %d:\n%s", b.code, b.stderr)
	}
	a.Process.Signal(syscall.SIGCONT)
	if err := a.Wait(); err != nil {
		t.Fatalf("A: %v\n%s", err, aOut.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(accepted) + len(rejected)
		mu.Unlock()
		if n == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(accepted, ",") != "B" || strings.Join(rejected, ",") != "A" {
		t.Fatalf("accepted %v, rejected %v; want B accepted and A's late write rejected\nA:\n%s\nB:\n%s", accepted, rejected, aOut.String(), b.stdout)
	}
	if !strings.Contains(aOut.String(), "released=false why=lost") {
		t.Fatalf("A did not learn it lost the lock:\n%s", aOut.String())
	}
}
