package shieldglobal

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// A clean stop releases every lock the runtime holds at once, not after the
// ttl: the holds taken outside any task when it closes, those of tasks still
// running (a sleeping task is interrupted after the grace period, and its
// holds go with it), local, distributed, re-entered and read holds alike;
// waiters give up.
func TestCloseReleasesHeldLocks(t *testing.T) {
	for name, cfgFn := range map[string]func(*testing.T) Config{
		"memory":  func(*testing.T) Config { return config.Default() },
		"redis":   redisConfig,
		"cluster": clusterConfig,
	} {
		t.Run(name, func(t *testing.T) {
			m := newModule(t, cfgFn(t))
			L := lua.NewState()
			defer L.Close()
			rt, err := m.NewRuntime(L)
			if err != nil {
				t.Fatal(err)
			}
			mustRunLua(t, rt, `
				shield.spawn(function()
					local d = shield.distributed_mutex("held", { ttl = 60000 })
					assert(d:acquire()); assert(d:acquire())
					assert(shield.mutex("local-held"):acquire())
					assert(shield.distributed_rwlock("rw-held", { ttl = 60000 }):read_lock():acquire())
					holding = true
					shield.sleep(600000)
				end)
				while not holding do shield.sleep(1) end
				shield.spawn(function() shield.distributed_mutex("held"):acquire() end) -- a waiter
				shield.sleep(5)`)
			err = rt.Do(func(L *lua.LState) error {
				return L.DoString(`
					assert(shield.distributed_mutex("main-held", { ttl = 60000 }):acquire())
					assert(shield.mutex("main-local"):acquire())`)
			})
			if err != nil {
				t.Fatal(err)
			}
			rt.Close(0)

			ctx := context.Background()
			for _, n := range []string{"held", "rw-held", "main-held"} {
				if info, err := m.distLocks.Info(n).Do(ctx); err != nil || info.Held {
					t.Fatalf("%s still held after Close: %+v %v", n, info, err)
				}
			}
			for _, n := range []string{"local-held", "main-local"} {
				if info, held := m.localLocks.Info(n); held {
					t.Fatalf("local lock %s still held after Close: %+v", n, info)
				}
			}
		})
	}
}

// Lease renewal goes through the runtime's loop: while a task spins without
// yielding, its runtime renews nothing, so its lease lapses and another
// process gets the lock after the ttl; when the spinner yields, its hold
// reports lost.
func TestSpinningTaskLetsItsLeaseLapse(t *testing.T) {
	for name, cfgFn := range map[string]func(*testing.T) Config{"redis": redisConfig, "cluster": clusterConfig} {
		t.Run(name, func(t *testing.T) {
			cfg := cfgFn(t)
			holder := newRuntime(t, newModule(t, cfg))
			other := newRuntime(t, newModule(t, cfg)) // another process
			spun := make(chan error, 1)
			go func() {
				spun <- holder.RunString(`
					local l = shield.distributed_mutex("spin", { ttl = 600, extend_interval = 100 })
					assert(l:acquire())
					local lost_by
					l:on_lost(function(_, why) lost_by = why end)
					shield.sleep(800) -- the watchdog keeps it while the loop runs
					assert(not l:lost())
					spinning = true
					local t0 = os.clock()
					while os.clock() - t0 < 2.5 do end -- no yield: nothing else of this runtime runs
					assert(l:lost(), "the hold does not report lost after its lease lapsed")
					shield.sleep(20)
					assert(lost_by and lost_by:find("lease ran out"), tostring(lost_by))
					local ok, why = l:release()
					assert(not ok and why == "lost", tostring(why))`, "holder.lua")
			}()
			mustRunLua(t, other, `
				shield.sleep(900)
				local l = shield.distributed_mutex("spin", { ttl = 5000 })
				local t0 = shield.now_ms()
				local ok, why = l:acquire(1500)
				assert(ok, "another process did not get the lock of a spinning holder: " .. tostring(why))
				shield.sleep(2000) -- hold it past the spin
				assert(l:release())`)
			if err := <-spun; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A lock timeout is a hard bound while Redis hangs (SIGSTOP): acquire(2000)
// returns at its timeout, long before the client's read timeout, and raises
// an error saying Redis did not answer (not a plain "timeout"); the attempt
// still in flight succeeds when Redis is back, and is released.
func TestLockTimeoutWhileRedisHangs(t *testing.T) {
	srv := testredis.StartServer(t)
	cfg := config.Default()
	cfg.Global.Redis.URL = srv.URL()
	cfg.Global.Redis.ReadTimeout, cfg.Global.Redis.WriteTimeout = 20000, 20000
	cfg.Global.Cache.Sync = false
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	mustRunLua(t, rt, `local l = shield.distributed_mutex("hang"); assert(l:acquire()); assert(l:release())`)
	thaw := freezeRedis(t, srv)
	start := time.Now()
	err := rt.RunString(`
		local l = shield.distributed_mutex("hang")
		local ok, why = l:acquire(2000)
		error("acquire returned " .. tostring(ok) .. ", " .. tostring(why))`, "hang.lua")
	elapsed := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), "hang.lua:3: shield.distributed_mutex:acquire") {
		t.Fatalf("acquire(2000) while Redis hangs: %v; want an error saying Redis did not answer", err)
	}
	if elapsed > 5*time.Second {
		t.Fatalf("acquire(2000) took %v", elapsed)
	}
	t.Logf("after %v: %v", elapsed, err)
	thaw()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := m.distLocks.Info("hang").Do(context.Background())
		if err == nil && !info.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the late grant was not released: %+v %v", info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustRunLua(t, rt, `assert(shield.distributed_mutex("hang"):acquire(2000))`)
}

// freezeRedis stops a private server with SIGSTOP; thaw resumes it (also at
// the end of the test).
func freezeRedis(t *testing.T, srv *testredis.Server) (thaw func()) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid <= 0 || syscall.Kill(pid, syscall.SIGSTOP) != nil {
		t.Fatalf("cannot stop %s (pid %d)", srv, pid)
	}
	var once sync.Once
	thaw = func() { once.Do(func() { syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(thaw)
	return thaw
}

// With lock.redlock enabled, distributed mutexes go through N independent
// nodes and keep working while a minority of them is down.
func TestRedlockFromLua(t *testing.T) {
	servers := []*testredis.Server{testredis.StartServer(t), testredis.StartServer(t), testredis.StartServer(t)}
	cfg := redisConfig(t)
	cfg.Lock.Redlock.Enabled = true
	cfg.Lock.Redlock.Quorum = 2
	for _, s := range servers {
		cfg.Lock.Redlock.Addrs = append(cfg.Lock.Redlock.Addrs, s.Addr)
	}
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	mustRunLua(t, rt, `
		local l = shield.distributed_mutex("rl", { ttl = 5000, auto_extend = false })
		assert(l:acquire(2000))
		local other
		shield.spawn(function() other = shield.distributed_mutex("rl", { ttl = 5000 }):try_acquire() end)
		shield.sleep(50)
		assert(other == false, "a second owner got a redlock that is held")
		assert(l:release())`)
	servers[0].Stop()
	mustRunLua(t, rt, fmt.Sprintf(`
		local l = shield.distributed_mutex("rl2", { ttl = 5000, auto_extend = false })
		assert(l:acquire(2000), "quorum %d of 3 should still be reachable")
		assert(l:release())`, 2))
	servers[1].Stop()
	// One node of three: no quorum. The acquire fails (an error naming the
	// call, or false after its timeout) — it never succeeds.
	err := rt.RunString(`
		local l = shield.distributed_mutex("rl3", { ttl = 5000, auto_extend = false })
		local ok, why = l:acquire(500)
		assert(not ok, "acquired without a quorum")`, "test.lua")
	if err != nil && !strings.Contains(err.Error(), "shield.distributed_mutex") {
		t.Fatalf("error does not name the call: %v", err)
	}
}

// A hold the watchdog found lost must not keep the process-local gate: after
// release() reports "lost", other tasks of the process get the lock at once
// (well before the gate's own lease could have run out).
func TestLostHoldFreesTheLocalGate(t *testing.T) {
	cfg := redisConfig(t)
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	client := testredis.Standalone(t)
	err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("delete_lock_key", L.NewFunction(func(*lua.LState) int {
			client.Del(context.Background(), cfg.Global.Redis.Prefix+"lock:{gate}")
			return 0
		}))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// One task throughout: lost() and release() are about this task's hold.
	mustRunLua(t, rt, `
		local held = shield.distributed_mutex("gate", { ttl = 3000, extend_interval = 100 })
		assert(held:acquire())
		delete_lock_key() -- the lease vanishes behind the watchdog's back
		local deadline = shield.now_ms() + 5000
		while not held:lost() do
			assert(shield.now_ms() < deadline, "the watchdog did not notice")
			shield.sleep(20)
		end
		local ok, why = held:release()
		assert(ok == false and why == "lost", tostring(why))
		local got
		shield.spawn(function() got = shield.distributed_mutex("gate", { ttl = 3000 }):acquire(1000) end)
		local until_ms = shield.now_ms() + 2000
		while got == nil and shield.now_ms() < until_ms do shield.sleep(10) end
		assert(got == true, "another task could not get the lock after the lost hold was released: " .. tostring(got))`)
}

// When Redis stops answering, the watchdog cannot renew: once the lease must
// have run out the hold is marked lost and on_lost runs — the holder learns
// it is no longer protected even though nobody took the lock over.
func TestWatchdogMarksLostWhenRenewalsFail(t *testing.T) {
	srv := testredis.StartServer(t)
	cfg := config.Default()
	cfg.Global.Redis.URL = srv.URL()
	cfg.Global.Redis.DialTimeout, cfg.Global.Redis.ReadTimeout, cfg.Global.Redis.WriteTimeout = 100, 100, 100
	cfg.Global.Cache.Sync = false
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("stop_redis", L.NewFunction(func(*lua.LState) int { srv.Stop(); return 0 }))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mustRunLua(t, rt, `
		local reason
		local l = shield.distributed_mutex("unreachable", {
			-- 3 s: renewals every 100 ms fail for seconds before the lease
			-- ends, however late a loaded machine runs the watchdog (a 600 ms
			-- lease once ran out before the first renewal was tried).
			ttl = 3000, extend_interval = 100,
			on_lost = function(_, why) reason = why end,
		})
		assert(l:acquire())
		stop_redis()
		local deadline = shield.now_ms() + 15000
		while not (l:lost() and reason) do
			assert(shield.now_ms() < deadline, "the hold was never marked lost")
			shield.sleep(20)
		end
		assert(reason:find("renewals failed until the lease ran out"), reason)`)
}

// max_retries and retry against a holder in another process: one attempt
// with max_retries = 1, and giving up after two retry intervals with 3.
func TestMaxRetriesAgainstAnotherProcess(t *testing.T) {
	cfg := redisConfig(t)
	holder := newRuntime(t, newModule(t, cfg))
	waiter := newRuntime(t, newModule(t, cfg))
	mustRunLua(t, holder, `
		shield.spawn(function() assert(shield.distributed_mutex("mr", { ttl = 60000 }):acquire()); holding = true; shield.sleep(600000) end)
		while not holding do shield.sleep(1) end`)
	mustRunLua(t, waiter, `
		local t0 = shield.now_ms()
		local ok, why = shield.distributed_mutex("mr", { max_retries = 1 }):acquire(10000)
		assert(ok == false and why == "timeout", tostring(why))
		assert(shield.now_ms() - t0 < 5000, "max_retries = 1 waited")
		t0 = shield.now_ms()
		ok, why = shield.distributed_mutex("mr", { max_retries = 3, retry = 60 }):acquire(10000)
		local waited = shield.now_ms() - t0
		assert(ok == false and why == "timeout", tostring(why))
		assert(waited >= 2 * 60 - 2 and waited < 5000, "gave up after " .. waited .. " ms")`)
}

// Outside any task (host code on the main thread) a Redis-backed acquire
// waits in place for a holder in another process, and works off its own
// wake-ups while the loop is busy with it.
func TestLockOutsideTasksOnRedis(t *testing.T) {
	cfg := redisConfig(t)
	holder := newRuntime(t, newModule(t, cfg))
	rt := newRuntime(t, newModule(t, cfg))
	mustRunLua(t, holder, `
		shield.spawn(function()
			local l = shield.distributed_mutex("main", { ttl = 5000 })
			assert(l:acquire())
			shield.sleep(100)
			l:release()
		end)
		shield.sleep(20)`)
	err := rt.Do(func(L *lua.LState) error {
		return L.DoString(`
			local l = shield.distributed_mutex("main", { retry = 10000 })
			local ok, why = l:acquire(5000)
			assert(ok, why)
			assert(l:release())`)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An acquire given no timeout and no wait option gives up after lock.wait,
// so the spec's 全服BOSS example can take its "busy" branch (it waited
// forever before).
func TestAcquireWithoutWaitGivesUpAfterLockWait(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{{"memory", config.Default()}, {"redis", redisConfig(t)}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Lock.Wait = 300
			rt := newRuntime(t, newModule(t, cfg))
			mustRunLua(t, rt, `
				local lock = shield.lock()
				local held = assert(lock:acquire("boss_spawn", { ttl = 60000 }))
				local got, why, mutex_ok, mutex_why
				local took
				shield.spawn(function()
					local t0 = shield.now_ms()
					got, why = lock:acquire("boss_spawn", { ttl = 60000, reentrant = true })
					took = shield.now_ms() - t0
				end)
				local m = shield.mutex("local_boss")
				assert(m:acquire())
				shield.spawn(function() mutex_ok, mutex_why = shield.mutex("local_boss"):acquire() end)
				local deadline = shield.now_ms() + 10000
				while (why == nil or mutex_why == nil) and shield.now_ms() < deadline do shield.sleep(20) end
				assert(got == nil and why == "timeout", "lock:acquire gave " .. tostring(got) .. ", " .. tostring(why))
				assert(took >= 290, "gave up after " .. tostring(took) .. " ms, before lock.wait")
				assert(mutex_ok == false and mutex_why == "timeout", "mutex:acquire gave " .. tostring(mutex_ok) .. ", " .. tostring(mutex_why))
				held:release()
				m:release()`)
		})
	}
}
