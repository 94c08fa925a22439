package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"time"

	lua "github.com/yuin/gopher-lua"

	iclock "github.com/shieldrt/shieldglobal/internal/clock"
)

// installBasics registers the runtime basics every script relies on:
// shield.sleep, shield.spawn, shield.now_ms, shield.owner and shield.log.
func (rt *Runtime) installBasics(lib *lua.LTable) {
	L := rt.L
	lib.RawSetString("sleep", rt.Blocking(rt.sleep))
	lib.RawSetString("spawn", L.NewFunction(rt.spawn))
	lib.RawSetString("now_ms", L.NewFunction(rt.nowMs))
	lib.RawSetString("owner", L.NewFunction(rt.owner))
	log := L.NewTable()
	for _, lv := range []struct {
		name  string
		level slog.Level
	}{{"debug", slog.LevelDebug}, {"info", slog.LevelInfo}, {"warn", slog.LevelWarn}, {"error", slog.LevelError}} {
		level := lv.level
		name := lv.name
		log.RawSetString(name, L.NewFunction(func(L *lua.LState) int { return rt.logAt(L, name, level) }))
	}
	lib.RawSetString("log", log)
}

// Blocking wraps a Go function that may call Block in the Lua wrapper that
// unpacks its results and raises its asynchronous errors.
func (rt *Runtime) Blocking(fn lua.LGFunction) lua.LValue {
	L := rt.L
	L.Push(rt.wrap)
	L.Push(L.NewFunction(fn))
	L.Call(1, 1)
	v := L.Get(-1)
	L.Pop(1)
	return v
}

func (rt *Runtime) now() time.Time {
	if rt.svc.Now != nil {
		return rt.svc.Now()
	}
	return rt.Clock().Now()
}

// Clock is the runtime's timer source (Services.Clock, else the system's).
func (rt *Runtime) Clock() iclock.Clock { return iclock.OrReal(rt.svc.Clock) }

// shield.now_ms() -> Unix time in milliseconds.
func (rt *Runtime) nowMs(L *lua.LState) int {
	L.Push(lua.LNumber(rt.now().UnixMilli()))
	return 1
}

// shield.owner() -> "node_id:service_id:coroutine-N" of the running task.
func (rt *Runtime) owner(L *lua.LState) int {
	L.Push(lua.LString(rt.OwnerID(L)))
	return 1
}

// MaxSleep is the longest finite shield.sleep: about 31 years. Longer
// values are almost always a unit mistake (or an overflowing computation).
const MaxSleep = 1e12

// shield.sleep(ms): suspends the calling task; 0 yields to other tasks;
// math.huge sleeps until the runtime closes (the sleep then raises, so the
// task ends instead of holding up the shutdown).
func (rt *Runtime) sleep(L *lua.LState) int {
	a := ArgsOf(L, "shield", "sleep")
	ms := a.Num(1)
	switch {
	case ms != ms || ms < 0:
		a.Bad(1, "milliseconds must be >= 0")
	case ms >= math.MaxFloat64: // math.huge (gopher-lua's is MaxFloat64) or +inf
		return rt.Block(L, "shield.sleep", func(w *Wait) func() { w.EndOnClose(); return nil })
	case ms > MaxSleep:
		a.Bad(1, fmt.Sprintf("milliseconds must be at most %.0f (about 31 years), got %s; use math.huge to sleep until the runtime closes",
			float64(MaxSleep), lua.LNumber(ms).String()))
	}
	d := time.Duration(ms * float64(time.Millisecond))
	return rt.Block(L, "shield.sleep", func(w *Wait) func() {
		// The timer completes the sleep on the loop, so the completion
		// cannot come before the task has yielded: a sleep always lets the
		// tasks spawned before it start.
		w.After(d, func() { w.Complete(noResults) })
		return nil
	})
}

func noResults() ([]lua.LValue, error) { return nil, nil }

// ErrClosing ends calls that would wait past the runtime's life.
var ErrClosing = errors.New("the runtime is closing")

// shield.spawn(fn, ...) starts fn(...) as a new task and returns at once.
// An uncaught error in it is logged with its traceback.
func (rt *Runtime) spawn(L *lua.LState) int {
	a := ArgsOf(L, "shield", "spawn")
	fn := a.Function(1)
	args := make([]lua.LValue, 0, L.GetTop()-1)
	for i := 2; i <= L.GetTop(); i++ {
		args = append(args, L.Get(i))
	}
	// Start it on the next loop turn: the caller keeps running until it
	// yields. It belongs to the spawner's group.
	var g *Group
	if t := rt.running; t != nil && t.group != nil && t.group.Inherited {
		g = t.group
	}
	rt.starting++ // a task from now on, for Wait, Close and Tasks
	rt.live.Add(1)
	rt.postLocal(func() {
		rt.starting--
		rt.live.Add(-1) // SpawnIn counts it again
		rt.SpawnIn(g, "spawn", fn, args, nil)
	})
	return 0
}

// shield.log.info(msg [, fields]) and friends: structured logging through
// log/slog; fields is a table of attributes.
func (rt *Runtime) logAt(L *lua.LState, name string, level slog.Level) int {
	a := ArgsOf(L, "shield.log", name)
	if L.Get(1) == lua.LNil {
		a.Bad(1, "message expected (a string, or any value tostring accepts), got "+a.Got(1))
	}
	msg := L.ToStringMeta(L.Get(1)).String()
	var attrs []slog.Attr
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		fields := a.Table(2)
		keys := make([]string, 0)
		vals := map[string]lua.LValue{}
		fields.ForEach(func(k, v lua.LValue) {
			ks := fmt.Sprint(k)
			keys = append(keys, ks)
			vals[ks] = v
		})
		sort.Strings(keys)
		for _, k := range keys {
			attrs = append(attrs, slog.Any(k, logValue(vals[k])))
		}
	}
	if t := rt.CurrentTask(L); t != nil {
		attrs = append(attrs, slog.Int64("task", t.ID))
	}
	rt.log.LogAttrs(context.Background(), level, msg, attrs...)
	return 0
}

func logValue(v lua.LValue) any {
	switch x := v.(type) {
	case lua.LNumber:
		return float64(x)
	case lua.LBool:
		return bool(x)
	case lua.LString:
		return string(x)
	default:
		return v.String()
	}
}
