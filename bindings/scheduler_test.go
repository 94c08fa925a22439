package bindings

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/internal/edge"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	"github.com/shieldrt/shieldglobal/internal/testclock"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// The binding on an Engine driven by a fake clock: firings happen when the
// test advances it; the test then waits (briefly, in real time) for the
// Lua tasks the firings started.

type schedFixture struct {
	t   *testing.T
	clk *testclock.Clock
	s   *Scheduler
	log *syncBuffer
}

func newSchedFixture(t *testing.T) *schedFixture {
	t.Helper()
	return newSchedProcess(t, testclock.New(), nil)
}

// newSchedProcess is a fixture whose Engine ("process") keeps its
// distributed tasks in st (nil: a private Memory), on clock clk.
func newSchedProcess(t *testing.T, clk *testclock.Clock, st scheduler.Store) *schedFixture {
	t.Helper()
	s := NewScheduler()
	s.Now = clk.Now
	e, err := scheduler.New(scheduler.Config{Clock: clk, Events: s.Event, Store: st,
		Defaults: edge.SchedulerOptions(config.Default().Scheduler)})
	if err != nil {
		t.Fatal(err)
	}
	s.Engine = e
	t.Cleanup(func() { e.Close(context.Background()) })
	return &schedFixture{t: t, clk: clk, s: s, log: &syncBuffer{}}
}

func (f *schedFixture) runtime() *runtime.Runtime {
	return newTestRuntime(f.t, &runtime.Services{Capabilities: []runtime.Capability{f.s}, Now: f.clk.Now, Log: logTo(f.log)})
}

// eventually waits for cond (evaluated on rt's loop) for up to 5 s.
func eventually(t *testing.T, rt *runtime.Runtime, what string, cond func(L *lua.LState) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok := false
		if err := rt.Do(func(L *lua.LState) error { ok = cond(L); return nil }); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// advanceUntil advances the clock by step until cond holds (the Engine arms
// its timer asynchronously, so one Advance may come before it).
func (f *schedFixture) advanceUntil(rt *runtime.Runtime, step time.Duration, what string, cond func(L *lua.LState) bool) {
	f.t.Helper()
	f.advanceUntilGo(step, what, func() bool {
		ok := false
		if err := rt.Do(func(L *lua.LState) error { ok = cond(L); return nil }); err != nil {
			f.t.Fatal(err)
		}
		return ok
	})
}

func (f *schedFixture) advanceUntilGo(step time.Duration, what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s (clock at %v)", what, f.clk.Now())
		}
		f.clk.Advance(step)
		time.Sleep(time.Millisecond)
	}
}

func luaNum(L *lua.LState, src string) float64 {
	if err := L.DoString("__v = " + src); err != nil {
		panic(err)
	}
	n, _ := L.GetGlobal("__v").(lua.LNumber)
	return float64(n)
}

func luaStr(t *testing.T, rt *runtime.Runtime, src string) string {
	t.Helper()
	var s string
	if err := rt.Do(func(L *lua.LState) error {
		if err := L.DoString("__v = " + src); err != nil {
			return err
		}
		s = L.GetGlobal("__v").String()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

var clockStart = testclock.New().Now().UnixMilli()

func TestSchedulerIntervalRunsEachFiringAsATask(t *testing.T) {
	f := newSchedFixture(t)
	rt := f.runtime()
	mustRun(t, rt, `
		s = shield.scheduler()
		fired = {}
		local t = s:interval("tick", 1000, function(info)
			shield.sleep(1) -- a run may block
			fired[#fired + 1] = info.scheduled
			attempts = info.attempt
		end)
		assert(t:name() == "tick" and t:schedule() == "1000" and t:status() == "active")
		assert(t:last_run() == nil and t:run_count() == 0)
		first_next = t:next_run()
	`)
	if got := num(t, rt, "first_next"); int64(got) != clockStart+1000 {
		t.Fatalf("next_run = %v, want %d", got, clockStart+1000)
	}
	f.advanceUntil(rt, 500*time.Millisecond, "three firings", func(L *lua.LState) bool { return luaNum(L, "#fired") >= 3 })
	// Each run sleeps on the real clock while the test steps the fake one,
	// so on a loaded machine a firing can come while the run before it
	// still sleeps: it is skipped (overlap "skip", counted), and runs end
	// in any order. What must hold: every run is a firing of the grid,
	// the first is the first firing, none runs twice, and runs, skips (and
	// misses) account for every firing up to the latest run.
	mustRun(t, rt, `
		local runs = {}
		for _, v in ipairs(fired) do runs[#runs + 1] = v end
		table.sort(runs)
		grid_ok, first, latest, nruns = true, runs[1], runs[#runs], #runs
		for i, v in ipairs(runs) do
			if (v - `+strconv.FormatInt(clockStart, 10)+`) % 1000 ~= 0 or (i > 1 and v == runs[i - 1]) then grid_ok = false end
		end
		local info = s:get("tick"):info()
		skipped = info.skipped + info.missed
	`)
	if num(t, rt, "grid_ok and 1 or 0") != 1 || int64(num(t, rt, "first")) != clockStart+1000 {
		t.Fatalf("runs off the grid or twice, or the first not at %d: first %v", clockStart+1000, num(t, rt, "first"))
	}
	if latest, runs, skipped := int64(num(t, rt, "latest")), num(t, rt, "nruns"), num(t, rt, "skipped"); (latest-clockStart)/1000 > int64(runs+skipped) {
		t.Fatalf("firings up to %d: %d, but %v runs and %v skipped or missed", latest, (latest-clockStart)/1000, runs, skipped)
	}
	mustRun(t, rt, `
		local t = s:get("tick")
		assert(t:run_count() >= 3, t:run_count())
		assert(t:last_run() >= math.max(fired[1], fired[2], fired[3]), "last_run " .. tostring(t:last_run()))
		assert(t:next_run() > t:last_run())
		assert(attempts == 1)
		local i = t:info()
		assert(i.kind == "interval" and i.distributed == false and i.registered == true and i.failed == 0)
	`)
}

// num evaluates a Lua expression on rt's loop.
func num(t *testing.T, rt *runtime.Runtime, src string) float64 {
	t.Helper()
	var n float64
	if err := rt.Do(func(L *lua.LState) error { n = luaNum(L, src); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSchedulerCronFollowsTheTimezone(t *testing.T) {
	f := newSchedFixture(t)
	rt := f.runtime()
	mustRun(t, rt, `
		s = shield.scheduler()
		local t = s:cron("reset", "0 0 * * *", function() end, { timezone = "Asia/Shanghai" })
		next_sh = t:next_run()
		next_utc = s:cron("reset_utc", "0 0 * * *", function() end):next_run()
		daily = s:add("backup", "daily:03:00", function() end):schedule()
		p = s:preview("* 0 * * *", 3)
		psh = s:preview("0 0 * * *", 1, "Asia/Shanghai")
	`)
	sh, _ := time.LoadLocation("Asia/Shanghai")
	now := f.clk.Now()
	y, m, d := now.In(sh).Date()
	wantSh := time.Date(y, m, d+1, 0, 0, 0, 0, sh).UnixMilli()
	if got := int64(num(t, rt, "next_sh")); got != wantSh {
		t.Fatalf("Shanghai next_run %d, want %d", got, wantSh)
	}
	if got := int64(num(t, rt, "psh[1]")); got != wantSh {
		t.Fatalf("preview in Shanghai %d, want %d", got, wantSh)
	}
	wantUTC := now.Truncate(24 * time.Hour).Add(24 * time.Hour).UnixMilli()
	if got := int64(num(t, rt, "next_utc")); got != wantUTC {
		t.Fatalf("UTC next_run %d, want %d", got, wantUTC)
	}
	if got := luaStr(t, rt, "daily"); got != "0 3 * * *" {
		t.Fatalf("daily:03:00 shows as %q", got)
	}
	// "* 0 * * *" is every minute of hour 0, not once a day: the clock is
	// at 00:00 UTC, so the next three are 00:01, 00:02, 00:03.
	for i := 1; i <= 3; i++ {
		if got := int64(num(t, rt, "p["+strconv.Itoa(i)+"]")); got != now.Add(time.Duration(i)*time.Minute).UnixMilli() {
			t.Fatalf("preview[%d] = %d", i, got)
		}
	}
}

func TestSchedulerErrorsAreRetriedLoggedAndPassedToOnError(t *testing.T) {
	f := newSchedFixture(t)
	rt := f.runtime()
	mustRun(t, rt, `
		s = shield.scheduler()
		errs, attempts, events = {}, {}, {}
		fail = true
		local function risky(info)
			attempts[#attempts + 1] = info.attempt .. "@" .. info.scheduled
			if fail then error("boom " .. info.attempt) end
		end
		s:on("failed", function(name, info) events[#events + 1] = name .. ":" .. tostring(info.final) .. ":" .. info.error end)
		s:interval("risky", 10000, risky, {
			max_retries = 2, retry_delay = 1000,
			on_error = function(err, info) errs[#errs + 1] = err end,
		})
	`)
	f.advanceUntil(rt, 500*time.Millisecond, "three attempts and three on_error calls",
		func(L *lua.LState) bool { return luaNum(L, "#errs") >= 3 && luaNum(L, "#events") >= 3 })
	fire := clockStart + 10000
	for i, want := range []string{"1@", "2@", "3@"} {
		if got := luaStr(t, rt, "attempts["+strconv.Itoa(i+1)+"]"); got != want+itoa64(fire) {
			t.Fatalf("attempt %d = %q, want %q (a retry is the same firing)", i+1, got, want+itoa64(fire))
		}
	}
	if got := luaStr(t, rt, "errs[1]"); !strings.Contains(got, "test.lua:") || !strings.Contains(got, "boom 1") {
		t.Fatalf("on_error got %q", got)
	}
	if got := luaStr(t, rt, "events[3]"); !strings.HasPrefix(got, "risky:true:") || !strings.Contains(got, "boom 3") {
		t.Fatalf("final failed event %q", got)
	}
	if got := luaStr(t, rt, "events[1]"); !strings.HasPrefix(got, "risky:false:") {
		t.Fatalf("first failed event %q", got)
	}
	if !strings.Contains(f.log.String(), "stack traceback") || !strings.Contains(f.log.String(), "boom 1") {
		t.Fatalf("the failure was not logged with its traceback:\n%s", f.log.String())
	}
	mustRun(t, rt, `
		local i = s:get("risky"):info()
		assert(i.status == "error" and i.failed == 1 and i.run_count == 1, i.status .. " " .. i.failed)
		assert(i.last_error:find("boom 3"), i.last_error)
		fail = false
	`)
	// The schedule goes on; the next successful run clears the error.
	f.advanceUntil(rt, time.Second, "a successful run", func(L *lua.LState) bool { return luaNum(L, "#attempts") >= 4 })
	eventually(t, rt, "status active again", func(L *lua.LState) bool {
		return L.DoString(`assert(s:get("risky"):status() == "active")`) == nil
	})
}

func TestSchedulerLifecycleEvents(t *testing.T) {
	f := newSchedFixture(t)
	rt := f.runtime()
	mustRun(t, rt, `
		s = shield.scheduler()
		seen = {}
		for _, ev in ipairs({ "before", "after", "failed" }) do
			s:on(ev, function(name, info) seen[#seen + 1] = ev .. ":" .. name .. ":" .. info.attempt end)
		end
		s:interval("ev", 1000, function(info) end)
	`)
	f.advanceUntil(rt, 500*time.Millisecond, "before and after", func(L *lua.LState) bool { return luaNum(L, "#seen") >= 2 })
	if got := luaStr(t, rt, "seen[1] .. ',' .. seen[2]"); got != "before:ev:1,after:ev:1" {
		t.Fatalf("events %q", got)
	}
}

func TestSchedulerOverlapSkipsAFiringWhileTheRunGoesOn(t *testing.T) {
	f := newSchedFixture(t)
	rt := f.runtime()
	mustRun(t, rt, `
		s = shield.scheduler()
		runs, skipped, release = 0, 0, false
		s:on("skipped", function() skipped = skipped + 1 end)
		s:interval("slow", 1000, function()
			runs = runs + 1
			while not release do shield.sleep(1) end
		end)
	`)
	f.advanceUntil(rt, 500*time.Millisecond, "one skipped firing", func(L *lua.LState) bool { return luaNum(L, "skipped") >= 1 })
	mustRun(t, rt, `
		assert(runs == 1, runs)
		assert(s:get("slow"):info().skipped >= 1)
		release = true
	`)
}

func TestSchedulerOnceRunsOnceAndLetsTheRuntimeIdle(t *testing.T) {
	f := newSchedFixture(t)
	rt := f.runtime()
	mustRun(t, rt, `
		s = shield.scheduler()
		ran = 0
		local t = s:once("reward", 3600000, function() ran = ran + 1 end)
		assert(t:schedule() == "3600000")
		zero = 0
		s:once("now", 0, function() zero = zero + 1 end)
	`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := rt.Wait(ctx); err == nil {
		t.Fatal("the runtime went idle with a one-shot task pending")
	}
	f.advanceUntil(rt, 30*time.Second, "the one-shot runs", func(L *lua.LState) bool { return luaNum(L, "ran + zero") >= 2 })
	mustRun(t, rt, `
		assert(ran == 1 and zero == 1)
		local t, why = s:get("reward")
		assert(t == nil and why == "not_found", tostring(why))
	`)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if _, err := rt.Wait(ctx2); err != nil {
		t.Fatalf("the runtime did not go idle after its one-shot tasks ran: %v", err)
	}
}

func TestSchedulerRegisteredTaskKeepsTheRuntimeUntilRemoved(t *testing.T) {
	f := newSchedFixture(t)
	rt := f.runtime()
	mustRun(t, rt, `s = shield.scheduler(); s:interval("hb", 60000, function() end)`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := rt.Wait(ctx); err == nil {
		t.Fatal("idle with a task registered")
	}
	mustRun(t, rt, `assert(s:remove("hb") == true); local ok, why = s:remove("hb"); assert(ok == nil and why == "not_found")`)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if _, err := rt.Wait(ctx2); err != nil {
		t.Fatalf("not idle after remove: %v", err)
	}
}

func TestSchedulerReRegistering(t *testing.T) {
	f := newSchedFixture(t)
	rt := f.runtime()
	mustRun(t, rt, `
		s = shield.scheduler()
		local a = s:interval("job", 1000, function() end)
		first = a:next_run()
	`)
	f.clk.Advance(400 * time.Millisecond)
	mustRun(t, rt, `
		-- the same schedule: a no-op (every process registers its tasks at start)
		assert(s:interval("job", 1000, function() end):next_run() == first)
		-- another schedule of the same kind updates it
		local b = s:interval("job", 5000, function() end)
		assert(b:schedule() == "5000" and b:next_run() ~= first, b:next_run())
		-- another kind is an error
		local ok, err = pcall(s.cron, s, "job", "0 0 * * *", function() end)
		assert(not ok and err:find('task "job" is a interval task, not cron', 1, true), err)
		assert(err:find("remove it first", 1, true), err)
	`)
}

func TestSchedulerControl(t *testing.T) {
	f := newSchedFixture(t)
	rt := f.runtime()
	mustRun(t, rt, `
		s = shield.scheduler()
		runs, manual = 0, nil
		s:interval("c", 1000, function(info) runs = runs + 1; manual = info.manual end)
		assert(s:pause("c") == true)
		assert(s:get("c"):status() == "paused" and s:get("c"):next_run() == nil)
		for _, fn in ipairs({ "pause", "resume", "remove", "trigger" }) do
			local ok, why = s[fn](s, "missing")
			assert(ok == nil and why == "not_found", fn)
		end
	`)
	for i := 0; i < 5; i++ {
		f.clk.Advance(time.Second)
	}
	mustRun(t, rt, `
		assert(runs == 0, "a paused task ran")
		assert(s:trigger("c") == true)
	`)
	eventually(t, rt, "the manual run", func(L *lua.LState) bool { return luaNum(L, "runs") == 1 })
	mustRun(t, rt, `
		assert(manual == true)
		assert(s:get("c"):run_count() == 1)
		assert(s:resume("c") == true)
		assert(s:get("c"):status() == "active" and s:get("c"):next_run() ~= nil)
	`)
	f.advanceUntil(rt, 500*time.Millisecond, "a scheduled run after resume", func(L *lua.LState) bool { return luaNum(L, "runs") >= 2 })
	mustRun(t, rt, `
		assert(manual == false)
		local t = s:get("c")
		local before = t:run_count()
		shield.sleep(0)
		assert(t:refresh() == t and t:run_count() >= before)
		assert(#s:list() == 1 and s:list()[1]:name() == "c")
		assert(s:remove("c") == true)
		local gone, why = t:refresh()
		assert(gone == nil and why == "not_found")
	`)
}

func TestSchedulerTwoRuntimesShareATaskAndDetachOnClose(t *testing.T) {
	f := newSchedFixture(t)
	a, b := f.runtime(), f.runtime()
	for _, rt := range []*runtime.Runtime{a, b} {
		mustRun(t, rt, `runs = 0; shield.scheduler():interval("shared", 1000, function() runs = runs + 1 end, { distributed = true })`)
	}
	total := func() float64 { return num(t, a, "runs") + num(t, b, "runs") }
	f.advanceUntilGo(500*time.Millisecond, "four firings", func() bool { return total() >= 4 })
	if num(t, a, "runs") == 0 || num(t, b, "runs") == 0 {
		t.Fatalf("firings did not go to both runtimes: %v and %v", num(t, a, "runs"), num(t, b, "runs"))
	}
	b.Close(time.Second)
	before := num(t, a, "runs")
	f.advanceUntil(a, 500*time.Millisecond, "runs in the remaining runtime", func(L *lua.LState) bool { return luaNum(L, "runs") >= before+3 })
	a.Close(time.Second)
	infos, err := f.s.Engine.List().Do(context.Background())
	if err != nil || len(infos) != 0 {
		t.Fatalf("tasks left after both runtimes closed: %v %v", infos, err)
	}
}

func TestSchedulerBadInput(t *testing.T) {
	f := newSchedFixture(t)
	rt := f.runtime()
	mustRun(t, rt, `s = shield.scheduler(); fn = function() end; s:cron("taken", "0 0 * * *", fn)`)
	for _, c := range []struct{ src, want string }{
		{`s:cron("x", "0 25 * * *", fn)`, `test.lua:1: shield.scheduler: bad argument #3 to 'cron' (cron "0 25 * * *": hour field: 25 out of range 0-23)`},
		{`s:cron("x", "0 0 * *", fn)`, `bad argument #3 to 'cron'`},
		{`s:cron("x", "every:5m", fn)`, `"every:5m" is not a cron schedule`},
		{`s:add("x", "daily:25:00", fn)`, `bad argument #3 to 'add' (schedule "daily:25:00": daily: wants HH:MM`},
		{`s:add("x", "weekly:1", fn)`, `unknown format`},
		{`s:interval("x", 0, fn)`, `bad argument #3 to 'interval' (interval must be a positive number of milliseconds, got 0)`},
		{`s:interval("x", -5, fn)`, `interval must be a positive number of milliseconds, got -5`},
		{`s:once("x", -1, fn)`, `delay must be a number of milliseconds >= 0`},
		{`s:cron("x", "0 0 * * *", fn, { timezone = "Mars/Olympus" })`, `bad argument #5 to 'cron' (timezone "Mars/Olympus": unknown time zone)`},
		{`s:cron("x", "0 0 * * *", "reset")`, `bad argument #4 to 'cron' (function expected, got string)`},
		{`s:cron("x", "0 0 * * *", fn, { retries = 3 })`, `unknown option "retries" (known: timezone, distributed, lock_ttl, max_retries, retry_delay, on_error, overlap, catch_up, on_redis_down)`},
		{`s:cron("x", "0 0 * * *", fn, { overlpa = "skip" })`, `unknown option "overlpa" (known: timezone, distributed, lock_ttl, max_retries, retry_delay, on_error, overlap, catch_up, on_redis_down); did you mean "overlap"?)`},
		{`s:cron("x", "0 0 * * *", fn, { overlap = "queue" })`, `option overlap must be "skip" or "allow", got "queue"`},
		{`s:cron("x", "0 0 * * *", fn, { on_redis_down = "panic" })`, `option on_redis_down must be "wait" or "run_local", got "panic"`},
		{`s:cron("x", "0 0 * * *", fn, { lock_ttl = 0 })`, `option lock_ttl must be a number of milliseconds from 1 to 1e+15, got 0`},
		{`s:cron("x", "0 0 * * *", fn, { max_retries = 1.5 })`, `option max_retries must be a whole number from 0 to 1000000000, got 1.5`},
		{`s:cron("x", "0 0 * * *", fn, { max_retries = "2" })`, `(option max_retries: number expected, got string)`},
		{`s:cron("x", "0 0 * * *", fn, { retry_delay = "2" })`, `(option retry_delay: number expected, got string)`},
		{`s:cron("x", "0 0 * * *", fn, { 1 })`, `bad argument #5 to 'cron' (option keys must be strings, got number 1)`},
		{`s:cron("x", "0 0 * * *", fn, { distributed = "yes" })`, `option distributed: boolean expected, got string`},
		{`s:interval("taken", 1000, fn)`, `shield.scheduler:interval: task "taken" is a cron task, not interval (remove it first to change its kind)`},
		{`s:cron("", "0 0 * * *", fn)`, `bad argument #2 to 'cron' (task name must not be empty)`},
		{`s:cron("}x", "0 0 * * *", fn)`, `task name must not start with '}'`},
		{`s.cron("x", "0 0 * * *", fn)`, `bad argument #1 to 'cron' (shield.scheduler expected, got string (call it with ':'))`},
		{`s:get("taken").name()`, `bad argument #1 to 'name' (shield.scheduler_task expected, got no value`},
		{`s:preview("0 0 * * *", 0)`, `count must be a whole number in 1..10000`},
		{`s:preview("0 0 * * *", 1, "Nowhere/City")`, `timezone "Nowhere/City": unknown time zone`},
		{`s:on("done", fn)`, `unknown event "done"`},
	} {
		err := run(t, rt, c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.src, err, c.want)
		}
	}
	mustRun(t, rt, `assert(s:get("x") == nil)`)
}

func TestSchedulerLoadsTaskFiles(t *testing.T) {
	f := newSchedFixture(t)
	rt := f.runtime()
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a_clean.lua", `return { name = "clean_logs", expression = "daily:03:00", handle = function() cleaned = true end, timezone = "Asia/Shanghai" }`)
	write("b_tick.lua", `return { name = "tick", expression = "every:30s", handle = function() ticks = (ticks or 0) + 1 end, max_retries = 0 }`)
	write("notes.txt", `not a task`)
	mustRun(t, rt, `
		s = shield.scheduler()
		local names = s:load("`+dir+`")
		assert(#names == 2 and names[1] == "clean_logs" and names[2] == "tick", table.concat(names, ","))
		assert(s:get("clean_logs"):schedule() == "0 3 * * *")
		assert(s:get("clean_logs"):info().timezone == "Asia/Shanghai")
		assert(s:get("tick"):schedule() == "30000")
	`)
	f.advanceUntil(rt, 10*time.Second, "the loaded task runs", func(L *lua.LState) bool { return luaNum(L, "ticks or 0") >= 1 })

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "ok.lua"), []byte(`return { name = "fine", expression = "every:1m", handle = function() end }`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ src, want string }{
		{`return { name = "b", expression = "cron:0 25 * * *", handle = function() end }`, `bad.lua: cron "0 25 * * *": hour field: 25 out of range 0-23`},
		{`return { name = "b", expression = "every:1m", handle = "nope" }`, `bad.lua: handle must be a function, got string`},
		{`return { name = "b", expression = "every:1m", handle = function() end, retry = 1 }`, `bad.lua: unknown option "retry" (known: name, expression, handle, timezone, distributed, lock_ttl, max_retries, retry_delay, on_error, overlap, catch_up, on_redis_down)`},
		{`return 42`, `bad.lua: must return a table`},
		{`error("broken file")`, `bad.lua: `},
		{`return { expression = "every:1m", handle = function() end }`, `bad.lua: name must be a non-empty string`},
		{`return { name = "fine", expression = "every:1m", handle = function() end }`, `task "fine" is also defined in`},
	} {
		if err := os.WriteFile(filepath.Join(bad, "bad.lua"), []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		err := run(t, rt, `shield.scheduler():load("`+bad+`")`)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "test.lua:1: shield.scheduler: load: ") {
			t.Errorf("%s: got %v, want %q", c.src, err, c.want)
		}
	}
	mustRun(t, rt, `assert(shield.scheduler():get("fine") == nil, "a bad folder registered some of its tasks")`)
	if err := run(t, rt, `shield.scheduler():load("`+filepath.Join(dir, "missing")+`")`); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing folder: %v", err)
	}
}

func TestSchedulerWorksOutsideTasks(t *testing.T) {
	f := newSchedFixture(t)
	rt := f.runtime()
	err := rt.Do(func(L *lua.LState) error {
		return L.DoString(`
			local s = shield.scheduler()
			local t = s:interval("host", 1000, function() end)
			assert(t:schedule() == "1000")
			assert(s:get("host"):name() == "host")
			assert(s:remove("host") == true)`)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSchedulerIsAbsentWithoutTheService(t *testing.T) {
	rt := newTestRuntime(t, &runtime.Services{})
	mustRun(t, rt, `assert(shield.scheduler == nil)`)
}

func itoa64(n int64) string { return lua.LNumber(n).String() }

// schedStores are the Stores two fixture processes share: a Memory, and
// Redis on the fake clock.
func schedStores(t *testing.T) map[string]func(*testing.T, *testclock.Clock) scheduler.Store {
	return map[string]func(*testing.T, *testclock.Clock) scheduler.Store{
		"memory": func(_ *testing.T, clk *testclock.Clock) scheduler.Store { return scheduler.NewMemory(clk.Now) },
		"redis": func(t *testing.T, clk *testclock.Clock) scheduler.Store {
			st := scheduler.NewRedis(testredis.Standalone(t), testredis.Prefix(t), scheduler.RedisOptions{Now: clk.Now})
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
}

// awaitIdle waits until rt holds nothing (Wait returns).
func awaitIdle(t *testing.T, rt *runtime.Runtime, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := rt.Wait(ctx); err != nil {
		t.Fatalf("the runtime did not go idle %s: %v", what, err)
	}
}

// awaitBusy checks that rt is still held by something.
func awaitBusy(t *testing.T, rt *runtime.Runtime, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := rt.Wait(ctx); err == nil {
		t.Fatalf("the runtime went idle %s", what)
	}
}

// One-shot tasks due at once run at registration, the clock standing
// still: once(0), and an at: time already past within catch_up (late);
// one past catch_up is told as missed. Then nothing holds the runtime.
func TestSchedulerOneShotsDueAtOnceRun(t *testing.T) {
	for _, mode := range []string{"local", "distributed"} {
		t.Run(mode, func(t *testing.T) {
			f := newSchedFixture(t)
			rt := f.runtime()
			now := clockStart / 1000
			mustRun(t, rt, `
				s = shield.scheduler()
				dist = `+map[string]string{"local": "false", "distributed": "true"}[mode]+`
				ran, missed = {}, {}
				s:on("missed", function(name, info) missed[#missed + 1] = name .. ":" .. info.count .. ":" .. info.scheduled end)
				local function record(info) ran[#ran + 1] = info.task .. ":" .. info.scheduled .. ":" .. tostring(info.late) end
				s:once("now", 0, record, { distributed = dist })
				s:add("past", "at:`+itoa64(now-10)+`", record, { distributed = dist })
				s:add("stale", "at:`+itoa64(now-120)+`", record, { distributed = dist })
			`)
			eventually(t, rt, "two runs and a missed event", func(L *lua.LState) bool {
				return luaNum(L, "#ran") >= 2 && luaNum(L, "#missed") >= 1
			})
			mustRun(t, rt, `
				table.sort(ran)
				assert(#ran == 2 and ran[1] == "now:`+itoa64(clockStart)+`:false" and ran[2] == "past:`+itoa64((now-10)*1000)+`:true",
					table.concat(ran, ", "))
				assert(#missed == 1 and missed[1] == "stale:1:`+itoa64((now-120)*1000)+`", table.concat(missed, ", "))
			`)
			awaitIdle(t, rt, "after its one-shot tasks ran or were missed")
		})
	}
}

// A distributed task removed by another process, or a distributed
// one-shot task another process ran, stops holding this runtime at once:
// the Engine tells the binding (no polling).
func TestSchedulerTaskGoneElsewhereFreesTheRuntime(t *testing.T) {
	for name, store := range schedStores(t) {
		t.Run(name, func(t *testing.T) {
			clk := testclock.New()
			st := store(t, clk)
			a, b := newSchedProcess(t, clk, st), newSchedProcess(t, clk, st)
			ra, rb := a.runtime(), b.runtime()
			mustRun(t, ra, `shield.scheduler():interval("shared", 60000, function() end, { distributed = true })`)
			awaitBusy(t, ra, "with a distributed task registered")
			mustRun(t, rb, `assert(shield.scheduler():remove("shared") == true)`)
			awaitIdle(t, ra, "after another process removed its task")

			for _, rt := range []*runtime.Runtime{ra, rb} {
				mustRun(t, rt, `runs = 0; shield.scheduler():once("bonus", 1000, function() runs = runs + 1 end, { distributed = true })`)
			}
			awaitBusy(t, ra, "with a one-shot task pending")
			a.advanceUntilGo(500*time.Millisecond, "the one-shot run", func() bool { return num(t, ra, "runs")+num(t, rb, "runs") >= 1 })
			awaitIdle(t, ra, "after the one-shot task ran")
			awaitIdle(t, rb, "after the one-shot task ran")
			if n := num(t, ra, "runs") + num(t, rb, "runs"); n != 1 {
				t.Fatalf("%v runs of a distributed one-shot task", n)
			}
		})
	}
}

// A process that comes late (its clock jumps: a stall) claims the latest
// firing within catch_up and tells on("missed") of the ones before it,
// with their count and fire times; a firing that starts more than a
// second after its time is late (info.late).
func TestSchedulerMissedAndLateFirings(t *testing.T) {
	for _, mode := range []string{"local", "distributed"} {
		t.Run(mode, func(t *testing.T) {
			f := newSchedFixture(t)
			rt := f.runtime()
			mustRun(t, rt, `
				s = shield.scheduler()
				local dist = `+map[string]string{"local": "false", "distributed": "true"}[mode]+`
				missed, runs = {}, {}
				s:on("missed", function(name, info)
					missed[#missed + 1] = name .. ":" .. info.count .. ":" .. info.scheduled .. "-" .. info.last_scheduled
				end)
				s:interval("hb", 1000, function(info) runs[#runs + 1] = info end, { distributed = dist, catch_up = 5000 })
				s:interval("slow", 10000, function(info) runs[#runs + 1] = info end, { distributed = dist })
			`)
			f.clk.Advance(3500 * time.Millisecond) // hb: 1 s and 2 s missed, 3 s runs
			f.advanceUntil(rt, 10*time.Millisecond, "a missed event", func(L *lua.LState) bool { return luaNum(L, "#missed") >= 1 })
			want := "hb:2:" + itoa64(clockStart+1000) + "-" + itoa64(clockStart+2000)
			if got := luaStr(t, rt, "missed[1]"); got != want {
				t.Fatalf("missed event %q, want %q", got, want)
			}
			f.clk.Advance(9 * time.Second) // slow: the 10 s firing starts after 12 s
			f.advanceUntil(rt, 10*time.Millisecond, "the late run", func(L *lua.LState) bool {
				return L.DoString(`for _, r in ipairs(runs) do if r.task == "slow" then return end end error("no run")`) == nil
			})
			mustRun(t, rt, `
				for _, r in ipairs(runs) do
					if r.task == "slow" then assert(r.late == true, "a run 2 s late is not late") end
					if r.task == "hb" and r.scheduled == `+itoa64(clockStart+3000)+` then assert(r.late == false, "a run 0.5 s late is late") end
				end
				assert(s:get("slow"):info().late == 1)
			`)
		})
	}
}
