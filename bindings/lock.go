package bindings

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	shieldlua "github.com/shieldrt/shieldglobal/lua/shield"
)

// The lock capability: argument checks, conversion and the blocking
// protocol. Lock sessions (holds, waits, the gate, the watchdog) are
// core/lock's; this runtime's session lives on its loop.

// The kinds of lock object, each its own Lua type (a method checks that its
// self is of its kind).
const (
	kindMutex       = "shield.mutex"
	kindSpinlock    = "shield.spinlock"
	kindDistMutex   = "shield.distributed_mutex"
	kindRead        = "shield.rwlock:read_lock"
	kindWrite       = "shield.rwlock:write_lock"
	kindDistRead    = "shield.distributed_rwlock:read_lock"
	kindDistWrite   = "shield.distributed_rwlock:write_lock"
	kindHandle      = "shield.lock_handle" // from shield.lock():acquire
	rwlockType      = "shield.rwlock"
	distRWLockType  = "shield.distributed_rwlock"
	lockManagerType = "shield.lock"
)

// lockBinding is the lock capability of one runtime.
type lockBinding struct {
	rt    *runtime.Runtime
	locks *Locks
	sess  *lock.Session
	mts   map[string]*lua.LTable
	// main holds the holds taken outside any task: released at Close (the
	// others are released when their task ends).
	main map[*lock.Hold]struct{}
	// The owner of the task numbered ownID is own (ownerOf's cache; an
	// id, so that it keeps no ended task alive). Loop only.
	ownID int64
	own   lock.Owner
	// ended is the bit of the task-end hook that releases what an ended
	// task still holds (set on a task when it takes a hold).
	ended runtime.EndHook
	// pending is what an acquire's inline attempt returns when the call
	// has to wait (see inlineFirst).
	pending *lua.LUserData
}

// lockObj is one lock object as scripts see it.
type lockObj struct {
	l      *lock.Lock
	kind   string
	onLost *lua.LFunction
}

// lockSlot holds a runtime's lock binding (nil when the lock capability is
// off).
var lockSlot = runtime.NewSlot[lockBinding]()

func installLocks(rt *runtime.Runtime, lib *lua.LTable, l *Locks) {
	L := rt.L
	b := &lockBinding{rt: rt, locks: l, sess: l.service(rt.Log()).NewSession(rt.Loop()),
		mts: map[string]*lua.LTable{}, main: map[*lock.Hold]struct{}{}}
	rt.OnClose(b.close)
	b.ended = rt.OnTaskEnd(func(t *runtime.Task) { b.sess.AbandonOwner(t.Owner(), t.Name) })

	lockSlot.Set(rt, b)

	// l:with is the prelude's Lua helper (it may block); this Lua wrapper
	// checks self first.
	checkWith, err := L.Load(strings.NewReader("local check, with = ...\nreturn function(l, ...) check(l) return with(l, ...) end"),
		shieldlua.ChunkPrefix+"lock_with.lua")
	if err != nil {
		panic(err)
	}
	b.pending = L.NewUserData()
	inline := b.inlineFirst()
	for _, kind := range []string{kindMutex, kindSpinlock, kindDistMutex, kindRead, kindWrite, kindDistRead, kindDistWrite, kindHandle} {
		mt := L.NewTable()
		mt.RawSetString("__name", lua.LString(kind))
		methods := L.NewTable()
		inProcess := kind == kindMutex || kind == kindSpinlock || kind == kindRead || kind == kindWrite
		for _, m := range []struct {
			name string
			fn   func(*lua.LState, *lockObj, runtime.Args) int
		}{
			{"acquire", b.acquire}, {"try_acquire", b.tryAcquire}, {"release", b.release},
			{"extend", b.extend}, {"auto_extend", b.autoExtend},
			{"owner", b.owner}, {"ttl", b.ttl}, {"info", b.info},
			{"token", b.token}, {"lost", b.lost}, {"on_lost", b.setOnLost}, {"name", b.lockName},
		} {
			fn, name, kind := m.fn, m.name, kind
			call := func(L *lua.LState) int {
				lo, a := b.self(L, mt, kind, name)
				return fn(L, lo, a)
			}
			switch {
			case inProcess && name == "release":
				// An in-process release completes right here, always:
				// it needs no blocking-call wrapper.
				methods.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
					lo, a := b.self(L, mt, kind, name)
					return b.releaseInline(L, lo, a)
				}))
			case inProcess && (name == "acquire" || name == "try_acquire"):
				// Tried inline first; only a call that must wait goes
				// through the blocking-call wrapper.
				tryAcq := name == "try_acquire"
				fast := L.NewFunction(func(L *lua.LState) int {
					lo, a := b.self(L, mt, kind, name)
					timeout := lock.TryOnce
					if !tryAcq {
						timeout = acquireTimeout(a, lo, 2)
					}
					return b.startInline(L, lo, a, timeout, tryAcq)
				})
				methods.RawSetString(name, b.inlineCall(L, inline, fast, rt.Blocking(call)))
			default:
				methods.RawSetString(name, rt.Blocking(call))
			}
		}
		kind := kind
		L.Push(checkWith)
		L.Push(L.NewFunction(func(L *lua.LState) int { b.self(L, mt, kind, "with"); return 0 }))
		L.Push(rt.With())
		L.Call(2, 1)
		methods.RawSetString("with", L.Get(-1))
		L.Pop(1)
		runtime.SetMethods(L, mt, methods)
		mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
			lo, _ := b.self(L, mt, kind, "__tostring")
			L.Push(lua.LString(fmt.Sprintf("%s(%q)", lo.kind, lo.l.Name())))
			return 1
		}))
		b.mts[kind] = mt
	}
	for _, typ := range []string{rwlockType, distRWLockType} {
		mt := L.NewTable()
		mt.RawSetString("__name", lua.LString(typ))
		methods := L.NewTable()
		for _, side := range []string{"read_lock", "write_lock"} {
			typ, side := typ, side
			methods.RawSetString(side, L.NewFunction(func(L *lua.LState) int {
				pair := runtime.SelfAs[*lua.LTable](runtime.ArgsOf(L, typ, side), 1, typ)
				L.Push(pair.RawGetString(side))
				return 1
			}))
		}
		runtime.SetMethods(L, mt, methods)
		b.mts[typ] = mt
	}
	mgr := L.NewTable()
	mgr.RawSetString("__name", lua.LString(lockManagerType))
	mgrMethods := L.NewTable()
	mgrMethods.RawSetString("acquire", rt.Blocking(func(L *lua.LState) int { return b.mgr(L, "acquire") }))
	mgrMethods.RawSetString("try_acquire", rt.Blocking(func(L *lua.LState) int { return b.mgr(L, "try_acquire") }))
	runtime.SetMethods(L, mgr, mgrMethods)
	mgrUD := L.NewUserData()
	mgrUD.Value = b
	mgrUD.Metatable = mgr

	lib.RawSetString("mutex", L.NewFunction(func(L *lua.LState) int { return b.newLock(L, kindMutex, lock.InProcess, false) }))
	lib.RawSetString("spinlock", L.NewFunction(func(L *lua.LState) int { return b.newLock(L, kindSpinlock, lock.InProcess, true) }))
	lib.RawSetString("distributed_mutex", L.NewFunction(func(L *lua.LState) int { return b.newLock(L, kindDistMutex, lock.Distributed, false) }))
	lib.RawSetString("rwlock", L.NewFunction(func(L *lua.LState) int { return b.newRW(L, rwlockType, lock.InProcess) }))
	lib.RawSetString("distributed_rwlock", L.NewFunction(func(L *lua.LState) int { return b.newRW(L, distRWLockType, lock.Distributed) }))
	lib.RawSetString("lock", L.NewFunction(func(L *lua.LState) int { L.Push(mgrUD); return 1 }))
}

// ---- construction

// makeObj builds a lock object of kind; a bad option raises an argument
// error at n.
func (b *lockBinding) makeObj(a runtime.Args, n int, kind string, spec lock.Spec, onLost *lua.LFunction) *lua.LUserData {
	l, err := b.sess.NewLock(spec)
	if err != nil {
		if oe, ok := lock.IsOptionError(err); ok {
			a.Bad(n, oe.Msg)
		}
		a.Fail("%s", err.Error())
	}
	lo := &lockObj{l: l, kind: kind}
	if onLost != nil {
		b.setLost(lo, onLost)
	}
	ud := a.L.NewUserData()
	ud.Value = lo
	ud.Metatable = b.mts[kind]
	return ud
}

// shield.mutex(name [, opts]), shield.spinlock, shield.distributed_mutex.
func (b *lockBinding) newLock(L *lua.LState, kind string, scope lock.Scope, spin bool) int {
	a := runtime.ArgsOf(L, "shield", kind[len("shield."):])
	name := a.Key(1)
	g, onLost := readLockOptions(a, 2)
	L.Push(b.makeObj(a, 2, kind, lock.Spec{Name: name, Mode: lock.Exclusive, Scope: scope, Spin: spin, Given: g}, onLost))
	return 1
}

// shield.rwlock(name [, opts]) / shield.distributed_rwlock: an object whose
// read_lock() and write_lock() are the two sides of one lock.
func (b *lockBinding) newRW(L *lua.LState, typ string, scope lock.Scope) int {
	a := runtime.ArgsOf(L, "shield", typ[len("shield."):])
	name := a.Key(1)
	g, onLost := readLockOptions(a, 2)
	pair := L.NewTable()
	side := func(mode lock.Mode) lock.Spec {
		return lock.Spec{Name: name, Mode: mode, Scope: scope, ReadWrite: true, Given: g}
	}
	pair.RawSetString("read_lock", b.makeObj(a, 2, typ+":read_lock", side(lock.Shared), onLost))
	pair.RawSetString("write_lock", b.makeObj(a, 2, typ+":write_lock", side(lock.Exclusive), onLost))
	ud := L.NewUserData()
	ud.Value = pair
	ud.Metatable = b.mts[typ]
	L.Push(ud)
	return 1
}

// self checks that argument 1 is a lock object of kind, whose metatable is
// mt.
func (b *lockBinding) self(L *lua.LState, mt *lua.LTable, kind, fn string) (*lockObj, runtime.Args) {
	a := runtime.ArgsOf(L, kind, fn)
	// A userdata carrying kind's own metatable and a lock object is one:
	// a pointer compare instead of SelfAs's lookup of __name (about 4 % of
	// an uncontended mutex pair, by callgrind). Anything else (another
	// metatable, or this one on a foreign userdata) gets SelfAs's check.
	var lo *lockObj
	if ud, ok := L.Get(1).(*lua.LUserData); ok && ud.Metatable == mt {
		lo, _ = ud.Value.(*lockObj)
	}
	if lo == nil {
		lo = runtime.SelfAs[*lockObj](a, 1, kind)
	}
	// An in-process lock runs no store.Op: the module's end is checked here
	// (a distributed lock's Ops fail with it by themselves).
	if err := b.rt.ModuleClosed(); err != nil {
		runtime.Raise(L, "%s:%s: %s", kind, fn, err.Error())
	}
	return lo, a
}

// ownerOf is the owner of the task running L (typed; built from its cached
// owner string).
func (b *lockBinding) ownerOf(L *lua.LState) lock.Owner {
	t := b.rt.CurrentTask(L)
	if t != nil && t.ID == b.ownID {
		return b.own // a task's lock calls come in runs: parse once per run
	}
	o, _ := lock.ParseOwner(b.rt.OwnerID(L))
	if t != nil {
		b.ownID, b.own = t.ID, o
	}
	return o
}

// ---- the blocking protocol

// held takes a new hold into the runtime's care: it is released when its
// task ends (or, outside tasks, when the runtime closes). Loop only.
func (b *lockBinding) held(task *runtime.Task, h *lock.Hold) {
	if task == nil {
		b.main[h] = struct{}{}
		return
	}
	b.rt.MarkTask(task, b.ended)
}

// over takes an ended hold taken outside tasks out of the runtime's care.
// A task's lost hold keeps its record until the task ends (lost() keeps
// answering true).
func (b *lockBinding) over(task *runtime.Task, h *lock.Hold) {
	if task == nil && h.Released() {
		delete(b.main, h)
	}
}

// The results calls return most often, shared (their readers only push
// them).
var (
	resultTrue     = []lua.LValue{lua.LTrue}
	resultTimeout  = []lua.LValue{lua.LFalse, lua.LString("timeout")}
	resultNotHeld  = []lua.LValue{lua.LFalse, lua.LString("not_held")}
	resultLostPair = []lua.LValue{lua.LFalse, lua.LString("lost")}
)

func resultPair(ok bool, reason string) []lua.LValue {
	switch {
	case ok:
		return resultTrue
	case reason == "timeout":
		return resultTimeout
	case reason == "not_held":
		return resultNotHeld
	case reason == "lost":
		return resultLostPair
	}
	return []lua.LValue{lua.LFalse, lua.LString(reason)}
}

// waitOption is the object's wait option as a timeout (0: forever).
func waitOption(lo *lockObj) time.Duration {
	if w := lo.l.Settings().Wait; w > 0 {
		return w
	}
	return lock.WaitForever
}

// acquireTimeout reads acquire's optional timeout (ms); nil uses the
// object's wait option.
func acquireTimeout(a runtime.Args, lo *lockObj, n int) time.Duration {
	if a.L.Get(n) == lua.LNil {
		return waitOption(lo)
	}
	v := a.Num(n)
	if v < 0 || v != v || math.IsInf(v, 0) || v > maxMillis {
		a.Bad(n, "timeout must be >= 0 milliseconds, got "+runtime.NumberText(v))
	}
	if v == 0 {
		return lock.TryOnce
	}
	return time.Duration(math.Ceil(v)) * time.Millisecond
}

// inlineFirst is the Lua function that builds the methods tried inline
// first (inlineCall): the method calls fast, a plain Go function, and
// returns its results, unless fast returned pending (the call has to wait,
// nothing was done): then it calls slow, the method as a blocking call
// through the prelude's wrapper (which a call that yields needs). fast
// returns at most two values, the second never nil; a call through the
// wrapper costs about as much again as the lock pair's own work.
func (b *lockBinding) inlineFirst() *lua.LFunction {
	L := b.rt.L
	fn, err := L.Load(strings.NewReader(`local pending = ...
return function(fast, slow)
	return function(l, t, ...)
		local a, b = fast(l, t)
		if a ~= pending then
			if b == nil then return a end
			return a, b
		end
		return slow(l, t, ...)
	end
end`), shieldlua.ChunkPrefix+"lock_inline.lua")
	if err != nil {
		panic(err)
	}
	L.Push(fn)
	L.Push(b.pending)
	L.Call(1, 1)
	mk := L.Get(-1).(*lua.LFunction)
	L.Pop(1)
	return mk
}

// inlineCall is the method that tries fast first (see inlineFirst).
func (b *lockBinding) inlineCall(L *lua.LState, mk *lua.LFunction, fast *lua.LFunction, slow lua.LValue) lua.LValue {
	L.Push(mk)
	L.Push(fast)
	L.Push(slow)
	L.Call(2, 1)
	v := L.Get(-1)
	L.Pop(1)
	return v
}

// tryResult is try_acquire's result shape.
func tryResult(ok bool, _ string) []lua.LValue {
	if ok {
		return resultTrue
	}
	return resultFalse
}

var resultFalse = []lua.LValue{lua.LFalse}

// startInline is an in-process acquire (tryAcq: try_acquire) made without
// the blocking-call wrapper: when the lock cannot be had at once and the
// call would wait, it changes nothing and returns b.pending (the method
// then makes the call again as a blocking call).
func (b *lockBinding) startInline(L *lua.LState, lo *lockObj, a runtime.Args, timeout time.Duration, tryAcq bool) int {
	result := resultPair
	if tryAcq {
		result = tryResult
	}
	if n, done := b.tryNow(L, lo, a, timeout, result); done {
		return n
	}
	L.Push(b.pending)
	return 1
}

// tryNow is an acquire's attempt made right here: done is false when the
// lock is taken and the call has to wait (nothing changed).
func (b *lockBinding) tryNow(L *lua.LState, lo *lockObj, a runtime.Args, timeout time.Duration, result func(ok bool, reason string) []lua.LValue) (n int, done bool) {
	owner := b.ownerOf(L)
	// Fast path: a free in-process lock is taken right here, with nothing
	// registered but the hold itself (and the task's end-hook bit).
	h, ok, err := lo.l.TryNow(owner)
	if !ok && err == nil && (timeout != lock.TryOnce || lo.l.Scope() != lock.InProcess || lo.kind == kindSpinlock) {
		return 0, false
	}
	if ok {
		b.held(b.rt.CurrentTask(L), h)
	} else if err == nil {
		err = lock.ErrTimeout
	}
	vals, err := acquireOutcome(lo, result, err)
	if err != nil {
		runtime.Raise(L, "%s:%s: %s", lo.kind, a.Fn, err.Error())
	}
	return runtime.PushAll(L, vals), true
}

// start acquires lo for the running task; result turns the outcome into
// Lua values.
func (b *lockBinding) start(L *lua.LState, lo *lockObj, a runtime.Args, timeout time.Duration, result func(ok bool, reason string) []lua.LValue) int {
	if n, done := b.tryNow(L, lo, a, timeout, result); done {
		return n
	}
	owner := b.ownerOf(L)
	task := b.rt.CurrentTask(L)
	return b.rt.Block(L, lo.kind+":"+a.Fn, func(w *runtime.Wait) func() {
		return lo.l.Acquire(owner, timeout, func(h *lock.Hold, err error) {
			if err == nil {
				b.held(task, h)
			}
			w.Complete(func() ([]lua.LValue, error) { return acquireOutcome(lo, result, err) })
		})
	})
}

// acquireOutcome is what an acquire that ended with err returns.
func acquireOutcome(lo *lockObj, result func(ok bool, reason string) []lua.LValue, err error) ([]lua.LValue, error) {
	switch {
	case err == nil:
		return result(true, ""), nil
	case errors.Is(err, lock.ErrTimeout):
		return result(false, "timeout"), nil
	case errors.Is(err, lock.ErrLost):
		// A re-entry of this task's hold, which is lost.
		return result(false, "lost"), nil
	}
	return nil, lockError(lo, err)
}

// lockError words the errors a lock call raises.
func lockError(lo *lockObj, err error) error {
	switch {
	case errors.Is(err, lock.ErrReentry):
		return fmt.Errorf("%q is already held by this task and is not reentrant (it would wait for itself)", lo.l.Name())
	case errors.Is(err, lock.ErrUpgrade):
		return errors.New("cannot upgrade a read lock to a write lock: release the read lock first")
	case errors.Is(err, lock.ErrClosed):
		return runtime.ErrClosing
	}
	var st *lock.StalledError
	if errors.As(err, &st) {
		return fmt.Errorf("Redis did not answer for %v, within the acquire timeout of %v: %q not obtained (if the attempt still succeeds, the lock is released)",
			st.Waited, st.Timeout, st.Name)
	}
	return err
}

// l:acquire([timeout_ms]) -> true | false, "timeout" | "lost" (a re-entry
// of this task's hold, which is lost). Waits (the task yields) until
// granted; acquire(0) makes one attempt.
func (b *lockBinding) acquire(L *lua.LState, lo *lockObj, a runtime.Args) int {
	return b.start(L, lo, a, acquireTimeout(a, lo, 2), resultPair)
}

// l:try_acquire() -> true | false: one attempt, never waits.
func (b *lockBinding) tryAcquire(L *lua.LState, lo *lockObj, a runtime.Args) int {
	return b.start(L, lo, a, lock.TryOnce, tryResult)
}

// releaseInline is release for an in-process lock object, called without
// the blocking-call wrapper: such a release always completes right here.
func (b *lockBinding) releaseInline(L *lua.LState, lo *lockObj, a runtime.Args) int {
	if lo.l.Scope() != lock.InProcess {
		runtime.Raise(L, "%s:release: not an in-process lock", lo.kind) // a bug: it could not wait here
	}
	return b.release(L, lo, a)
}

// l:release() -> true | false, "not_held" | "lost". A re-entrant hold is
// released when its count reaches zero.
func (b *lockBinding) release(L *lua.LState, lo *lockObj, a runtime.Args) int {
	h := lo.l.Hold(b.ownerOf(L))
	if h == nil {
		return runtime.PushAll(L, resultPair(false, "not_held"))
	}
	task := b.rt.CurrentTask(L)
	if _, err, ok := h.ReleaseNow(); ok { // in-process: done right here
		b.over(task, h)
		h.Recycle() // nothing here keeps h: the next hold may reuse it
		vals, err := holdValues(err)
		if err != nil {
			runtime.Raise(L, "%s:release: %s", lo.kind, err.Error())
		}
		return runtime.PushAll(L, vals)
	}
	return b.rt.Block(L, lo.kind+":release", func(w *runtime.Wait) func() {
		h.Release(func(_ int, err error) {
			b.over(task, h)
			w.Complete(holdOutcome(err))
		})
		return nil
	})
}

// l:extend(ms) -> true | false, "not_held" | "lost": resets the lease to ms.
func (b *lockBinding) extend(L *lua.LState, lo *lockObj, a runtime.Args) int {
	if L.Get(2) == lua.LNil {
		a.TypeError(2, "number")
	}
	ttl := lockMillis(a, 2, "ttl")
	if max := time.Duration(b.locks.Config.MaxTTL) * time.Millisecond; ttl > max {
		a.Bad(2, fmt.Sprintf("ttl %d exceeds lock.max_ttl (%d)", ttl.Milliseconds(), max.Milliseconds()))
	}
	h := lo.l.Hold(b.ownerOf(L))
	if h == nil {
		return runtime.PushAll(L, resultPair(false, "not_held"))
	}
	return b.rt.Block(L, lo.kind+":extend", func(w *runtime.Wait) func() {
		h.Refresh(ttl, func(err error) {
			w.Complete(holdOutcome(err))
		})
		return nil
	})
}

// holdOutcome is release's and extend's answer for err: true, or false
// with "lost" or "not_held"; other errors raise.
func holdOutcome(err error) runtime.Result {
	return func() ([]lua.LValue, error) { return holdValues(err) }
}

func holdValues(err error) ([]lua.LValue, error) {
	switch {
	case err == nil:
		return resultPair(true, ""), nil
	case errors.Is(err, lock.ErrLost):
		return resultPair(false, "lost"), nil
	case errors.Is(err, lock.ErrNotHeld):
		return resultPair(false, "not_held"), nil
	}
	return nil, err
}

// l:auto_extend(enabled [, interval_ms]): the watchdog renews the lease
// every interval while this task holds the lock (and for later holds taken
// through this object).
func (b *lockBinding) autoExtend(L *lua.LState, lo *lockObj, a runtime.Args) int {
	if _, ok := L.Get(2).(lua.LBool); !ok {
		a.TypeError(2, "boolean")
	}
	on := L.ToBool(2)
	interval := lockMillis(a, 3, "interval")
	raise := func(err error) {
		if oe, ok := lock.IsOptionError(err); ok && oe.Option == "interval" {
			a.Bad(3, oe.Msg)
		}
		a.Fail("%s", err.Error())
	}
	h := lo.l.Hold(b.ownerOf(L))
	if h != nil {
		if err := h.AutoExtend(on, interval); err != nil {
			raise(err)
		}
		_ = lo.l.SetAutoExtend(on, interval) // later holds too, where the object's ttl allows
		return 0
	}
	if err := lo.l.SetAutoExtend(on, interval); err != nil {
		raise(err)
	}
	return 0
}

// info runs the lock's info operation and converts its result.
func (b *lockBinding) infoCall(L *lua.LState, lo *lockObj, a runtime.Args, convert func(*lua.LState, lock.Info) []lua.LValue) int {
	return runtime.Run(b.rt, L, lo.kind+":"+a.Fn, lo.l.InfoOp(), func(L *lua.LState, info lock.Info) []lua.LValue {
		if !info.Held || len(info.Owners) == 0 {
			return []lua.LValue{lua.LNil}
		}
		return convert(L, info)
	})
}

// ownerTable is the 锁信息 owner table of a holder, its owner string read
// from the right (node ids may contain ':'). service_name is the one stored
// with the hold (Redis), else this process's for its own holds.
func (b *lockBinding) ownerTable(L *lua.LState, h lock.Holder) *lua.LTable {
	t := L.NewTable()
	o, ok := lock.ParseOwner(h.Owner)
	t.RawSetString("node_id", lua.LString(o.NodeID))
	if ok {
		t.RawSetString("service_id", lua.LNumber(o.ServiceID))
	}
	me := b.rt.Owner()
	if h.ServiceName != "" {
		t.RawSetString("service_name", lua.LString(h.ServiceName))
	} else if ok && o.NodeID == me.NodeID && o.ServiceID == me.ServiceID {
		t.RawSetString("service_name", lua.LString(me.ServiceName))
	}
	t.RawSetString("thread_id", lua.LString(o.Thread))
	return t
}

// l:owner() -> {node_id, service_id, service_name, thread_id} of the holder, or nil.
func (b *lockBinding) owner(L *lua.LState, lo *lockObj, a runtime.Args) int {
	return b.infoCall(L, lo, a, func(L *lua.LState, info lock.Info) []lua.LValue {
		return []lua.LValue{b.ownerTable(L, info.Owners[0])}
	})
}

func ttlValue(d time.Duration) lua.LValue {
	if d < 0 {
		return lua.LNumber(-1)
	}
	return lua.LNumber(d.Milliseconds())
}

// l:ttl() -> remaining lease in ms (-1: no expiry), or nil when free.
func (b *lockBinding) ttl(L *lua.LState, lo *lockObj, a runtime.Args) int {
	return b.infoCall(L, lo, a, func(L *lua.LState, info lock.Info) []lua.LValue { return []lua.LValue{ttlValue(info.TTL)} })
}

// l:info() -> the 锁信息 table {key, owner, acquired_at, ttl, reentrant_count,
// token, owners}, or nil when the lock is free.
func (b *lockBinding) info(L *lua.LState, lo *lockObj, a runtime.Args) int {
	return b.infoCall(L, lo, a, func(L *lua.LState, info lock.Info) []lua.LValue {
		t := L.NewTable()
		t.RawSetString("key", lua.LString(lo.l.Name()))
		t.RawSetString("owner", b.ownerTable(L, info.Owners[0]))
		t.RawSetString("acquired_at", lua.LNumber(info.AcquiredAt.UnixMilli()))
		t.RawSetString("ttl", ttlValue(info.TTL))
		count := 0
		owners := make([]string, 0, len(info.Owners))
		for _, o := range info.Owners {
			count += o.Count
			owners = append(owners, o.Owner)
		}
		t.RawSetString("reentrant_count", lua.LNumber(count))
		if info.Token != 0 {
			t.RawSetString("token", lua.LNumber(info.Token))
		}
		sort.Strings(owners)
		list := L.NewTable()
		for _, o := range owners {
			list.Append(lua.LString(o))
		}
		t.RawSetString("owners", list)
		return []lua.LValue{t}
	})
}

// l:token() -> the fencing token of this task's hold (distributed locks), or nil.
func (b *lockBinding) token(L *lua.LState, lo *lockObj, _ runtime.Args) int {
	if h := lo.l.Hold(b.ownerOf(L)); h != nil && h.Token() != 0 {
		L.Push(lua.LNumber(h.Token()))
		return 1
	}
	L.Push(lua.LNil)
	return 1
}

// l:lost() -> true when this task's hold was found lost (also after its
// release reported "lost").
func (b *lockBinding) lost(L *lua.LState, lo *lockObj, _ runtime.Args) int {
	L.Push(lua.LBool(lo.l.Lost(b.ownerOf(L))))
	return 1
}

// l:on_lost(fn): fn(name, reason) runs as a task when a hold is lost.
func (b *lockBinding) setOnLost(L *lua.LState, lo *lockObj, a runtime.Args) int {
	b.setLost(lo, a.Function(2))
	return 0
}

func (b *lockBinding) setLost(lo *lockObj, fn *lua.LFunction) {
	if lo.onLost == nil {
		lo.l.OnLost(func(h *lock.Hold) { b.lost1(lo, h) })
	}
	lo.onLost = fn
}

func (b *lockBinding) lockName(L *lua.LState, lo *lockObj, _ runtime.Args) int {
	L.Push(lua.LString(lo.l.Name()))
	return 1
}

// lost1 runs the object's on_lost function as a task, on the next loop
// turn (a hold may be found lost inside another Go call).
func (b *lockBinding) lost1(lo *lockObj, h *lock.Hold) {
	fn := lo.onLost
	if fn == nil {
		return
	}
	name, reason := h.Name(), h.LostReason()
	b.rt.Post(func() {
		b.rt.Spawn("on_lost "+name, fn, []lua.LValue{lua.LString(name), lua.LString(reason)}, func(err error) {
			if err != nil {
				b.rt.CallbackFailed("on_lost", name, err)
			}
		})
	})
}

// ---- shield.lock()

// lock:acquire(name [, opts]) -> handle | nil, "timeout" | "lost": waits up to
// opts.wait (default lock.wait; 0 = no limit). lock:try_acquire(name [, opts]) -> handle | nil.
func (b *lockBinding) mgr(L *lua.LState, fn string) int {
	a := runtime.ArgsOf(L, lockManagerType, fn)
	runtime.SelfAs[*lockBinding](a, 1, lockManagerType)
	name := a.Key(2)
	g, onLost := readLockOptions(a, 3)
	ud := b.makeObj(a, 3, kindHandle, lock.Spec{Name: name, Mode: lock.Exclusive, Scope: lock.Distributed, Given: g}, onLost)
	lo := ud.Value.(*lockObj)
	timeout := lock.TryOnce
	if fn == "acquire" {
		timeout = waitOption(lo)
	}
	tryOnly := fn == "try_acquire"
	return b.start(L, lo, a, timeout, func(ok bool, reason string) []lua.LValue {
		switch {
		case ok:
			return []lua.LValue{ud}
		case tryOnly:
			return []lua.LValue{lua.LNil}
		}
		return []lua.LValue{lua.LNil, lua.LString(reason)}
	})
}

// ---- shutdown

// close runs when the runtime closes: pending acquires end (their tasks
// raise "the runtime is closing"), and the holds taken outside any task are
// released at once. Holds of tasks are released when the tasks end: within
// the grace period, or when Close interrupts them. Nothing here waits on
// the network: releases go out as operations.
func (b *lockBinding) close() {
	b.sess.CancelWaits(lock.ErrClosed)
	for h := range b.main {
		delete(b.main, h)
		h.ReleaseAll()
	}
}

// activeLocks counts the holds and waits of this runtime (tests). Loop only.
func (b *lockBinding) active() int {
	holds, waits := b.sess.Active()
	return holds + waits
}
