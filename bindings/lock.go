package bindings

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/lock"
)

const (
	lockObjType = "shield.lock_object" // every acquirable lock: mutex, spinlock, read/write locks, handles
	rwlockType  = "shield.rwlock"      // the pair behind shield.rwlock / distributed_rwlock
	lockMgrType = "shield.lock"        // shield.lock()
)

// lockBinding registers the lock capability in one runtime and remembers
// which of its lock objects hold or wait, to release them when it closes.
type lockBinding struct {
	rt     *Runtime
	locks  *Locks
	local  localImpl
	dist   distImpl
	mu     sync.Mutex
	active map[*lockObj]struct{}
}

// lockObj is one lock as scripts see it. It may be held by several tasks
// over time (the owner is the calling task), so holds are kept per owner.
type lockObj struct {
	b      *lockBinding
	kind   string // "shield.mutex", ... for errors and tostring
	name   string
	mode   lock.Mode
	impl   lockImpl
	opts   lockOpts
	onLost *lua.LFunction

	mu    sync.Mutex // holds are written by grant callbacks and the watchdog too
	holds map[string]*hold
	waits map[string]func() // pending acquires' cancel funcs, by owner
}

// hold is one owner's hold of a lock, with its watchdog.
type hold struct {
	count      int
	token      int64
	acquiredAt time.Time
	ttl        time.Duration
	lost       bool
	stopped    bool // watchdog stopped (released or lost): never renews again
	timer      *time.Timer
	lastRenew  time.Time
}

func (rt *Runtime) installLocks(lib *lua.LTable, l *Locks) {
	L := rt.L
	b := &lockBinding{rt: rt, locks: l, local: localImpl{m: l.Local}, active: map[*lockObj]struct{}{}}
	dist := l.Dist
	if l.Redlock != nil {
		dist = l.Redlock
	}
	b.dist = distImpl{b: dist, gate: b.local, isInline: l.DistInline && l.Redlock == nil, run: rt.goWork}
	rt.OnClose(b.closeAll)
	rt.locks = b

	obj := L.NewTypeMetatable(lockObjType)
	obj.RawSetString("__name", lua.LString(lockObjType))
	methods := L.NewTable()
	for _, m := range []struct {
		name string
		fn   lua.LGFunction
	}{
		{"acquire", b.acquire}, {"try_acquire", b.tryAcquire}, {"release", b.release},
		{"extend", b.extend}, {"auto_extend", b.autoExtend},
		{"owner", b.owner}, {"ttl", b.ttl}, {"info", b.info},
		{"token", b.token}, {"lost", b.lost}, {"on_lost", b.setOnLost}, {"name", b.lockName},
	} {
		methods.RawSetString(m.name, rt.blocking(m.fn))
	}
	methods.RawSetString("with", rt.with)
	obj.RawSetString("__index", methods)
	obj.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		lo := L.CheckUserData(1).Value.(*lockObj)
		L.Push(lua.LString(fmt.Sprintf("%s(%q)", lo.kind, lo.name)))
		return 1
	}))

	rw := L.NewTypeMetatable(rwlockType)
	rw.RawSetString("__name", lua.LString(rwlockType))
	rwMethods := L.NewTable()
	rwMethods.RawSetString("read_lock", L.NewFunction(func(L *lua.LState) int { return b.rwSide(L, "read_lock") }))
	rwMethods.RawSetString("write_lock", L.NewFunction(func(L *lua.LState) int { return b.rwSide(L, "write_lock") }))
	rw.RawSetString("__index", rwMethods)

	mgr := L.NewTypeMetatable(lockMgrType)
	mgr.RawSetString("__name", lua.LString(lockMgrType))
	mgrMethods := L.NewTable()
	mgrMethods.RawSetString("acquire", rt.blocking(b.mgrAcquire))
	mgrMethods.RawSetString("try_acquire", rt.blocking(b.mgrTryAcquire))
	mgr.RawSetString("__index", mgrMethods)
	mgrUD := L.NewUserData()
	mgrUD.Metatable = mgr

	// Read-write locks never use Redlock (it has no shared mode).
	distRW := distImpl{b: l.Dist, gate: b.local, isInline: l.DistInline, run: rt.goWork}
	lib.RawSetString("mutex", L.NewFunction(func(L *lua.LState) int { return b.newLock(L, "shield.mutex", b.local, false, false) }))
	lib.RawSetString("spinlock", L.NewFunction(func(L *lua.LState) int { return b.newLock(L, "shield.spinlock", b.local, false, true) }))
	lib.RawSetString("rwlock", L.NewFunction(func(L *lua.LState) int { return b.newRW(L, "shield.rwlock", b.local, false) }))
	lib.RawSetString("distributed_mutex", L.NewFunction(func(L *lua.LState) int {
		return b.newLock(L, "shield.distributed_mutex", b.dist, true, false)
	}))
	lib.RawSetString("distributed_rwlock", L.NewFunction(func(L *lua.LState) int { return b.newRW(L, "shield.distributed_rwlock", distRW, true) }))
	lib.RawSetString("lock", L.NewFunction(func(L *lua.LState) int { L.Push(mgrUD); return 1 }))
}

// ---- construction and options

var lockOptionNames = []string{"ttl", "retry", "max_retries", "reentrant", "wait", "fair", "auto_extend", "extend_interval", "on_lost"}

// parseOpts reads an options table at n (optional). Distributed locks take
// the lock config's defaults; in-process locks have no ttl and no watchdog
// unless asked.
func (b *lockBinding) parseOpts(a args, n int, distributed bool) (lockOpts, *lua.LFunction) {
	c := b.locks.Config
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	o := lockOpts{retry: ms(c.Retry), maxRetries: c.MaxRetries, reentrant: c.Reentrant, interval: ms(c.AutoExtend.Interval)}
	if distributed {
		o.ttl, o.fair, o.autoExtend = ms(c.DefaultTTL), c.Fair.Enabled, c.AutoExtend.Enabled
	}
	var onLost *lua.LFunction
	if a.L.Get(n) == lua.LNil {
		return o, nil
	}
	t := a.table(n)
	bad := func(msg string, v ...any) { a.bad(n, fmt.Sprintf(msg, v...)) }
	num := func(key string, v lua.LValue, min float64) float64 {
		f, ok := v.(lua.LNumber)
		if !ok {
			bad("option %s: number expected, got %s", key, v.Type())
		}
		if float64(f) < min || f != f || float64(f) > 1e15 {
			bad("option %s must be >= %v, got %v", key, min, f)
		}
		return float64(f)
	}
	boolean := func(key string, v lua.LValue) bool {
		bv, ok := v.(lua.LBool)
		if !ok {
			bad("option %s: boolean expected, got %s", key, v.Type())
		}
		return bool(bv)
	}
	ttlSet := false
	t.ForEach(func(k, v lua.LValue) {
		key, _ := k.(lua.LString)
		switch string(key) {
		case "ttl":
			o.ttl, ttlSet = time.Duration(num("ttl", v, 1))*time.Millisecond, true
		case "retry":
			o.retry = time.Duration(num("retry", v, 1)) * time.Millisecond
		case "max_retries":
			o.maxRetries = int(num("max_retries", v, 0))
		case "reentrant":
			o.reentrant = boolean("reentrant", v)
		case "wait":
			o.wait = time.Duration(num("wait", v, 0)) * time.Millisecond
		case "fair":
			o.fair = boolean("fair", v)
		case "auto_extend":
			o.autoExtend = boolean("auto_extend", v)
		case "extend_interval":
			o.interval = time.Duration(num("extend_interval", v, 1)) * time.Millisecond
		case "on_lost":
			f, ok := v.(*lua.LFunction)
			if !ok {
				bad("option on_lost: function expected, got %s", v.Type())
			}
			onLost = f
		default:
			bad("unknown option %q (known: %s)", k.String(), strings.Join(lockOptionNames, ", "))
		}
	})
	if max := ms(c.MaxTTL); o.ttl > max {
		bad("ttl %d exceeds lock.max_ttl (%d)", o.ttl.Milliseconds(), max.Milliseconds())
	}
	if o.autoExtend && o.ttl == 0 {
		bad("auto_extend needs a ttl")
	}
	if o.autoExtend && o.interval >= o.ttl {
		if ttlSet && distributed && o.ttl > 3*time.Millisecond {
			o.interval = o.ttl / 3 // a short custom ttl: renew three times per lease
		} else {
			bad("extend_interval (%d) must be shorter than ttl (%d)", o.interval.Milliseconds(), o.ttl.Milliseconds())
		}
	}
	return o, onLost
}

func (b *lockBinding) makeObj(L *lua.LState, kind, name string, mode lock.Mode, impl lockImpl, o lockOpts, onLost *lua.LFunction) *lua.LUserData {
	lo := &lockObj{b: b, kind: kind, name: name, mode: mode, impl: impl, opts: o, onLost: onLost,
		holds: map[string]*hold{}, waits: map[string]func(){}}
	ud := L.NewUserData()
	ud.Value = lo
	ud.Metatable = L.GetTypeMetatable(lockObjType)
	return ud
}

// shield.mutex(name [, opts]), shield.spinlock, shield.distributed_mutex.
func (b *lockBinding) newLock(L *lua.LState, kind string, impl lockImpl, distributed, spin bool) int {
	a := argsOf(L, "shield", kind[len("shield."):])
	name := a.key(1)
	o, onLost := b.parseOpts(a, 2, distributed)
	o.spin = spin
	L.Push(b.makeObj(L, kind, name, lock.Exclusive, impl, o, onLost))
	return 1
}

// shield.rwlock(name [, opts]) / shield.distributed_rwlock: an object whose
// read_lock() and write_lock() are the two sides of one lock.
func (b *lockBinding) newRW(L *lua.LState, kind string, impl lockImpl, distributed bool) int {
	a := argsOf(L, "shield", kind[len("shield."):])
	name := a.key(1)
	o, onLost := b.parseOpts(a, 2, distributed)
	pair := L.NewTable()
	pair.RawSetString("read_lock", b.makeObj(L, kind+":read_lock", name, lock.Shared, impl, o, onLost))
	pair.RawSetString("write_lock", b.makeObj(L, kind+":write_lock", name, lock.Exclusive, impl, o, onLost))
	ud := L.NewUserData()
	ud.Value = pair
	ud.Metatable = L.GetTypeMetatable(rwlockType)
	L.Push(ud)
	return 1
}

func (b *lockBinding) rwSide(L *lua.LState, side string) int {
	pair := argsOf(L, rwlockType, side).self(1, rwlockType).(*lua.LTable)
	L.Push(pair.RawGetString(side))
	return 1
}

func (b *lockBinding) self(L *lua.LState, fn string) (*lockObj, args) {
	a := argsOf(L, lockObjType, fn)
	lo := a.self(1, lockObjType).(*lockObj)
	a.lib = lo.kind
	return lo, a
}

// ---- holds

func (lo *lockObj) hold(owner string) *hold {
	lo.mu.Lock()
	defer lo.mu.Unlock()
	return lo.holds[owner]
}

// granted records an acquire. Any goroutine (grant callbacks).
func (lo *lockObj) granted(owner string, g grant) {
	lo.mu.Lock()
	h := lo.holds[owner]
	if h == nil {
		h = &hold{token: g.token, acquiredAt: g.acquiredAt, ttl: g.ttl, lastRenew: time.Now()}
		lo.holds[owner] = h
	}
	h.count = max(g.count, 1)
	if g.token != 0 {
		h.token = g.token
	}
	lo.mu.Unlock()
	lo.b.mu.Lock()
	lo.b.active[lo] = struct{}{}
	lo.b.mu.Unlock()
}

// drop forgets owner's hold and stops its watchdog.
func (lo *lockObj) drop(owner string) {
	lo.mu.Lock()
	if h := lo.holds[owner]; h != nil {
		h.stopped = true
		if h.timer != nil {
			h.timer.Stop()
		}
		delete(lo.holds, owner)
	}
	lo.mu.Unlock()
	lo.settle()
}

// settle takes the object off the runtime's active set once nothing is held
// or awaited, so objects made per request do not accumulate.
func (lo *lockObj) settle() {
	lo.mu.Lock()
	idle := len(lo.holds) == 0 && len(lo.waits) == 0
	lo.mu.Unlock()
	if idle {
		lo.b.mu.Lock()
		delete(lo.b.active, lo)
		lo.b.mu.Unlock()
	}
}

// ---- the watchdog

// watch starts renewing owner's hold every interval while it is held by
// this owner. Renewal stops at release and never resumes after it.
func (lo *lockObj) watch(owner string) {
	lo.mu.Lock()
	defer lo.mu.Unlock()
	h := lo.holds[owner]
	if h == nil || !lo.opts.autoExtend || h.ttl <= 0 || h.timer != nil || h.stopped {
		return
	}
	h.lastRenew = time.Now()
	h.timer = time.AfterFunc(lo.opts.interval, func() { lo.renew(owner, h) })
}

func (lo *lockObj) unwatch(owner string) {
	lo.mu.Lock()
	defer lo.mu.Unlock()
	if h := lo.holds[owner]; h != nil && h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
}

// renew runs on the timer's goroutine. A renewal that finds the lock gone,
// or that keeps failing until the lease must have run out, marks it lost.
func (lo *lockObj) renew(owner string, h *hold) {
	lo.mu.Lock()
	if h.stopped {
		lo.mu.Unlock()
		return
	}
	ttl, interval := h.ttl, lo.opts.interval
	lo.mu.Unlock()
	ctx, cancel := context.WithTimeout(lo.b.rt.ctx, interval)
	err := lo.impl.extend(ctx, lo.name, owner, lo.mode, ttl)
	cancel()
	lo.mu.Lock()
	defer lo.mu.Unlock()
	if h.stopped {
		return
	}
	now := time.Now()
	switch {
	case err == nil:
		h.lastRenew = now
		h.timer.Reset(interval)
	case errors.Is(err, errNotHeld) || now.Sub(h.lastRenew) >= ttl:
		h.lost, h.stopped = true, true
		reason := "the lock was taken over or expired"
		if !errors.Is(err, errNotHeld) {
			reason = "renewals failed until the lease ran out: " + err.Error()
		}
		lo.b.rt.Post(func() { lo.fireLost(owner, reason) })
	default: // Redis trouble: try again soon, the lease may still be ours
		h.timer.Reset(min(interval, time.Second))
	}
}

func (lo *lockObj) fireLost(owner, reason string) {
	lo.b.rt.log.Warn("shield: lock lost", "lock", lo.name, "kind", lo.kind, "owner", owner, "reason", reason)
	if lo.onLost != nil {
		lo.b.rt.Spawn("on_lost "+lo.name, lo.onLost, []lua.LValue{lua.LString(lo.name), lua.LString(reason)}, func(err error) {
			if err != nil {
				lo.b.rt.callbackFailed("on_lost", lo.name, err)
			}
		})
	}
}

// ---- methods

func resultPair(ok bool, reason string) []lua.LValue {
	if ok {
		return []lua.LValue{lua.LTrue}
	}
	return []lua.LValue{lua.LFalse, lua.LString(reason)}
}

// acquireTimeout reads acquire's optional timeout (ms); nil uses opts.wait.
func acquireTimeout(a args, lo *lockObj, n int) time.Duration {
	if a.L.Get(n) == lua.LNil {
		return lo.opts.wait
	}
	v := a.num(n)
	if v < 0 || v != v {
		a.bad(n, "timeout must be >= 0 milliseconds")
	}
	return time.Duration(v) * time.Millisecond
}

// start acquires for owner: inline at once when possible, else the task
// waits; result turns the outcome into Lua values on the loop.
func (lo *lockObj) start(L *lua.LState, a args, owner string, timeout time.Duration, tryOnly bool, result func(ok bool, reason string) []lua.LValue) int {
	rt := lo.b.rt
	if h := lo.hold(owner); h != nil && !lo.opts.reentrant {
		a.fail("%q is already held by this task and is not reentrant", lo.name)
	}
	if lo.impl.inline() {
		g, ok, err := lo.impl.try(rt.ctx, lo.name, owner, lo.mode, lo.opts)
		if err != nil {
			a.fail("%s", err.Error())
		}
		if ok || tryOnly {
			if ok {
				lo.granted(owner, g)
				lo.watch(owner)
			}
			return pushAll(L, result(ok, "timeout"))
		}
	}
	name := lo.kind + ":" + a.fn
	if tryOnly {
		return rt.Await(L, name, func(ctx context.Context) (any, error) {
			g, ok, err := lo.impl.try(ctx, lo.name, owner, lo.mode, lo.opts)
			if ok {
				lo.granted(owner, g)
			}
			return ok, err
		}, func(_ *lua.LState, v any) []lua.LValue {
			if v.(bool) {
				lo.watch(owner)
			}
			return result(v.(bool), "timeout")
		})
	}
	return rt.Suspend(L, name, func(complete func(Result)) {
		cancel := lo.impl.wait(rt.ctx, lo.name, owner, lo.mode, lo.opts, timeout, func(g grant, err error) {
			if err == nil {
				lo.granted(owner, g)
			}
			complete(func() ([]lua.LValue, error) {
				lo.mu.Lock()
				delete(lo.waits, owner)
				lo.mu.Unlock()
				defer lo.settle()
				switch {
				case err == nil:
					lo.watch(owner)
					return result(true, ""), nil
				case errors.Is(err, errTimeout):
					return result(false, "timeout"), nil
				}
				return nil, err
			})
		})
		lo.mu.Lock()
		lo.waits[owner] = cancel
		lo.mu.Unlock()
		lo.b.mu.Lock()
		lo.b.active[lo] = struct{}{}
		lo.b.mu.Unlock()
	})
}

// l:acquire([timeout_ms]) -> true | false, "timeout". Waits (the task
// yields) until granted; FIFO among waiters.
func (b *lockBinding) acquire(L *lua.LState) int {
	lo, a := b.self(L, "acquire")
	timeout := acquireTimeout(a, lo, 2)
	tryOnly := timeout == 0 && L.Get(2) != lua.LNil // acquire(0): one attempt
	return lo.start(L, a, b.rt.OwnerID(L), timeout, tryOnly, resultPair)
}

// l:try_acquire() -> true | false: never waits.
func (b *lockBinding) tryAcquire(L *lua.LState) int {
	lo, a := b.self(L, "try_acquire")
	return lo.start(L, a, b.rt.OwnerID(L), 0, true, func(ok bool, _ string) []lua.LValue { return []lua.LValue{lua.LBool(ok)} })
}

// l:release() -> true | false, "not_held" | "lost". A re-entrant hold is
// released when its count reaches zero.
func (b *lockBinding) release(L *lua.LState) int {
	lo, a := b.self(L, "release")
	owner := b.rt.OwnerID(L)
	h := lo.hold(owner)
	if h == nil {
		return pushAll(L, resultPair(false, "not_held"))
	}
	// A lost hold is still released through the backend: that frees the
	// process-local gate (and the lock, if the lease was only presumed lost).
	lo.mu.Lock()
	lost := h.lost
	lo.mu.Unlock()
	type rel struct {
		remaining int
		notHeld   bool
	}
	return lo.call(L, a, func(ctx context.Context) (any, error) {
		n, err := lo.impl.release(ctx, lo.name, owner, lo.mode)
		if err != nil && !errors.Is(err, errNotHeld) {
			return nil, err
		}
		return rel{n, err != nil}, nil
	}, func(_ *lua.LState, v any) []lua.LValue {
		r := v.(rel)
		switch {
		case lost || r.notHeld:
			lo.drop(owner)
			return resultPair(false, "lost")
		case r.remaining <= 0:
			lo.drop(owner)
		default:
			lo.mu.Lock()
			h.count = r.remaining
			lo.mu.Unlock()
		}
		return resultPair(true, "")
	})
}

// call runs work inline or off the loop depending on the lock's backend.
func (lo *lockObj) call(L *lua.LState, a args, work func(ctx context.Context) (any, error), convert func(*lua.LState, any) []lua.LValue) int {
	return lo.b.rt.AwaitInline(L, lo.kind+":"+a.fn, lo.impl.inline(), work, convert)
}

// l:extend(ms) -> true | false, "not_held": resets the lease to ms.
func (b *lockBinding) extend(L *lua.LState) int {
	lo, a := b.self(L, "extend")
	ttl := time.Duration(a.optMillis(2, "ttl")) * time.Millisecond
	if ttl == 0 {
		a.typeError(2, "number")
	}
	if max := time.Duration(b.locks.Config.MaxTTL) * time.Millisecond; ttl > max {
		a.bad(2, fmt.Sprintf("ttl %d exceeds lock.max_ttl (%d)", ttl.Milliseconds(), max.Milliseconds()))
	}
	owner := b.rt.OwnerID(L)
	if lo.hold(owner) == nil {
		return pushAll(L, resultPair(false, "not_held"))
	}
	return lo.call(L, a, func(ctx context.Context) (any, error) {
		err := lo.impl.extend(ctx, lo.name, owner, lo.mode, ttl)
		if errors.Is(err, errNotHeld) {
			return false, nil
		}
		return err == nil, err
	}, func(_ *lua.LState, v any) []lua.LValue {
		if !v.(bool) {
			return resultPair(false, "not_held")
		}
		lo.mu.Lock()
		if h := lo.holds[owner]; h != nil {
			h.ttl, h.lastRenew = ttl, time.Now()
		}
		lo.mu.Unlock()
		return resultPair(true, "")
	})
}

// l:auto_extend(enabled [, interval_ms]): the watchdog renews the lease
// every interval while this task holds the lock.
func (b *lockBinding) autoExtend(L *lua.LState) int {
	lo, a := b.self(L, "auto_extend")
	if _, ok := L.Get(2).(lua.LBool); !ok {
		a.typeError(2, "boolean")
	}
	on := L.ToBool(2)
	owner := b.rt.OwnerID(L)
	if iv := a.optMillis(3, "interval"); iv > 0 {
		lo.opts.interval = time.Duration(iv) * time.Millisecond
	}
	if on {
		h := lo.hold(owner)
		ttl := lo.opts.ttl
		if h != nil {
			ttl = h.ttl
		}
		if ttl <= 0 {
			a.fail("auto_extend needs a lock with a ttl")
		}
		if lo.opts.interval >= ttl {
			a.bad(3, fmt.Sprintf("interval (%d) must be shorter than the ttl (%d)", lo.opts.interval.Milliseconds(), ttl.Milliseconds()))
		}
	}
	lo.opts.autoExtend = on
	if on {
		lo.watch(owner)
	} else {
		lo.unwatch(owner)
	}
	return 0
}

func (lo *lockObj) holders(L *lua.LState, a args, convert func(*lua.LState, holderInfo, bool) []lua.LValue) int {
	type res struct {
		hi holderInfo
		ok bool
	}
	return lo.call(L, a, func(ctx context.Context) (any, error) {
		hi, ok, err := lo.impl.info(ctx, lo.name, lo.mode)
		return res{hi, ok}, err
	}, func(L *lua.LState, v any) []lua.LValue {
		r := v.(res)
		return convert(L, r.hi, r.ok)
	})
}

// ownerTable splits "node_id:service_id:thread_id" into the 锁信息 owner table.
func (b *lockBinding) ownerTable(L *lua.LState, owner string) *lua.LTable {
	t := L.NewTable()
	parts := strings.SplitN(owner, ":", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	t.RawSetString("node_id", lua.LString(parts[0]))
	if id, err := strconv.ParseInt(parts[1], 10, 64); err == nil {
		t.RawSetString("service_id", lua.LNumber(id))
	} else {
		t.RawSetString("service_id", lua.LString(parts[1]))
	}
	o := b.rt.svc.Owner
	if parts[0] == o.NodeID && parts[1] == strconv.FormatInt(o.ServiceID, 10) {
		t.RawSetString("service_name", lua.LString(o.ServiceName))
	}
	t.RawSetString("thread_id", lua.LString(parts[2]))
	return t
}

// l:owner() -> {node_id, service_id, service_name, thread_id} of the holder, or nil.
func (b *lockBinding) owner(L *lua.LState) int {
	lo, a := b.self(L, "owner")
	return lo.holders(L, a, func(L *lua.LState, hi holderInfo, ok bool) []lua.LValue {
		if !ok {
			return []lua.LValue{lua.LNil}
		}
		return []lua.LValue{b.ownerTable(L, hi.owners[0])}
	})
}

// l:ttl() -> remaining lease in ms (-1: no expiry), or nil when free.
func (b *lockBinding) ttl(L *lua.LState) int {
	lo, a := b.self(L, "ttl")
	return lo.holders(L, a, func(L *lua.LState, hi holderInfo, ok bool) []lua.LValue {
		if !ok {
			return []lua.LValue{lua.LNil}
		}
		if hi.ttl < 0 {
			return []lua.LValue{lua.LNumber(-1)}
		}
		return []lua.LValue{lua.LNumber(hi.ttl.Milliseconds())}
	})
}

// l:info() -> the 锁信息 table {key, owner, acquired_at, ttl, reentrant_count,
// token, owners}, or nil when the lock is free.
func (b *lockBinding) info(L *lua.LState) int {
	lo, a := b.self(L, "info")
	return lo.holders(L, a, func(L *lua.LState, hi holderInfo, ok bool) []lua.LValue {
		if !ok {
			return []lua.LValue{lua.LNil}
		}
		t := L.NewTable()
		t.RawSetString("key", lua.LString(lo.name))
		t.RawSetString("owner", b.ownerTable(L, hi.owners[0]))
		t.RawSetString("acquired_at", lua.LNumber(hi.acquiredAt.UnixMilli()))
		ttl := lua.LNumber(-1)
		if hi.ttl >= 0 {
			ttl = lua.LNumber(hi.ttl.Milliseconds())
		}
		t.RawSetString("ttl", ttl)
		t.RawSetString("reentrant_count", lua.LNumber(hi.count))
		if hi.token != 0 {
			t.RawSetString("token", lua.LNumber(hi.token))
		}
		owners := L.NewTable()
		sorted := append([]string(nil), hi.owners...)
		sort.Strings(sorted)
		for _, o := range sorted {
			owners.Append(lua.LString(o))
		}
		t.RawSetString("owners", owners)
		return []lua.LValue{t}
	})
}

// l:token() -> the fencing token of this task's hold (distributed locks), or nil.
func (b *lockBinding) token(L *lua.LState) int {
	lo, _ := b.self(L, "token")
	if h := lo.hold(b.rt.OwnerID(L)); h != nil && h.token != 0 {
		L.Push(lua.LNumber(h.token))
		return 1
	}
	L.Push(lua.LNil)
	return 1
}

// l:lost() -> true when the watchdog found this task's hold gone.
func (b *lockBinding) lost(L *lua.LState) int {
	lo, _ := b.self(L, "lost")
	h := lo.hold(b.rt.OwnerID(L))
	lost := false
	if h != nil {
		lo.mu.Lock()
		lost = h.lost
		lo.mu.Unlock()
	}
	L.Push(lua.LBool(lost))
	return 1
}

// l:on_lost(fn): fn(name, reason) runs as a task when a hold is lost.
func (b *lockBinding) setOnLost(L *lua.LState) int {
	lo, a := b.self(L, "on_lost")
	lo.onLost = a.function(2)
	return 0
}

func (b *lockBinding) lockName(L *lua.LState) int {
	lo, _ := b.self(L, "name")
	L.Push(lua.LString(lo.name))
	return 1
}

// ---- shield.lock()

// lock:acquire(name [, opts]) -> handle | nil, "timeout": waits up to opts.wait (0 = forever).
func (b *lockBinding) mgrAcquire(L *lua.LState) int { return b.mgr(L, "acquire", false) }

// lock:try_acquire(name [, opts]) -> handle | nil.
func (b *lockBinding) mgrTryAcquire(L *lua.LState) int { return b.mgr(L, "try_acquire", true) }

func (b *lockBinding) mgr(L *lua.LState, fn string, tryOnly bool) int {
	a := argsOf(L, lockMgrType, fn)
	a.self(1, lockMgrType)
	name := a.key(2)
	o, onLost := b.parseOpts(a, 3, true)
	ud := b.makeObj(L, "shield.lock", name, lock.Exclusive, b.dist, o, onLost)
	lo := ud.Value.(*lockObj)
	return lo.start(L, a, b.rt.OwnerID(L), o.wait, tryOnly, func(ok bool, reason string) []lua.LValue {
		if ok {
			return []lua.LValue{ud}
		}
		if tryOnly {
			return []lua.LValue{lua.LNil}
		}
		return []lua.LValue{lua.LNil, lua.LString(reason)}
	})
}

// ---- shutdown

// closeAll gives up pending waits and releases every hold of this runtime's
// locks at once (not after their ttl). Runs on the loop at Close.
func (b *lockBinding) closeAll() {
	b.mu.Lock()
	objs := make([]*lockObj, 0, len(b.active))
	for lo := range b.active {
		objs = append(objs, lo)
	}
	b.active = map[*lockObj]struct{}{}
	b.mu.Unlock()
	var wg sync.WaitGroup
	for _, lo := range objs {
		lo.mu.Lock()
		cancels := lo.waits
		lo.waits = map[string]func(){}
		lo.mu.Unlock()
		for _, cancel := range cancels {
			cancel()
		}
		lo.mu.Lock()
		holds := lo.holds
		lo.holds = map[string]*hold{}
		for _, h := range holds {
			h.stopped = true
			if h.timer != nil {
				h.timer.Stop()
			}
		}
		lo.mu.Unlock()
		for owner, h := range holds {
			wg.Add(1)
			go func(lo *lockObj, owner string, count int) {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				for i := 0; i < count; i++ {
					if n, err := lo.impl.release(ctx, lo.name, owner, lo.mode); err != nil || n <= 0 {
						return
					}
				}
			}(lo, owner, h.count)
		}
	}
	wg.Wait()
}
