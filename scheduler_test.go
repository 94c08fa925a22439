package shieldglobal

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// GET /ops/scheduler over a real HTTP connection, field by field, on the
// memory backend and on Redis; 401 without the token.
func TestOpsSchedulerReport(t *testing.T) {
	for name, base := range map[string]func(*testing.T) Config{
		"memory": func(*testing.T) Config { return config.Default() },
		"redis":  redisConfig,
	} {
		t.Run(name, func(t *testing.T) {
			cfg := base(t)
			cfg.Ops.Enabled, cfg.Ops.Listen, cfg.Ops.Token = true, "127.0.0.1:0", "s3cret"
			m := newModule(t, cfg)
			if m.OpsAddr() == "" {
				t.Fatal("no ops address")
			}
			rt := newRuntime(t, m)
			if err := rt.RunString(`
				local s = shield.scheduler()
				s:cron("daily_reset", "0 0 * * *", function() end, { distributed = true })
				local beats = 0
				s:interval("heartbeat", 30, function() beats = beats + 1 end)
				while s:get("heartbeat"):run_count() < 2 do shield.sleep(5) end`, "ops.lua"); err != nil {
				t.Fatal(err)
			}
			url := "http://" + m.OpsAddr() + "/ops/scheduler"

			resp, err := http.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("without the token: %s, want 401", resp.Status)
			}

			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer s3cret")
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%s %s: %s", resp.Status, resp.Header.Get("Content-Type"), body)
			}
			var rep map[string][]map[string]any
			if err := json.Unmarshal(body, &rep); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			tasks := rep["tasks"]
			if len(rep) != 1 || len(tasks) != 2 {
				t.Fatalf("report: %s", body)
			}
			for _, task := range tasks {
				var keys []string
				for k := range task {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				// The spec's fields, and the failure counters beside them.
				if want := []string{"distributed", "failures", "last_error", "last_run", "missed", "name", "next_run", "run_count", "schedule", "skipped", "status"}; !slices.Equal(keys, want) {
					t.Fatalf("fields %v, want %v", keys, want)
				}
			}
			daily, beat := tasks[0], tasks[1] // sorted by name
			midnight := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Format(time.RFC3339)
			if daily["name"] != "daily_reset" || daily["schedule"] != "0 0 * * *" || daily["status"] != "active" ||
				daily["next_run"] != midnight || daily["last_run"] != nil || daily["run_count"] != 0.0 || daily["distributed"] != true {
				t.Fatalf("daily_reset: %v (next midnight %s)", daily, midnight)
			}
			if beat["name"] != "heartbeat" || beat["schedule"] != "30" || beat["status"] != "active" || beat["distributed"] != false {
				t.Fatalf("heartbeat: %v", beat)
			}
			if n, _ := beat["run_count"].(float64); n < 2 {
				t.Fatalf("heartbeat run_count %v", beat["run_count"])
			}
			for _, f := range []string{"next_run", "last_run"} {
				s, _ := beat[f].(string)
				ts, err := time.Parse(time.RFC3339, s)
				if err != nil || !strings.HasSuffix(s, "Z") || time.Since(ts).Abs() > time.Minute {
					t.Fatalf("heartbeat %s = %v (%v)", f, beat[f], err)
				}
			}

			req, _ = http.NewRequest(http.MethodGet, "http://"+m.OpsAddr()+"/ops/global", nil)
			req.Header.Set("Authorization", "Bearer s3cret")
			if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("/ops/global: %v %v", resp, err)
			}
			resp.Body.Close()
		})
	}
}

func TestOpsServerIsOffByDefault(t *testing.T) {
	m := newModule(t, config.Default())
	if m.OpsAddr() != "" {
		t.Fatalf("ops listening on %s with ops.enabled false", m.OpsAddr())
	}
}

func TestSchedulerDisabledRegistersNothing(t *testing.T) {
	cfg := config.Default()
	cfg.Scheduler.Enabled = false
	m := newModule(t, cfg)
	if m.sched != nil {
		t.Fatal("an engine started with scheduler.enabled false")
	}
	if _, err := m.scheduleGo("x", mustEvery(t, time.Second), m.schedOptions(), nil); !errors.Is(err, errNoScheduler) {
		t.Fatalf("scheduleGo: %v", err)
	}
	rt := newRuntime(t, m)
	if err := rt.RunString(`
		assert(shield.scheduler == nil, "shield.scheduler registered")
		local ok, err = pcall(shield.rank, "b", { reset = "daily" })
		assert(not ok and err:find("reset needs the scheduler", 1, true), err)`, "t.lua"); err != nil {
		t.Fatal(err)
	}
}

func mustEvery(t *testing.T, d time.Duration) scheduler.Schedule {
	s, err := scheduler.Every(d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The store follows scheduler.persistence: Redis by default, process
// memory with storage "memory" (or persistence off) even on Redis.
func TestSchedulerStoreFollowsPersistence(t *testing.T) {
	for _, c := range []struct {
		name    string
		tweak   func(*Config)
		inRedis bool
	}{
		{"redis", func(*Config) {}, true},
		{"storage memory", func(c *Config) { c.Scheduler.Persistence.Storage = config.StorageMemory }, false},
		{"persistence off", func(c *Config) { c.Scheduler.Persistence.Enabled = false }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := redisConfig(t)
			c.tweak(&cfg)
			m := newModule(t, cfg)
			rt := newRuntime(t, m)
			if err := rt.RunString(`
				local t = shield.scheduler():interval("persisted", 60000, function() end, { distributed = true })
				assert(t:info().distributed == true)`, "t.lua"); err != nil {
				t.Fatal(err)
			}
			n, err := testredis.Standalone(t).Exists(context.Background(), store.Keys{Prefix: cfg.Global.Redis.Prefix}.SchedulerTask("persisted")).Result()
			if err != nil || (n == 1) != c.inRedis {
				t.Fatalf("record in Redis: %d (%v), want %v", n, err, c.inRedis)
			}
		})
	}
}

func TestSchedulerDistributedOffRunsTasksLocally(t *testing.T) {
	cfg := config.Default()
	cfg.Scheduler.Distributed.Enabled = false
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	if err := rt.RunString(`
		local t = shield.scheduler():interval("solo", 60000, function() end, { distributed = true })
		assert(t:info().distributed == false)`, "t.lua"); err != nil {
		t.Fatal(err)
	}
}

// Go code of the Module (a leaderboard's reset) schedules Go-run tasks.
func TestScheduleGoRunsGoTasks(t *testing.T) {
	for name, base := range map[string]func(*testing.T) Config{
		"memory": func(*testing.T) Config { return config.Default() },
		"redis":  redisConfig,
	} {
		t.Run(name, func(t *testing.T) {
			m := newModule(t, base(t))
			var runs, fails atomic.Int32
			o := m.schedOptions()
			o.Distributed, o.MaxRetries, o.RetryDelay = true, 1, time.Millisecond
			info, err := m.scheduleGo("rank:reset", mustEvery(t, 20*time.Millisecond), o, func(ctx context.Context, f scheduler.Firing) error {
				if f.Attempt == 1 && fails.Add(1) == 1 {
					return errors.New("first attempt fails")
				}
				runs.Add(1)
				return ctx.Err()
			})
			if err != nil || !info.Distributed || info.Schedule != "20" {
				t.Fatalf("scheduleGo: %+v %v", info, err)
			}
			// A run is counted once its handler has returned: poll the info.
			deadline := time.Now().Add(5 * time.Second)
			for {
				got, err := m.sched.Get("rank:reset").Do(context.Background())
				if err != nil || got.Failed != 0 {
					t.Fatalf("info %+v %v (the failed first attempt was retried: no failed firing)", got, err)
				}
				if runs.Load() >= 3 && got.RunCount >= 3 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d runs; info %+v", runs.Load(), got)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := m.unscheduleGo("rank:reset"); err != nil {
				t.Fatal(err)
			}
			if err := m.unscheduleGo("rank:reset"); !errors.Is(err, scheduler.ErrNotFound) {
				t.Fatalf("second unschedule: %v", err)
			}
		})
	}
}

// shield.rank's periodic reset is a task of the Module's scheduler: it
// shows in scheduler:get and /ops/scheduler, and its runs reset the board.
func TestRankResetRunsOnTheScheduler(t *testing.T) {
	for name, base := range map[string]func(*testing.T) Config{
		"memory": func(*testing.T) Config { return config.Default() },
		"redis":  redisConfig,
	} {
		t.Run(name, func(t *testing.T) {
			m := newModule(t, base(t))
			rt := newRuntime(t, m)
			if err := rt.RunString(`
				local board = shield.rank("daily_score", { reset = "daily", reset_time = "04:30" })
				board:update("alice", 10)
				local s = shield.scheduler()
				local task = s:get("rank:daily_score:reset") -- registered before shield.rank returned
				assert(task, "no reset task")
				local deadline = shield.now_ms() + 5000
				assert(task:schedule() == "30 4 * * *", task:schedule())
				assert(task:info().distributed == true and task:info().timezone == "UTC")
				-- A manual run would close the period under way: it changes
				-- nothing and says so (the next firing resets the board).
				assert(s:trigger("rank:daily_score:reset"))
				while s:get("rank:daily_score:reset"):run_count() < 1 do
					assert(shield.now_ms() < deadline, "the manual run did not finish")
					shield.sleep(5)
				end
				local info = s:get("rank:daily_score:reset"):info()
				assert(info.failed == 1 and info.last_error:find("runs only at its scheduled firings", 1, true), info.last_error)
				assert(board:count() == 1, "a manual run cleared the board")`, "rank.lua"); err != nil {
				t.Fatal(err)
			}
			rep, err := m.opsScheduler(context.Background())
			if err != nil || len(rep.Tasks) != 1 || rep.Tasks[0].Name != "rank:daily_score:reset" || !rep.Tasks[0].Distributed {
				t.Fatalf("ops report %+v %v", rep, err)
			}
		})
	}
}

// shield.rank with a reset registers the task before it returns, on a
// Redis it cannot reach too: then it raises, saying what failed, and
// declaring the board again once Redis is back registers the task. (The
// registration used to go out on a goroutine that only logged its failure,
// and a second declaration registered nothing: the board never reset.)
func TestRankResetRegistrationFailureIsRaisedAndRetried(t *testing.T) {
	srv := testredis.StartServer(t)
	cfg := config.Default()
	cfg.Global.Redis.URL = srv.URL()
	cfg.Global.Redis.Prefix = testredis.Prefix(t)
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	srv.Stop()
	if err := rt.RunString(`
		local ok, err = pcall(shield.rank, "weekly_score", { reset = "weekly" })
		assert(not ok, "shield.rank returned with Redis down")
		assert(err:find('shield.rank: registering the reset of "weekly_score"', 1, true), err)
		shield.sleep(1500) -- Redis stays down past the client's own retries`, "down.lua"); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if err := rt.RunString(`
		local s = shield.scheduler()
		local deadline = shield.now_ms() + 10000
		local board
		repeat -- the client reconnects
			local ok, err = pcall(shield.rank, "weekly_score", { reset = "weekly" })
			if ok then board = err else assert(shield.now_ms() < deadline, err); shield.sleep(20) end
		until board
		local task = s:get("rank:weekly_score:reset")
		assert(task, "declaring the board again registered nothing")
		assert(task:schedule() == "0 0 * * 1", task:schedule())`, "up.lua"); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	n, err := c.Exists(context.Background(),
		store.Keys{Prefix: cfg.Global.Redis.Prefix}.SchedulerTask("rank:weekly_score:reset")).Result()
	if err != nil || n != 1 {
		t.Fatalf("the task's record in Redis: %d %v", n, err)
	}
}
