package bindings

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/rank"
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
	run         func(done func(error))
}

func (s *fakeScheduler) Register(name, cronExpr string, distributed bool, run func(done func(error))) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.tasks = append(s.tasks, fakeTask{name, cronExpr, distributed, run})
	return nil
}

func (s *fakeScheduler) registered() []fakeTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]fakeTask(nil), s.tasks...)
}

// fire runs the task name and waits for its done.
func (s *fakeScheduler) fire(t *testing.T, name string) error {
	t.Helper()
	for _, task := range s.registered() {
		if task.name == name {
			ch := make(chan error, 1)
			task.run(func(err error) { ch <- err })
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

func testRanks(b rank.Backend, s RankScheduler, now func() time.Time) *Ranks {
	return &Ranks{Backend: b, MaxMembers: 10000, Archive: true, ArchiveTTL: 30 * 24 * time.Hour, Scheduler: s, Now: now, Log: logTo(&syncBuffer{})}
}

func TestRankResetRegistersOneCronTaskPerBoard(t *testing.T) {
	s := &fakeScheduler{}
	rt := newTestRuntime(t, &Services{Ranks: testRanks(rank.NewMemory(nil), s, nil)})
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
	rt2 := newTestRuntime(t, &Services{Ranks: rt.svc.Ranks})
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
	rt := newTestRuntime(t, &Services{Ranks: testRanks(rank.NewMemory(nil), s, nil)})
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
	rt := newTestRuntime(t, &Services{Ranks: testRanks(rank.NewMemory(nil), nil, nil)})
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
	rt := newTestRuntime(t, &Services{})
	mustRun(t, rt, `assert(shield.rank == nil)`)
}

// A reset run archives the board as it was and clears it, dated by the
// period that ended; a repeated run of the same period changes nothing.
func TestRankResetArchivesTheEndedPeriodAndClears(t *testing.T) {
	clk := &clock{t: time.Date(2024, 5, 1, 18, 0, 0, 0, time.UTC)}
	s := &fakeScheduler{}
	rt := newTestRuntime(t, &Services{Ranks: testRanks(rank.NewMemory(clk.now), s, clk.now)})
	mustRun(t, rt, `
		daily = shield.rank("daily_score", { reset = "daily", max_members = 3 })
		daily:mupdate({ p1 = 100, p2 = 300, p3 = 200, p4 = 50 }) -- p4 is not admitted: max_members 3
		version_before = daily:version()`)

	clk.set(time.Date(2024, 5, 2, 0, 0, 0, 250e6, time.UTC)) // the scheduler fires a little late
	if err := s.fire(t, "rank:daily_score:reset"); err != nil {
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
		local none, why = daily:archive("20240502")
		assert(none == nil and why == "not_found")
		daily:update("p9", 1) -- the new period's first score`)

	// The same period again (a duplicate firing, a little early this time):
	// nothing changes, the new period's score stays.
	clk.set(time.Date(2024, 5, 1, 23, 59, 59, 0, time.UTC))
	if err := s.fire(t, "rank:daily_score:reset"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, `assert(daily:score("p9") == 1 and daily:count() == 1)`)
}

func TestRankResetWithoutArchiveOnlyClears(t *testing.T) {
	clk := &clock{t: time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)}
	s := &fakeScheduler{}
	rt := newTestRuntime(t, &Services{Ranks: testRanks(rank.NewMemory(clk.now), s, clk.now)})
	mustRun(t, rt, `m = shield.rank("season", { reset = "monthly", archive = false }); m:update("a", 1)`)
	if err := s.fire(t, "rank:season:reset"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, `
		assert(m:count() == 0)
		local none, why = m:archive("20240201")
		assert(none == nil and why == "not_found")`)
}

func TestResetPlanDatesThePeriodThatEnded(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		plan resetPlan
		now  string
		want string
	}{
		{resetPlan{period: "daily"}, "2024-05-02T00:00:00.3Z", "20240501"},
		{resetPlan{period: "daily"}, "2024-05-01T23:59:58Z", "20240501"}, // early: the reset of 05-02 00:00
		{resetPlan{period: "daily"}, "2024-03-01T00:00:01Z", "20240229"}, // leap day
		{resetPlan{period: "daily"}, "2025-01-01T00:00:00Z", "20241231"},
		{resetPlan{period: "daily", hour: 5, minute: 30}, "2024-05-02T05:30:02Z", "20240501"},
		{resetPlan{period: "daily", hour: 23, minute: 59}, "2024-05-02T23:59:00Z", "20240501"},
		{resetPlan{period: "weekly"}, "2024-05-13T00:00:00.5Z", "20240506"}, // Monday 13th closes the week of Monday 6th
		{resetPlan{period: "weekly"}, "2024-05-12T23:59:59Z", "20240506"},
		{resetPlan{period: "weekly", hour: 12}, "2024-01-01T12:00:01Z", "20231225"},
		{resetPlan{period: "monthly"}, "2024-06-01T00:00:00.1Z", "20240501"},
		{resetPlan{period: "monthly"}, "2024-01-01T00:00:03Z", "20231201"},
		{resetPlan{period: "monthly"}, "2024-03-31T23:59:59Z", "20240301"}, // early for April 1st
		{resetPlan{period: "monthly", hour: 6}, "2024-03-01T06:00:00Z", "20240201"},
	}
	for _, c := range cases {
		if got := c.plan.endedPeriod(at(c.now)); got != c.want {
			t.Errorf("%s at %s: %s, want %s", c.plan.period, c.now, got, c.want)
		}
	}
	for _, c := range []struct {
		plan resetPlan
		want string
	}{
		{resetPlan{period: "daily", hour: 3, minute: 7}, "7 3 * * *"},
		{resetPlan{period: "weekly"}, "0 0 * * 1"},
		{resetPlan{period: "monthly", hour: 23, minute: 59}, "59 23 1 * *"},
	} {
		if got := c.plan.cron(); got != c.want {
			t.Errorf("%+v: cron %q, want %q", c.plan, got, c.want)
		}
	}
}
