package bindings

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/lock/local"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

func lockRuntime(t *testing.T, locks *Locks) (*runtime.Runtime, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	rt := newTestRuntime(t, &runtime.Services{Capabilities: []runtime.Capability{locks}, Log: slog.New(slog.NewTextHandler(buf, nil)),
		Owner: runtime.Owner{NodeID: "eu:west", ServiceID: 42, ServiceName: "boss", Instance: "ab12"}})
	return rt, buf
}

// A task that ends holding locks — by returning, by raising, or inside its
// pcalls and coroutines — has every hold released, each with a warning that
// names the lock and the task, and counted.
func TestLocksOfAnEndedTaskAreReleased(t *testing.T) {
	locks := testLocks()
	rt, log := lockRuntime(t, locks)
	err := run(t, rt, `
		local function kinds(n)
			return {
				shield.mutex(n .. ":m"), shield.spinlock(n .. ":s"), shield.rwlock(n .. ":rw"):read_lock(),
				shield.rwlock(n .. ":rw2"):write_lock(), shield.distributed_mutex(n .. ":d"),
				shield.distributed_rwlock(n .. ":drw"):read_lock(), shield.distributed_rwlock(n .. ":drw2"):write_lock(),
			}
		end
		local ended = 0
		shield.spawn(function() -- returns holding
			for _, l in ipairs(kinds("ret")) do assert(l:acquire()); assert(l:acquire()) end
			ended = ended + 1
		end)
		shield.spawn(function() -- raises holding, the holds taken in a pcall and a coroutine
			pcall(function() for _, l in ipairs(kinds("pcall")) do assert(l:acquire()) end end)
			coroutine.wrap(function() for _, l in ipairs(kinds("co")) do assert(l:acquire()) end end)()
			assert(shield.lock():acquire("raise:handle", { ttl = 60000 }))
			ended = ended + 1
			error("boom")
		end)
		while ended < 2 do shield.sleep(1) end
		shield.sleep(5)
		for _, n in ipairs({ "ret", "pcall", "co" }) do
			for i, l in ipairs(kinds(n)) do
				assert(l:try_acquire(), n .. " lock " .. i .. " still held after its task ended")
				assert(l:release())
			end
		end
		assert(shield.lock():try_acquire("raise:handle", { ttl = 60000 })):release()`)
	if err != nil {
		t.Fatal(err)
	}
	if st := locks.Stats(); st.Abandoned != 3*7+1 || st.Holds != 0 {
		t.Fatalf("stats %+v; want %d abandoned and none held", st, 3*7+1)
	}
	for _, want := range []string{"lock=ret:m", "lock=co:drw2", "lock=pcall:d", "lock=raise:handle", "task=spawn", "count=2"} {
		if !strings.Contains(log.String(), want) {
			t.Fatalf("the warnings do not mention %q:\n%s", want, log.String())
		}
	}
}

// A task interrupted by Close (it never yields) has its holds released too.
func TestLocksOfAnInterruptedTaskAreReleased(t *testing.T) {
	locks := testLocks()
	L := lua.NewState()
	defer L.Close()
	// ready() tells the test the task holds both locks: Close must then
	// find them held by a task it interrupts, however slow the machine.
	held := make(chan struct{})
	L.SetGlobal("ready", L.NewFunction(func(*lua.LState) int { close(held); return 0 }))
	rt, err := runtime.NewRuntime(L, &runtime.Services{Capabilities: []runtime.Capability{locks}})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, `
		shield.spawn(function()
			assert(shield.mutex("spin"):acquire())
			assert(shield.distributed_mutex("spin-d"):acquire())
			ready()
			while true do end
		end)`)
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("the task did not take its locks within 5 s")
	}
	rt.Close(50 * time.Millisecond)
	if _, held := locks.Local.Info("spin"); held {
		t.Fatal("the interrupted task's mutex is still held")
	}
	if info, _ := locks.Dist.Info("spin-d").Do(t.Context()); info.Held {
		t.Fatalf("the interrupted task's distributed mutex is still held: %+v", info)
	}
	if st := locks.Stats(); st.Abandoned != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// A hold released normally is no longer the task's: nothing is released
// for it again at the end, and nothing accumulates per hold.
func TestReleasedHoldsLeaveTheTask(t *testing.T) {
	locks := testLocks()
	rt, _ := lockRuntime(t, locks)
	mustRun(t, rt, `
		local l, d = shield.mutex("again"), shield.distributed_mutex("again-d")
		for i = 1, 500 do
			assert(l:acquire()); assert(d:acquire()); assert(d:release()); assert(l:release())
		end
		shield.spawn(function() assert(l:acquire()) end) -- another task takes it and keeps it`)
	if _, err := rt.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := locks.Stats(); st.Abandoned != 1 || st.Holds != 0 {
		t.Fatalf("stats %+v; want only the spawned task's hold abandoned", st)
	}
	// The runtime's thread count after such tasks: internal/runtime's
	// TestTasksThatTookLocksLeaveNoThreads.
}

// l:owner() carries the owner as it is: a node id with ':' comes back whole.
func TestLockOwnerWithColonsInTheNodeID(t *testing.T) {
	rt, _ := lockRuntime(t, testLocks())
	mustRun(t, rt, `
		for _, l in ipairs({ shield.mutex("o"), shield.distributed_mutex("o-d") }) do
			assert(l:acquire())
			local o = l:owner()
			assert(o.node_id == "eu:west", tostring(o.node_id))
			assert(o.service_id == 42, tostring(o.service_id))
			assert(o.service_name == "boss", tostring(o.service_name))
			assert(o.thread_id:match("^coroutine%-ab12%-%d+$"), o.thread_id)
			assert(shield.owner() == o.node_id .. ":" .. o.service_id .. ":" .. o.thread_id)
			assert(l:info().owner.node_id == "eu:west")
			l:release()
		end`)
}

// Every method of the rwlock pair and of shield.lock() checks its self.
func TestLockTypesCheckSelf(t *testing.T) {
	rt, _ := lockRuntime(t, testLocks())
	mustRun(t, rt, `
		local function refuses(f, want)
			local ok, err = pcall(f)
			assert(not ok, "accepted a foreign self")
			assert(tostring(err):find(want, 1, true), tostring(err))
		end
		for _, new in ipairs({ shield.rwlock, shield.distributed_rwlock }) do
			local rw = new("pair")
			refuses(function() rw.read_lock(newproxy()) end, "bad argument #1 to 'read_lock'")
			refuses(function() rw.write_lock(shield.mutex("m")) end, "bad argument #1 to 'write_lock'")
			refuses(function() rw:read_lock().acquire(rw) end, "bad argument #1 to 'acquire'")
		end
		refuses(function() shield.lock().acquire(newproxy(), "x") end, "(shield.lock expected, got userdata")
		refuses(function() shield.lock().try_acquire(shield.mutex("m"), "x") end, "(shield.lock expected, got userdata")
		refuses(function() shield.mutex("m").with(newproxy(), function() end) end, "(shield.mutex expected, got userdata")
		-- A crafted metatable with the right name is still refused.
		local fake = newproxy(true)
		getmetatable(fake).__name = "shield.mutex"
		refuses(function() shield.mutex("m").acquire(fake) end, "bad argument #1 to 'acquire'")`)
}

// Outside any task (host code on the main thread) acquire waits in place,
// for a holder in another runtime of the process.
func TestLockOutsideTasksWaitsSynchronously(t *testing.T) {
	locks := testLocks()
	rt, _ := lockRuntime(t, locks)
	other, _ := lockRuntime(t, locks)
	mustRun(t, other, `
		shield.spawn(function()
			local l, m = shield.distributed_mutex("sync", { ttl = 5000 }), shield.mutex("sync-local")
			assert(l:acquire()); assert(m:acquire())
			holding = true
			shield.sleep(30)
			l:release(); m:release()
		end)`)
	for global(t, other, "holding") != lua.LTrue {
		time.Sleep(time.Millisecond)
	}
	err := rt.Do(func(L *lua.LState) error {
		return L.DoString(`
			local l = shield.distributed_mutex("sync")
			local ok, why = l:acquire(5000)
			assert(ok, why)
			assert(l:release())
			local m = shield.mutex("sync-local")
			assert(m:acquire(5000))
			assert(m:release())
			outside = "done"`)
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := global(t, rt, "outside"); v.String() != "done" {
		t.Fatalf("outside = %v", v)
	}
}

// An uncontended distributed_mutex acquire+release from Lua is exactly two
// Redis commands, each one EVALSHA sent in a loop turn's batch.
func TestUncontendedDistributedPairIsTwoCommands(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testredis.Standalone(t).Options().Addr})
	t.Cleanup(func() { c.Close() })
	hook := &countHook{}
	c.AddHook(hook)
	locks := &Locks{Local: local.NewManager(nil), Dist: lock.NewRedis(c, testredis.Prefix(t), nil), Config: config.Default().Lock}
	rt, _ := lockRuntime(t, locks)
	mustRun(t, rt, `local l = shield.distributed_mutex("warm", { auto_extend = false }); assert(l:acquire()); assert(l:release())`)
	hook.reset()
	mustRun(t, rt, `
		local l = shield.distributed_mutex("pair", { auto_extend = false })
		assert(l:acquire())
		assert(l:release())`)
	if cmds := hook.commands(); len(cmds) != 2 || cmds[0] != "evalsha" || cmds[1] != "evalsha" {
		t.Fatalf("commands sent: %v; want two EVALSHA", cmds)
	}
}

type countHook struct {
	mu   sync.Mutex
	cmds []string
}

func (h *countHook) reset() { h.mu.Lock(); h.cmds = nil; h.mu.Unlock() }
func (h *countHook) commands() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.cmds...)
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.cmds = append(h.cmds, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		for _, c := range cmds {
			h.cmds = append(h.cmds, c.Name())
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// Where a task cannot yield (a metamethod, a sort comparator), an
// in-process lock that is free still works; one that would wait raises
// "cannot block here" and leaves nothing behind.
func TestLockCallsWhereATaskCannotYield(t *testing.T) {
	locks := testLocks()
	rt, _ := lockRuntime(t, locks)
	mustRun(t, rt, `
		local m, d = shield.mutex("meta"), shield.distributed_mutex("meta-d")
		local obj = setmetatable({}, { __index = function(_, k)
			assert(m:acquire()); assert(d:acquire())
			assert(m:release()); assert(d:release())
			return k
		end })
		assert(obj.x == "x")
		local t = { 3, 1, 2 }
		table.sort(t, function(a, b) assert(m:acquire()); m:release(); return a < b end)
		-- Held by another task: the acquire would wait, so it raises.
		local held = false
		shield.spawn(function() assert(m:acquire()); held = true; shield.sleep(50); m:release() end)
		while not held do shield.sleep(1) end
		local bad = setmetatable({}, { __index = function() return m:acquire(1000) end })
		local ok, err = pcall(function() return bad.y end)
		assert(not ok and tostring(err):find("cannot block here"), tostring(err))
		while held and not m:try_acquire() do shield.sleep(5) end
		assert(m:release())`)
	if st := locks.Stats(); st.Holds != 0 || st.Waiting != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Issue 18, defect 2, from Lua: a hold of the task brought back into Redis
// after its release (a failover rolled the hash back) is not a re-entry —
// release() returning true means the task no longer holds the lock — and a
// re-entry of a hold Redis replaced is "lost".
func TestLuaReleaseTrueMeansNotHeldAfterAHashWrittenBack(t *testing.T) {
	c := testredis.Standalone(t)
	prefix := testredis.Prefix(t)
	locks := &Locks{Local: local.NewManager(nil), Dist: lock.NewRedis(c, prefix, nil), Config: config.Default().Lock}
	rt, _ := lockRuntime(t, locks)
	key := store.Keys{Prefix: prefix}.Lock("wb")
	if err := rt.Do(func(L *lua.LState) error {
		// write_back(token, count): the hash of the task's hold as a
		// replica had it (the owner as Redis had it at owner_seen()).
		var owner string
		L.SetGlobal("owner_seen", L.NewFunction(func(L *lua.LState) int {
			var err error
			if owner, err = c.HGet(context.Background(), key, "owner").Result(); err != nil {
				L.RaiseError("%v", err)
			}
			return 0
		}))
		L.SetGlobal("write_back", L.NewFunction(func(L *lua.LState) int {
			ctx := context.Background()
			err := c.HSet(ctx, key, "owner", owner, "count", L.CheckInt(2), "token", int64(L.CheckNumber(1)), "acquired_at", 1).Err()
			if err == nil {
				err = c.PExpire(ctx, key, 800*time.Millisecond).Err()
			}
			if err != nil {
				L.RaiseError("%v", err)
			}
			return 0
		}))
		L.SetGlobal("held", L.NewFunction(func(L *lua.LState) int {
			n, err := c.Exists(context.Background(), key).Result()
			if err != nil {
				L.RaiseError("%v", err)
			}
			L.Push(lua.LBool(n == 1))
			return 1
		}))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, `
		local l = shield.distributed_mutex("wb", { ttl = 30000 })
		assert(l:acquire())
		owner_seen()
		local old = l:token()
		assert(l:release())
		write_back(old, 1)
		assert(l:try_acquire() == false, "a hold written back after the release was taken as a re-entry")
		assert(l:acquire(5000))
		assert(l:token() > old)
		assert(l:release())
		assert(not held(), "release() returned true and the lock is still held")

		assert(l:acquire())
		write_back(l:token() - 1, 1)
		local ok, why = l:acquire()
		assert(ok == false and why == "lost", "re-entry of a replaced hold: " .. tostring(ok) .. " " .. tostring(why))
		assert(l:lost())
		ok, why = l:release()
		assert(ok == false and why == "lost", "release: " .. tostring(ok) .. " " .. tostring(why))`)
}

// In-process acquire, try_acquire and release are tried inline, without
// the blocking-call wrapper; a call that has to wait still goes through
// it: the results keep their counts at any call site (fixed-count,
// multi-value, inside pcall and coroutines), a waiting acquire suspends only
// its task, and errors name the script's line.
func TestInProcessLockCallsInlineAndWaiting(t *testing.T) {
	rt, _ := lockRuntime(t, testLocks())
	mustRun(t, rt, `
		for _, m in ipairs({ shield.mutex("inl"), shield.spinlock("inl-s"), shield.rwlock("inl-rw"):write_lock() }) do
			assert(select("#", m:acquire()) == 1)
			assert(select("#", m:try_acquire()) == 1) -- a re-entry
			local a, b, c = m:release()
			assert(a == true and b == nil and c == nil)
			assert(select("#", m:release()) == 1)
			local ok, why, extra = m:release()
			assert(ok == false and why == "not_held" and extra == nil, tostring(why))
			assert(select("#", m:release()) == 2)

			assert(m:acquire())
			local log, done = {}, false
			shield.spawn(function()
				log.try = { n = select("#", m:try_acquire()), (m:try_acquire()) }
				local ok, why, extra = m:acquire(20) -- waits, then times out
				log.timeout = { ok, why, extra }
				log.n = select("#", m:acquire(20))
				local got = { pcall(m.acquire, m) } -- waits inside pcall until released
				log.got = got
				local co = coroutine.wrap(function() return m:release() end)
				log.rel = { co() }
				done = true
			end)
			shield.sleep(120)
			local s = tostring(m)
			assert(log.try.n == 1 and log.try[1] == false, s)
			assert(log.timeout[1] == false and log.timeout[2] == "timeout" and log.timeout[3] == nil, s)
			assert(log.n == 2, s)
			assert(log.got == nil, s .. ": acquired while held")
			assert(m:release())
			while not done do shield.sleep(1) end
			assert(#log.got == 2 and log.got[1] == true and log.got[2] == true, s)
			assert(#log.rel == 1 and log.rel[1] == true, s)
		end`)
	for src, want := range map[string]string{
		`shield.mutex("e"):acquire("x")`:                                                 `test.lua:1: shield.mutex: bad argument #2 to 'acquire' (number expected, got string)`,
		"local m = shield.mutex('e')\nm.acquire({})":                                     `test.lua:2: shield.mutex: bad argument #1 to 'acquire' (shield.mutex expected, got table (call it with ':'))`,
		"local m = shield.mutex('e')\nm.release(42)":                                     `test.lua:2: shield.mutex: bad argument #1 to 'release' (shield.mutex expected, got number (call it with ':'))`,
		"local m = shield.mutex('e', {reentrant = false})\nm:acquire()\nm:try_acquire()": `test.lua:3: shield.mutex:try_acquire: "e" is already held by this task and is not reentrant`,
	} {
		err := run(t, rt, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", src, err, want)
		}
	}
}
