package shieldglobal

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// frozenRedisModule is a module on a private redis-server that a test can
// freeze (SIGSTOP), with the default client timeouts (read_timeout 3 s).
func frozenRedisModule(t *testing.T) (*testredis.Server, *Runtime) {
	t.Helper()
	srv := testredis.StartServer(t)
	cfg := config.Default()
	cfg.Global.Redis.URL = srv.URL()
	cfg.Global.Cache.Sync = false
	m := newModule(t, cfg)
	return srv, newRuntime(t, m)
}

// pop(timeout) is a hard bound while Redis hangs (SIGSTOP), and a Redis that
// does not answer is an error, not an empty queue: pop(1500) raises "Redis
// did not answer" at about 1.5 s. Before, it took the client's retries of
// its first pop (4 x read_timeout = 12 s) and then returned nil, "timeout".
// The pop still in flight executes when Redis wakes up; a message it takes
// goes back to the queue, so nothing is lost.
func TestPopTimeoutIsAHardBoundWhileRedisHangs(t *testing.T) {
	for _, kind := range []string{"queue", "reliable_queue"} {
		t.Run(kind, func(t *testing.T) {
			srv, rt := frozenRedisModule(t)
			mustRunLua(t, rt, fmt.Sprintf(`assert(shield.%s("q"):push("m1"))`, kind))
			thaw := srv.Freeze()
			const timeout = 1500 * time.Millisecond
			start := time.Now()
			err := rt.RunString(fmt.Sprintf(`
				local msg, why = shield.%s("q"):pop(%d)
				error("pop returned " .. tostring(msg) .. ", " .. tostring(why))`, kind, timeout.Milliseconds()), "pop.lua")
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "Redis did not answer") || !strings.Contains(err.Error(), "pop.lua:2:") {
				t.Fatalf("pop(%v) while Redis hangs: %v; want an error saying Redis did not answer", timeout, err)
			}
			// Generous slack for a loaded machine; the old code took 12 s.
			if took > timeout+1500*time.Millisecond {
				t.Fatalf("pop(%v) took %v while Redis hangs", timeout, took)
			}
			t.Logf("after %v: %v", took, err)
			thaw()
			// The late pop's message went back: the next pop gets it.
			mustRunLua(t, rt, fmt.Sprintf(`
				local msg = shield.%s("q"):pop(5000)
				assert(msg == "m1", "after the thaw: " .. tostring(msg))`, kind))
		})
	}
}

// A pop already waiting when Redis freezes ends at its deadline with the
// Redis error too: its first pop answered "empty", then the notifier's
// re-check got no answer. Before, the notifier's pop waited out the read
// timeout (3 s, not its 2 s deadline) and the waiter, expiring before that
// failure, was told "timeout".
func TestWaitingPopRaisesWhenRedisFreezesMidWait(t *testing.T) {
	srv, rt := frozenRedisModule(t)
	mustRunLua(t, rt, `assert(shield.queue("q"):length() == 0)`)
	const timeout = 3500 * time.Millisecond
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- rt.RunString(fmt.Sprintf(`
			local msg, why = shield.queue("q"):pop(%d)
			error("pop returned " .. tostring(msg) .. ", " .. tostring(why))`, timeout.Milliseconds()), "wait.lua")
	}()
	time.Sleep(300 * time.Millisecond) // the pop is waiting (or, on a slow machine, still in its first pop)
	srv.Freeze()
	err := <-done
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "Redis did not answer") {
		t.Fatalf("pop(%v) with Redis frozen mid-wait: %v; want an error saying Redis did not answer", timeout, err)
	}
	if took > timeout+1500*time.Millisecond {
		t.Fatalf("pop(%v) took %v", timeout, took)
	}
	t.Logf("after %v: %v", took, err)
}

// A sliding window's allow answers false, "unavailable" within
// rate_limiter.timeout (300 ms by default) while Redis hangs, and so does
// its wait: a chat limiter cannot hold a player's message for seconds.
// Before, allow waited out the client's read timeout and retries (3–12 s).
func TestSlidingWindowIsUnavailableWithinItsTimeoutWhileRedisHangs(t *testing.T) {
	srv, rt := frozenRedisModule(t)
	mustRunLua(t, rt, `
		chat = shield.rate_limiter("chat", { window = 1000, max_requests = 5, sliding = true })
		assert(chat:allow("p1"))`)
	srv.Freeze()
	const bound = 300*time.Millisecond + 1500*time.Millisecond // the timeout + generous slack
	for _, call := range []string{`chat:allow("p1")`, `chat:wait("p1", 5000)`} {
		start := time.Now()
		mustRunLua(t, rt, fmt.Sprintf(`
			local ok, why = %s
			assert(ok == false and why == "unavailable", tostring(ok) .. ", " .. tostring(why))`, call))
		if took := time.Since(start); took > bound {
			t.Fatalf("%s answered after %v; want within rate_limiter.timeout (300ms) + slack", call, took)
		} else {
			t.Logf("%s: unavailable after %v", call, took)
		}
	}
}

// shield.global():set and incr fail within global.redis.read_timeout (3 s
// by default) while Redis hangs, raising "Redis did not answer". Before,
// a set (with its cache-sync announcement, a pipeline) took the client's
// three retries: 12 s.
func TestGlobalSetAndIncrFailWithinTheReadTimeoutWhileRedisHangs(t *testing.T) {
	srv := testredis.StartServer(t)
	cfg := config.Default()
	cfg.Global.Redis.URL = srv.URL()
	rt := newRuntime(t, newModule(t, cfg))
	mustRunLua(t, rt, `assert(shield.global():set("k", 1))`)
	srv.Freeze()
	const bound = 3*time.Second + 1500*time.Millisecond // read_timeout + generous slack
	for _, call := range []string{`g:set("k", 2)`, `g:incr("n", 1)`} {
		start := time.Now()
		err := rt.RunString(fmt.Sprintf(`g = shield.global(); local r = %s; error("returned " .. tostring(r))`, call), "kv.lua")
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "Redis did not answer") {
			t.Fatalf("%s while Redis hangs: %v; want an error saying Redis did not answer", call, err)
		}
		if took > bound {
			t.Fatalf("%s failed after %v; want within read_timeout (3s) + slack", call, took)
		}
		t.Logf("%s failed after %v: %v", call, took, err)
	}
}
