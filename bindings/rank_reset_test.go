package bindings

import (
	"errors"

	"strings"
	"sync"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/rank"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	"github.com/shieldrt/shieldglobal/internal/testclock"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// fakeScheduler records registrations; runs are started by the test.
type fakeScheduler struct {
	mu    sync.Mutex
	tasks []fakeTask
	fail  error
}

type fakeTask struct {
	name, cron  string
	distributed bool
	run         func(f scheduler.Firing, done func(error))
}

func (s *fakeScheduler) Register(name, cronExpr string, distributed bool, run func(f scheduler.Firing, done func(error))) *store.Op[scheduler.Info] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return store.Failed[scheduler.Info](s.fail)
	}
	s.tasks = append(s.tasks, fakeTask{name, cronExpr, distributed, run})
	return store.Local(func() (scheduler.Info, error) { return scheduler.Info{Name: name}, nil })
}

func (s *fakeScheduler) registered() []fakeTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]fakeTask(nil), s.tasks...)
}

// fire runs the firing of task name scheduled at at and waits for its done.
func (s *fakeScheduler) fire(t *testing.T, name string, at time.Time) error {
	t.Helper()
	return s.run(t, name, scheduler.Firing{Task: name, Scheduled: at, Attempt: 1})
}

// run runs f of task name and waits for its done.
func (s *fakeScheduler) run(t *testing.T, name string, f scheduler.Firing) error {
	t.Helper()
	for _, task := range s.registered() {
		if task.name == name {
			ch := make(chan error, 1)
			task.run(f, func(err error) { ch <- err })
			select {
			case err := <-ch:
				return err
			case <-time.After(30 * time.Second):
				t.Fatalf("reset %s never finished", name)
			}
		}
	}
	t.Fatalf("no task %q in %+v", name, s.registered())
	return nil
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func testRanks(b rank.Backend, s RankScheduler) *Ranks {
	return &Ranks{Backend: b, MaxMembers: 10000, Archive: true, ArchiveTTL: 30 * 24 * time.Hour, Scheduler: s, Log: logTo(&syncBuffer{})}
}

func TestRankResetRegistersOneCronTaskPerBoard(t *testing.T) {
	s := &fakeScheduler{}
	caps := []runtime.Capability{testRanks(rank.NewMemory(nil), s)}
	rt := newTestRuntime(t, &runtime.Services{Capabilities: caps})
	mustRun(t, rt, `
		shield.rank("d", { reset = "daily" })
		shield.rank("d", { reset = "daily", reset_time = "00:00", distributed = true }) -- the same plan: no second task
		shield.rank("w", { reset = "weekly", reset_time = "23:05", distributed = false })
		shield.rank("m", { reset = "monthly", reset_time = "04:30", archive = false })
		shield.rank("d") -- a handle without reset registers nothing`)
	want := []fakeTask{
		{name: "rank:d:reset", cron: "0 0 * * *", distributed: true},
		{name: "rank:w:reset", cron: "5 23 * * 1", distributed: false},
		{name: "rank:m:reset", cron: "30 4 1 * *", distributed: true},
	}
	got := s.registered()
	if len(got) != len(want) {
		t.Fatalf("registered %+v, want %+v", got, want)
	}
	for i, w := range want {
		if g := got[i]; g.name != w.name || g.cron != w.cron || g.distributed != w.distributed || g.run == nil {
			t.Errorf("task %d = %+v, want %+v", i, g, w)
		}
	}

	// Another runtime of the same Module sees the registration too.
	rt2 := newTestRuntime(t, &runtime.Services{Capabilities: caps})
	mustRun(t, rt2, `shield.rank("d", { reset = "daily" })`)
	err := run(t, rt2, `shield.rank("d", { reset = "weekly" })`)
	if err == nil || !strings.Contains(err.Error(), `test.lua:1: shield.rank: board "d" already resets daily at 00:00 UTC`) {
		t.Fatalf("a second, different reset of one board: %v", err)
	}
	err = run(t, rt2, `shield.rank("d", { reset = "daily", max_members = 5 })`)
	if err == nil || !strings.Contains(err.Error(), "top 10000") || !strings.Contains(err.Error(), "top 5") {
		t.Fatalf("a reset with another max_members: %v", err)
	}
	if n := len(s.registered()); n != 3 {
		t.Fatalf("%d tasks after the refused ones, want 3", n)
	}
}

func TestRankResetSchedulerErrorsAreRaised(t *testing.T) {
	s := &fakeScheduler{fail: errors.New("scheduler: task exists")}
	rt := newTestRuntime(t, &runtime.Services{Capabilities: []runtime.Capability{testRanks(rank.NewMemory(nil), s)}})
	err := run(t, rt, `shield.rank("x", { reset = "daily" })`)
	if err == nil || !strings.Contains(err.Error(), `test.lua:1: shield.rank: registering the reset of "x": scheduler: task exists`) {
		t.Fatalf("got %v", err)
	}
	// Nothing was recorded: a later attempt tries again.
	s.mu.Lock()
	s.fail = nil
	s.mu.Unlock()
	mustRun(t, rt, `shield.rank("x", { reset = "daily" })`)
	if n := len(s.registered()); n != 1 {
		t.Fatalf("%d tasks", n)
	}
}

func TestRankWithoutSchedulerRefusesResetButNotTheBoard(t *testing.T) {
	rt := newTestRuntime(t, &runtime.Services{Capabilities: []runtime.Capability{testRanks(rank.NewMemory(nil), nil)}})
	err := run(t, rt, `shield.rank("x", { reset = "monthly" })`)
	if err == nil || !strings.Contains(err.Error(), "test.lua:1: shield.rank: reset needs the scheduler (scheduler.enabled: false?)") {
		t.Fatalf("got %v", err)
	}
	// Validation comes first: a bad reset value says so, scheduler or not.
	err = run(t, rt, `shield.rank("x", { reset = "yearly" })`)
	if err == nil || !strings.Contains(err.Error(), `option reset must be "daily", "weekly" or "monthly", got "yearly"`) {
		t.Fatalf("got %v", err)
	}
	mustRun(t, rt, `assert(shield.rank("x"):update("a", 1))`)
}

func TestRankIsAbsentWithoutTheCapability(t *testing.T) {
	rt := newTestRuntime(t, &runtime.Services{})
	mustRun(t, rt, `assert(shield.rank == nil)`)
}

// A reset run archives the board as it was and clears it, dated by the
// period that ended; a repeated run of the same period changes nothing.
func TestRankResetArchivesTheEndedPeriodAndClears(t *testing.T) {
	clk := &clock{t: time.Date(2024, 5, 1, 18, 0, 0, 0, time.UTC)}
	s := &fakeScheduler{}
	rt := newTestRuntime(t, &runtime.Services{Capabilities: []runtime.Capability{testRanks(rank.NewMemory(clk.now), s)}})
	mustRun(t, rt, `
		daily = shield.rank("daily_score", { reset = "daily", max_members = 3 })
		daily:mupdate({ p1 = 100, p2 = 300, p3 = 200, p4 = 50 }) -- p4 is not admitted: max_members 3
		version_before = daily:version()`)

	clk.set(time.Date(2024, 5, 2, 0, 0, 0, 250e6, time.UTC)) // the scheduler fires a little late
	if err := s.fire(t, "rank:daily_score:reset", time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, `
		local function show(es)
			local out = {}
			for _, e in ipairs(es) do out[#out + 1] = e.uid .. "=" .. e.score .. "@" .. e.rank end
			return table.concat(out, ",")
		end
		assert(daily:count() == 0, "not cleared")
		assert(daily:version() > version_before, "version did not move")
		local want = "p2=300@1,p3=200@2,p1=100@3"
		assert(show(daily:archive("20240501")) == want, show(daily:archive("20240501")))
		assert(show(daily:archive(1714564800000 + 3600000)) == want) -- 2024-05-01T01:00Z in ms
		assert(show(daily:archive(20240501)) == want, "the number 20240501 is the date, not Unix ms")
		local none, why = daily:archive("20240502")
		assert(none == nil and why == "not_found")
		daily:update("p9", 1) -- the new period's first score`)

	// The same firing again (a duplicate, or a retry hours later): nothing
	// changes, the new period's score stays.
	clk.set(time.Date(2024, 5, 2, 16, 0, 0, 0, time.UTC))
	if err := s.fire(t, "rank:daily_score:reset", time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, `assert(daily:score("p9") == 1 and daily:count() == 1)`)
}

func TestRankResetWithoutArchiveOnlyClears(t *testing.T) {
	clk := &clock{t: time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)}
	s := &fakeScheduler{}
	rt := newTestRuntime(t, &runtime.Services{Capabilities: []runtime.Capability{testRanks(rank.NewMemory(clk.now), s)}})
	mustRun(t, rt, `m = shield.rank("season", { reset = "monthly", archive = false }); m:update("a", 1)`)
	if err := s.fire(t, "rank:season:reset", clk.now()); err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, `
		assert(m:count() == 0)
		local none, why = m:archive("20240201")
		assert(none == nil and why == "not_found")`)
}

// A manual scheduler:trigger of a board's reset task changes nothing and
// says why (rank.ErrManualReset); the next firing still closes the whole
// period: the scores made before and after the trigger are archived under
// the period's date and the board is cleared. (It used to close the period
// under way, so the next firing found it closed, changed nothing, and the
// scores made after the trigger carried over into the next period.)
func TestRankResetTriggerDoesNotConsumeTheNextFiring(t *testing.T) {
	for name, newStore := range schedStores(t) {
		t.Run(name, func(t *testing.T) {
			clk := testclock.New() // 2025-01-01 00:00 UTC
			clk.Advance(12*time.Hour + 30*time.Minute)
			f := newSchedProcess(t, clk, newStore(t, clk))
			var backend rank.Backend = rank.NewMemory(clk.Now)
			if name == "redis" {
				backend = rank.NewRedis(testredis.Standalone(t), testredis.Prefix(t))
			}
			rt := newTestRuntime(t, &runtime.Services{Capabilities: []runtime.Capability{testRanks(backend, EngineResets{Engine: f.s.Engine}), f.s},
				Now: clk.Now, Log: logTo(f.log)})
			mustRun(t, rt, `
				s = shield.scheduler()
				board = shield.rank("daily", { reset = "daily" })
				board:update("before", 1)
				assert(s:trigger("rank:daily:reset"))`)
			eventually(t, rt, "the manual run", func(L *lua.LState) bool {
				return luaNum(L, `s:get("rank:daily:reset"):run_count()`) >= 1
			})
			mustRun(t, rt, `
				local info = s:get("rank:daily:reset"):info()
				assert(info.failed == 1, info.failed)
				assert(info.last_error:find("a periodic reset runs only at its scheduled firings", 1, true), info.last_error)
				assert(board:count() == 1, "the manual run cleared the board")
				board:update("after", 2)`)

			clk.Advance(11*time.Hour + 29*time.Minute) // 23:59
			f.advanceUntil(rt, time.Second, "the firing of 2025-01-02 00:00", func(L *lua.LState) bool {
				return luaNum(L, `s:get("rank:daily:reset"):run_count()`) >= 2
			})
			mustRun(t, rt, `
				assert(board:count() == 0, "the firing did not clear the board")
				local a = assert(board:archive("20250101"))
				assert(#a == 2 and a[1].uid == "after" and a[2].uid == "before", #a)`)
		})
	}
}
