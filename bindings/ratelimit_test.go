package bindings

import (
	"io"
	"log/slog"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/ratelimit"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// newLimiterRuntime is a runtime with shield.rate_limiter on the memory
// backend (exact in-process), sharing set.
func newLimiterRuntime(t testing.TB, set *ratelimit.Set) *runtime.Runtime {
	t.Helper()
	if set == nil {
		set = ratelimit.NewMemory(ratelimit.Config{})
	}
	L := lua.NewState(runtime.StateOptions())
	rt, err := runtime.NewRuntime(L, &runtime.Services{Capabilities: []runtime.Capability{&Limiters{Set: set}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(time.Second); L.Close() })
	return rt
}

func TestTokenBucketReturnShapes(t *testing.T) {
	rt := newLimiterRuntime(t, nil)
	mustRun(t, rt, `
		local l = shield.rate_limiter("shapes", { rate = 0.001, burst = 3 })
		assert(l:remaining("a") == 3, "a new key starts full")
		local ok, why = l:allow("a")
		assert(ok == true and why == nil, "allowed: one value, true")
		assert(select("#", l:allow("a")) == 1)
		assert(l:remaining("a") == 1)
		ok, why = l:allow("a", 2)
		assert(ok == false and why == "rejected", "n = 2 with 1 left: " .. tostring(ok) .. " " .. tostring(why))
		assert(l:remaining("a") == 1, "a refused request takes nothing")
		assert(l:allow("a", 1) == true)
		ok, why = l:allow("a")
		assert(ok == false and why == "rejected")
		assert(l:allow("b") == true, "keys are separate buckets")
		assert(l:name() == "shapes")
		assert(tostring(l) == 'shield.rate_limiter("shapes", rate=0.001, burst=3)', tostring(l))
		local st = l:stats()
		assert(st.name == "shapes" and st.algorithm == "token_bucket", st.algorithm)
		assert(st.allowed == 4 and st.rejected == 2 and st.active == 2, st.allowed .. " " .. st.rejected .. " " .. st.active)
		assert(st.rejected_today == 2 and st.degraded == 0 and st.unavailable == 0 and st.processes == 1)
	`)
}

func TestSameNameSameLimiterAcrossRuntimes(t *testing.T) {
	set := ratelimit.NewMemory(ratelimit.Config{})
	a, b := newLimiterRuntime(t, set), newLimiterRuntime(t, set)
	mustRun(t, a, `assert(shield.rate_limiter("shared", { rate = 0.001, burst = 2 }):allow("k"))`)
	mustRun(t, b, `
		local l = shield.rate_limiter("shared", { rate = 0.001, burst = 2 })
		assert(l:allow("k"))
		assert(not l:allow("k"), "the other runtime's request counts")`)
}

func TestBurstDefaultsToRate(t *testing.T) {
	rt := newLimiterRuntime(t, nil)
	mustRun(t, rt, `
		assert(shield.rate_limiter("d1", { rate = 50 }):remaining("k") == 50)
		assert(shield.rate_limiter("d2", { rate = 0.5 }):remaining("k") == 1, "at least 1")`)
}

func TestSlidingWindowOnMemory(t *testing.T) {
	rt := newLimiterRuntime(t, nil)
	mustRun(t, rt, `
		local l = shield.rate_limiter("sw", { window = 60000, max_requests = 3, sliding = true })
		assert(l:remaining("k") == 3)
		assert(l:allow("k") == true)
		assert(select("#", l:allow("k")) == 1)
		local ok, why = l:allow("k", 2)
		assert(ok == false and why == "rejected")
		assert(l:allow("k") == true)
		assert(l:remaining("k") == 0)
		ok, why = l:allow("k", 5)
		assert(ok == false and why == "rejected", "more than max_requests never fits")
		local st = l:stats()
		assert(st.algorithm == "sliding_window" and st.allowed == 3 and st.rejected == 2, st.allowed)
		assert(tostring(l) == 'shield.rate_limiter("sw", window=60000, max_requests=3)', tostring(l))
		-- algorithm = "sliding_window" says the same as sliding = true
		assert(shield.rate_limiter("sw2", { window = 10, max_requests = 1, algorithm = "sliding_window" }):allow("k"))
	`)
}

func TestConfigAlgorithmIsTheDefault(t *testing.T) {
	L := lua.NewState(runtime.StateOptions())
	rt, err := runtime.NewRuntime(L, &runtime.Services{Capabilities: []runtime.Capability{&Limiters{Set: ratelimit.NewMemory(ratelimit.Config{}), Algorithm: ratelimit.AlgorithmSlidingWindow}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { rt.Close(time.Second); L.Close() }()
	mustRun(t, rt, `
		local l = shield.rate_limiter("cfg", { window = 1000, max_requests = 1 })
		assert(l:stats().algorithm == "sliding_window")
		assert(shield.rate_limiter("cfg2", { rate = 1, sliding = false }):stats().algorithm == "token_bucket")
		assert(shield.rate_limiter("cfg3", { rate = 1, algorithm = "token_bucket" }):stats().algorithm == "token_bucket")
		local ok, err = pcall(shield.rate_limiter, "cfg4", { rate = 1 })
		assert(not ok and err:find('rate_limiter.algorithm = "sliding_window"', 1, true), err)`)
}

func TestRateLimiterArgumentErrors(t *testing.T) {
	rt := newLimiterRuntime(t, nil)
	mustRun(t, rt, `
		tb = shield.rate_limiter("args", { rate = 10, burst = 5 })
		sw = shield.rate_limiter("args_sw", { window = 1000, max_requests = 5, sliding = true })`)
	for _, c := range []struct{ src, want string }{
		{`shield.rate_limiter()`, `shield: bad argument #1 to 'rate_limiter' (string expected, got no value)`},
		{`shield.rate_limiter("")`, `shield: bad argument #1 to 'rate_limiter' (name must not be empty)`},
		{`shield.rate_limiter("x")`, `shield: bad argument #2 to 'rate_limiter' (table expected, got no value)`},
		{`shield.rate_limiter("}x", { rate = 1 })`, `must not start with '}'`},
		{`shield.rate_limiter("x", { rate = "100" })`, `(option rate: number expected, got string)`},
		{`shield.rate_limiter("x", { rate = 0 })`, `option rate must be a finite number > 0 (tokens per second), got 0`},
		{`shield.rate_limiter("x", { rate = -1 })`, `option rate must be a finite number > 0`},
		{`shield.rate_limiter("x", { rate = 0/0 })`, `option rate must be a finite number > 0`},
		{`shield.rate_limiter("x", { rate = math.huge })`, `option rate must be a finite number > 0`},
		{`shield.rate_limiter("x", { rate = 1, burst = 0.5 })`, `option burst must be a finite number >= 1, got 0.5`},
		{`shield.rate_limiter("x", { rate = 1, burst = 0 })`, `option burst must be a finite number >= 1`},
		{`shield.rate_limiter("x", { burst = 10 })`, `option rate is required for a token bucket`},
		{`shield.rate_limiter("x", { window = 0, max_requests = 1, sliding = true })`, `option window must be a number of milliseconds from 1 to 1e+12, got 0`},
		{`shield.rate_limiter("x", { window = 0.5, max_requests = 1, sliding = true })`, `option window must be a number of milliseconds from 1 to 1e+12, got 0.5`},
		{`shield.rate_limiter("x", { window = 1000, max_requests = 0, sliding = true })`, `option max_requests must be a whole number from 1 to 9007199254740992, got 0`},
		{`shield.rate_limiter("x", { window = 1000, max_requests = 1.5, sliding = true })`, `option max_requests must be a whole number from 1 to 9007199254740992, got 1.5`},
		{`shield.rate_limiter("x", { window = 1000, sliding = true })`, `option max_requests is required for a sliding window`},
		{`shield.rate_limiter("x", { window = 1000, max_requests = 5 })`, `option window is a sliding-window option, but rate_limiter.algorithm = "token_bucket" makes this a token bucket (set sliding = true`},
		{`shield.rate_limiter("x", { rate = 1, window = 1000, max_requests = 5, sliding = true })`, `option rate is a token-bucket option`},
		{`shield.rate_limiter("x", { rate = 1, sliding = "yes" })`, `option sliding: boolean expected, got string`},
		{`shield.rate_limiter("x", { rate = 1, algorithm = "leaky_bucket" })`, `option algorithm must be "token_bucket" or "sliding_window", got "leaky_bucket"`},
		{`shield.rate_limiter("x", { rate = 1, algorithm = "token_bucket", sliding = true })`, `contradicts algorithm`},
		{`shield.rate_limiter("x", { rate = 1, brust = 2 })`, `unknown option "brust" (known: algorithm, burst, max_requests, rate, sliding, window); did you mean "burst"?)`},
		{`shield.rate_limiter("x", { 100 })`, `(option keys must be strings, got number 1)`},
		{`shield.rate_limiter("args", { rate = 20, burst = 5 })`, `shield.rate_limiter: rate_limiter "args": exists with rate=10 burst=5, asked for rate=20 burst=5`},
		{`shield.rate_limiter("x", { window = 1000, max_requests = 5, sliding = false })`, `option window is a sliding-window option, but sliding = false makes this a token bucket`},
		{`tb:allow(42)`, `shield.rate_limiter: bad argument #2 to 'allow' (string expected, got number)`},
		{`tb:allow()`, `shield.rate_limiter: bad argument #2 to 'allow' (string expected, got no value)`},
		{`tb:allow("")`, `bad argument #2 to 'allow' (key must not be empty)`},
		{`tb.allow("k")`, `shield.rate_limiter: bad argument #1 to 'allow' (shield.rate_limiter expected, got string (call it with ':'))`},
		{`tb.allow(sw, "k")`, `bad argument #1 to 'allow' (shield.rate_limiter expected, got userdata`},
		{`tb:allow("k", 0)`, `shield.rate_limiter: bad argument #3 to 'allow' (n must be an integer >= 1, got 0)`},
		{`tb:allow("k", 1.5)`, `(n must be an integer >= 1, got 1.5)`},
		{`tb:allow("k", "2")`, `bad argument #3 to 'allow' (number expected, got string)`},
		{`tb:remaining(nil)`, `bad argument #2 to 'remaining' (string expected, got nil)`},
		{`tb.remaining()`, `bad argument #1 to 'remaining'`},
		{`tb:wait("k")`, `bad argument #3 to 'wait' (number expected, got no value)`},
		{`tb:wait("k", -1)`, `bad argument #3 to 'wait' (timeout_ms must be between 0 and`},
		{`tb:wait("k", 10, 6)`, `bad argument #4 to 'wait' (n = 6 can never be granted: it exceeds burst (5))`},
		{`tb.stats()`, `bad argument #1 to 'stats'`},
		{`sw:allow(1)`, `shield.rate_limiter: bad argument #2 to 'allow' (string expected, got number)`},
		{`sw.allow(tb, "k")`, `bad argument #1 to 'allow'`},
		{`sw:allow("k", 0)`, `bad argument #3 to 'allow' (n must be an integer >= 1, got 0)`},
		{`sw:remaining(true)`, `bad argument #2 to 'remaining' (string expected, got boolean)`},
		{`sw:wait("k", 0/0)`, `bad argument #3 to 'wait' (timeout_ms must be`},
		{`sw:wait("k", 10, 6)`, `bad argument #4 to 'wait' (n = 6 can never be granted: it exceeds max_requests (5))`},
	} {
		err := run(t, rt, "\n"+c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.src, err, c.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), "test.lua:2: ") {
			t.Errorf("%s: %q does not point at the caller's line", c.src, err)
		}
	}
}

func TestTokenBucketWait(t *testing.T) {
	rt := newLimiterRuntime(t, nil)
	mustRun(t, rt, `
		local l = shield.rate_limiter("wait", { rate = 50, burst = 1 })
		assert(l:allow("k"))
		assert(not l:allow("k"))
		-- a token comes every 20ms: a wait of up to 5s gets it
		local ok, why = l:wait("k", 5000)
		assert(ok == true and why == nil, tostring(why))
		assert(select("#", l:wait("k", 5000)) == 1)
		-- n tokens at once
		assert(shield.rate_limiter("wait_n", { rate = 100, burst = 3 }):wait("k", 5000, 3))

		local slow = shield.rate_limiter("wait_slow", { rate = 0.001, burst = 1 })
		assert(slow:wait("k", 0) == true, "a token there: granted without waiting")
		ok, why = slow:wait("k", 0)
		assert(ok == false and why == "timeout", "0: one try")
		local t0 = shield.now_ms()
		ok, why = slow:wait("k", 30)
		assert(ok == false and why == "timeout")
		assert(shield.now_ms() - t0 >= 29, "it waited out its timeout")

		-- other tasks run while one waits
		local ran = false
		shield.spawn(function() ran = true end)
		slow:wait("k", 20)
		assert(ran, "the wait blocked only its task")
	`)
}

func TestSlidingWindowWait(t *testing.T) {
	rt := newLimiterRuntime(t, nil)
	mustRun(t, rt, `
		local l = shield.rate_limiter("sww", { window = 50, max_requests = 2, sliding = true })
		assert(l:allow("k") and l:allow("k"))
		assert(not l:allow("k"))
		local t0 = shield.now_ms()
		local ok, why = l:wait("k", 5000)
		assert(ok == true and why == nil, tostring(why))
		assert(shield.now_ms() - t0 >= 40, "granted once the first request left the window")
		assert(l:wait("k", 5000, 2), "two at once once the window is free")

		local long = shield.rate_limiter("sww_long", { window = 60000, max_requests = 1, sliding = true })
		assert(long:allow("k"))
		t0 = shield.now_ms()
		ok, why = long:wait("k", 30)
		assert(ok == false and why == "timeout", tostring(why))
		assert(shield.now_ms() - t0 >= 29, "it waited out its timeout")
		ok, why = long:wait("k", 0)
		assert(ok == false and why == "timeout")
	`)
}

// A task that ends while it waits (interrupted) stops its wait: the wait
// takes no token afterwards.
func TestWaitOfAnEndedTaskIsCancelled(t *testing.T) {
	for _, algo := range []string{"token bucket", "sliding window"} {
		t.Run(algo, func(t *testing.T) {
			rt := newLimiterRuntime(t, nil)
			opts := `{ rate = 20, burst = 1 }` // a token every 50ms
			if algo == "sliding window" {
				opts = `{ window = 50, max_requests = 1, sliding = true }`
			}
			mustRun(t, rt, `l = shield.rate_limiter("cancel", `+opts+`); assert(l:allow("k"))`)
			g := &runtime.Group{}
			started := make(chan error, 1)
			err := rt.Do(func(L *lua.LState) error {
				fn, err := L.Load(strings.NewReader(`waiting = true; l:wait("k", 60000); reached = true`), "waiter.lua")
				if err != nil {
					return err
				}
				rt.SpawnIn(g, "waiter", fn, nil, func(err error) { started <- err })
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if global(t, rt, "waiting") != lua.LTrue {
				t.Fatal("the waiter did not start")
			}
			rt.InterruptGroup(g)
			if err := <-started; err == nil || !strings.Contains(err.Error(), runtime.ErrInterrupted.Error()) {
				t.Fatalf("the waiter ended with %v, want interrupted", err)
			}
			mustRun(t, rt, `shield.sleep(150); assert(l:allow("k"), "the token is still there: the ended wait took it")`)
			if global(t, rt, "reached") != lua.LNil {
				t.Fatal("the interrupted task went on")
			}
		})
	}
}

// Closing the runtime ends a wait at once (not after the grace period) and
// the task is not counted as interrupted or failed.
func TestCloseEndsWaits(t *testing.T) {
	for _, opts := range []string{`{ rate = 0.001, burst = 1 }`, `{ window = 600000, max_requests = 1, sliding = true }`} {
		set := ratelimit.NewMemory(ratelimit.Config{})
		L := lua.NewState(runtime.StateOptions())
		rt, err := runtime.NewRuntime(L, &runtime.Services{Capabilities: []runtime.Capability{&Limiters{Set: set}}})
		if err != nil {
			t.Fatal(err)
		}
		mustRun(t, rt, `l = shield.rate_limiter("close", `+opts+`); assert(l:allow("k"))
			shield.spawn(function() l:wait("k", 600000) end)
			shield.sleep(5)`)
		rt.Close(time.Minute)
		if got := rt.Interrupted(); len(got) != 0 {
			t.Errorf("%s: interrupted %v; want the wait ended by the close", opts, got)
		}
		L.Close()
	}
}

// Outside any task (host code on the main thread) wait blocks the loop and
// still returns its results.
func TestWaitOutsideTasks(t *testing.T) {
	rt := newLimiterRuntime(t, nil)
	err := rt.Do(func(L *lua.LState) error {
		return L.DoString(`
			local tb = shield.rate_limiter("main", { rate = 100, burst = 1 })
			assert(tb:allow("k"))
			assert(tb:wait("k", 5000))
			local sw = shield.rate_limiter("main_sw", { window = 30, max_requests = 1, sliding = true })
			assert(sw:allow("k"))
			assert(sw:wait("k", 5000))
			local ok, why = sw:wait("k", 5)
			assert(ok == false and why == "timeout")`)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// allow() on a token bucket costs no Go allocation: a Lua loop calling it
// allocates no more than the same loop doing nothing (gopher-lua's loop
// itself allocates now and then).
func TestTokenBucketAllowDoesNotAllocate(t *testing.T) {
	rt := newLimiterRuntime(t, nil)
	mustRun(t, rt, `l = shield.rate_limiter("alloc", { rate = 1e12, burst = 1e12 }); l:allow("k"); l:allow("k", 2)
		r = shield.rate_limiter("alloc_r", { rate = 0.001, burst = 1 }); r:allow("k")`)
	const n = 100_000
	mallocs := func(body string) float64 {
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		mustRun(t, rt, `for i = 1, 100000 do `+body+` end`)
		goruntime.ReadMemStats(&after)
		return float64(after.Mallocs-before.Mallocs) / n
	}
	base := mallocs(`local x = i`)
	for _, body := range []string{`l:allow("k")`, `l:allow("k", 2)`, `r:allow("k")`} {
		if per := mallocs(body) - base; per > 0.005 {
			t.Errorf("%s: %.3f allocations per call more than an empty loop (%.3f)", body, per, base)
		}
	}
}

func TestLimiterStatsFromGo(t *testing.T) {
	set := ratelimit.NewMemory(ratelimit.Config{})
	rt := newLimiterRuntime(t, set)
	mustRun(t, rt, `
		local l = shield.rate_limiter("st", { rate = 0.001, burst = 1 })
		l:allow("a"); l:allow("a"); l:allow("b")
		local w = shield.rate_limiter("st_sw", { window = 1000, max_requests = 1, sliding = true })
		w:allow("a"); w:allow("a")`)
	st := set.Stats()
	if st.Limiters != 2 || st.ActiveKeys != 3 || st.Allowed != 3 || st.Rejected != 2 || st.RejectedToday != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// With Redis unreachable a sliding window answers "unavailable" (allow and
// wait, inside a task through the loop's pipeline and outside any task)
// and remaining raises; a token bucket goes on deciding locally.
func TestLimitersOnUnreachableRedis(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	defer c.Close()
	set := ratelimit.NewRedis(c, "unreachable:", ratelimit.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rt := newLimiterRuntime(t, set)
	const src = `
		local sw = shield.rate_limiter("sw", { window = 1000, max_requests = 5, sliding = true })
		local ok, why = sw:allow("k")
		assert(ok == false and why == "unavailable", tostring(ok) .. " " .. tostring(why))
		ok, why = sw:wait("k", 5000)
		assert(ok == false and why == "unavailable", tostring(ok) .. " " .. tostring(why))
		local raised, err = pcall(sw.remaining, sw, "k")
		assert(not raised and err:find("shield.rate_limiter(sw):remaining: ", 1, true), err)
		local tb = shield.rate_limiter("tb", { rate = 1, burst = 2 })
		run = (run or 0) + 1 -- a new key each run
		assert(tb:allow("k" .. run) and tb:allow("k" .. run) and not tb:allow("k" .. run), "the token bucket decides locally")`
	mustRun(t, rt, src)
	if err := rt.Do(func(L *lua.LState) error { return L.DoString(src) }); err != nil {
		t.Fatalf("outside a task: %v", err)
	}
	l, _ := set.Get("sw")
	if st := l.Stats(); st.Unavailable != 4 || st.RejectedToday != 4 {
		t.Fatalf("sliding window stats %+v, want 4 unavailable", st)
	}
}
