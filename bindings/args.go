package bindings

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	shieldlua "github.com/shieldrt/shieldglobal/lua/shield"
)

// Argument checks. gopher-lua's Check* would report the position and name of
// the runtime's Lua wrapper around blocking calls; these report the user's
// line and the call as written: "file.lua:3: shield.global: bad argument #2
// to 'set' (string expected, got number)".

// args checks the arguments of one call. lib names the object
// ("shield.global") and fn the function ("set").
type args struct {
	L       *lua.LState
	lib, fn string
}

func argsOf(L *lua.LState, lib, fn string) args { return args{L: L, lib: lib, fn: fn} }

func (a args) bad(n int, msg string) {
	raise(a.L, "%s: bad argument #%d to '%s' (%s)", a.lib, n, a.fn, msg)
}

func (a args) typeError(n int, want string) {
	a.bad(n, want+" expected, got "+a.got(n))
}

// got names the type of argument n as Lua does ("no value" past the end).
func (a args) got(n int) string {
	if n > a.L.GetTop() {
		return "no value"
	}
	return a.L.Get(n).Type().String()
}

// fail raises a plain error about this call.
func (a args) fail(format string, v ...any) {
	raise(a.L, "%s: %s: %s", a.lib, a.fn, fmt.Sprintf(format, v...))
}

func (a args) str(n int) string {
	if s, ok := a.L.Get(n).(lua.LString); ok {
		return string(s)
	}
	a.typeError(n, "string")
	return ""
}

// key is a non-empty string.
func (a args) key(n int) string { return a.name(n, "key") }

// name is a non-empty string; what names it in the error ("channel").
func (a args) name(n int, what string) string {
	s := a.str(n)
	if s == "" {
		a.bad(n, what+" must not be empty")
	}
	return s
}

func (a args) num(n int) float64 {
	if v, ok := a.L.Get(n).(lua.LNumber); ok {
		return float64(v)
	}
	a.typeError(n, "number")
	return 0
}

func (a args) optNum(n int, def float64) float64 {
	if a.L.Get(n) == lua.LNil {
		return def
	}
	return a.num(n)
}

// optMillis is an optional positive duration in milliseconds; 0 when absent.
func (a args) optMillis(n int, what string) int64 {
	if a.L.Get(n) == lua.LNil {
		return 0
	}
	v := a.num(n)
	if v <= 0 || v != v || v > 1e15 {
		a.bad(n, fmt.Sprintf("%s must be a positive number of milliseconds, got %s", what, lua.LNumber(v).String()))
	}
	return int64(math.Ceil(v)) // 0.5 ms is 1 ms, never "no expiry"
}

func (a args) table(n int) *lua.LTable {
	if t, ok := a.L.Get(n).(*lua.LTable); ok {
		return t
	}
	a.typeError(n, "table")
	return nil
}

func (a args) function(n int) *lua.LFunction {
	if f, ok := a.L.Get(n).(*lua.LFunction); ok {
		return f
	}
	a.typeError(n, "function")
	return nil
}

func (a args) self(n int, typ string) any {
	if ud, ok := a.L.Get(n).(*lua.LUserData); ok {
		if mt, ok := ud.Metatable.(*lua.LTable); ok && mt.RawGetString("__name") == lua.LString(typ) {
			return ud.Value
		}
	}
	a.bad(n, typ+" expected, got "+a.got(n)+" (call it with ':')")
	return nil
}

// selfAs is self with the Go value checked too: a userdata that only looks
// like typ (newproxy(true) with __name set, or typ's metatable put on a
// foreign userdata with debug.setmetatable) is an argument error, never a Go
// panic.
func selfAs[T any](a args, n int, typ string) T {
	v, ok := a.self(n, typ).(T)
	if !ok {
		a.bad(n, typ+" expected, got "+a.got(n)+" (call it with ':')")
	}
	return v
}

// raise raises a Lua error positioned at the user's code: the first stack
// level that is not a Go function and not part of the embedded runtime.
func raise(L *lua.LState, format string, v ...any) {
	L.Error(lua.LString(userWhere(L)+fmt.Sprintf(format, v...)), 0)
}

func userWhere(L *lua.LState) string {
	// A call made inside the prelude's pcall runs in a pooled coroutine
	// whose frames are all the runtime's: the user's line is in the thread
	// that resumed it.
	for th := L; th != nil; th = th.Parent {
		if w, found := threadWhere(th); found {
			return w
		}
	}
	return ""
}

// opWhere is userWhere for the call o parked: a suspended coroutine has no
// Parent (gopher-lua clears it on yield), so the walk follows the threads
// the call parked, up to its task's own. Without this, a call whose user
// frame is in a resumer (`pcall(g.incr, g, k)`, `return g:incr(k)` inside
// pcall) lost its position when it completed after yielding.
func opWhere(o *Wait) string {
	for _, th := range o.chain {
		if w, found := threadWhere(th); found {
			return w
		}
	}
	w, _ := threadWhere(o.task.co)
	return w
}

// threadWhere is "file:line: " of th's innermost script frame; found is
// true when the walk of th decided (also when it decided on no position).
func threadWhere(th *lua.LState) (w string, found bool) {
	for level := 0; level < 12; level++ {
		dbg, ok := th.GetStack(level)
		if !ok {
			return "", false
		}
		if _, err := th.GetInfo("Sl", dbg, lua.LNil); err != nil {
			return "", true
		}
		if dbg.What == "G" || isRuntimeSource(dbg.Source) {
			continue
		}
		if dbg.CurrentLine <= 0 {
			return "", true
		}
		return dbg.Source + ":" + itoa(dbg.CurrentLine) + ": ", true
	}
	return "", false
}

// relocate(err) -> err, or, when err is a message positioned in the
// runtime's own code, the message at the script's line instead. A Go
// function that pcall (or xpcall, l:with) calls directly is called by the
// prelude, so gopher-lua's own errors (tostring(), string.rep()) named
// <shield>/prelude.lua:N and the prelude's local "f": the message reads as
// stock gopher-lua's pcall(tostring) does.
func relocate(L *lua.LState) int {
	if s, ok := L.Get(1).(lua.LString); ok {
		if rest, ok := stripRuntimePosition(string(s)); ok {
			L.Push(lua.LString(userWhere(L) + rest))
			return 1
		}
	}
	L.Push(L.Get(1))
	return 1
}

// stripRuntimePosition removes a leading "<shield>/file.lua:N: " (and the
// name "f" gopher-lua takes from the prelude's call site for the function
// that raised: "bad argument #1 to f").
func stripRuntimePosition(msg string) (string, bool) {
	if !strings.HasPrefix(msg, shieldlua.ChunkPrefix) {
		return msg, false
	}
	pos, rest, ok := strings.Cut(msg, ": ")
	if !ok {
		return msg, false
	}
	i := strings.LastIndexByte(pos, ':')
	if i < 0 {
		return msg, false
	}
	if _, err := strconv.Atoi(pos[i+1:]); err != nil {
		return msg, false
	}
	if strings.HasPrefix(rest, "bad argument #") {
		rest = strings.Replace(rest, " to f (", " to (anonymous) (", 1)
	}
	return rest, true
}

func isRuntimeSource(src string) bool { return strings.HasPrefix(src, shieldlua.ChunkPrefix) }

func itoa(n int) string { return strconv.Itoa(n) }

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

// setMethods makes methods the __index of a type's metatable mt. Looking up
// a method the type does not have raises an error naming the type and the
// method ("shield.priority_queue has no method 'push_batch'") instead of
// giving nil for a later "attempt to call a non-function object"; known
// methods cost nothing more (the miss goes through methods' own metatable).
func setMethods(L *lua.LState, mt, methods *lua.LTable) {
	miss := L.NewTable()
	miss.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		name := L.Get(2)
		if s, ok := name.(lua.LString); ok {
			raise(L, "%s has no method '%s'", mt.RawGetString("__name").String(), string(s))
		}
		return 0 // a non-string key (t[1]) is nil, as on any table
	}))
	L.SetMetatable(methods, miss)
	mt.RawSetString("__index", methods)
}
