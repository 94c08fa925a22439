package runtime

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

// Args checks the arguments of one call. lib names the object
// ("shield.global") and fn the function ("set").
type Args struct {
	L       *lua.LState
	Lib, Fn string
}

// ArgsOf checks the arguments of the call lib.fn made on L.
func ArgsOf(L *lua.LState, lib, fn string) Args { return Args{L: L, Lib: lib, Fn: fn} }

// Bad raises "bad argument #n to 'fn' (msg)"; it does not return.
func (a Args) Bad(n int, msg string) {
	Raise(a.L, "%s: bad argument #%d to '%s' (%s)", a.Lib, n, a.Fn, msg)
}

// TypeError raises that argument n is not a want.
func (a Args) TypeError(n int, want string) {
	a.Bad(n, want+" expected, got "+a.Got(n))
}

// Got names the type of argument n as Lua does ("no value" past the end).
func (a Args) Got(n int) string {
	if n > a.L.GetTop() {
		return "no value"
	}
	return a.L.Get(n).Type().String()
}

// Fail raises a plain error about this call.
func (a Args) Fail(format string, v ...any) {
	Raise(a.L, "%s: %s: %s", a.Lib, a.Fn, fmt.Sprintf(format, v...))
}

// Str is argument n, a string.
func (a Args) Str(n int) string {
	if s, ok := a.L.Get(n).(lua.LString); ok {
		return string(s)
	}
	a.TypeError(n, "string")
	return ""
}

// Key is a non-empty string.
func (a Args) Key(n int) string { return a.Name(n, "key") }

// Name is a non-empty string; what names it in the error ("channel").
func (a Args) Name(n int, what string) string {
	s := a.Str(n)
	if s == "" {
		a.Bad(n, what+" must not be empty")
	}
	return s
}

// Num is argument n, a number.
func (a Args) Num(n int) float64 {
	if v, ok := a.L.Get(n).(lua.LNumber); ok {
		return float64(v)
	}
	a.TypeError(n, "number")
	return 0
}

// OptNum is argument n, a number, or def when it is nil or absent.
func (a Args) OptNum(n int, def float64) float64 {
	if a.L.Get(n) == lua.LNil {
		return def
	}
	return a.Num(n)
}

// OptMillis is an optional positive duration in milliseconds; 0 when absent.
func (a Args) OptMillis(n int, what string) int64 {
	if a.L.Get(n) == lua.LNil {
		return 0
	}
	v := a.Num(n)
	if v <= 0 || v != v || v > 1e15 {
		a.Bad(n, fmt.Sprintf("%s must be a positive number of milliseconds, got %s", what, lua.LNumber(v).String()))
	}
	return int64(math.Ceil(v)) // 0.5 ms is 1 ms, never "no expiry"
}

// Table is argument n, a table.
func (a Args) Table(n int) *lua.LTable {
	if t, ok := a.L.Get(n).(*lua.LTable); ok {
		return t
	}
	a.TypeError(n, "table")
	return nil
}

// Function is argument n, a Lua function.
func (a Args) Function(n int) *lua.LFunction {
	if f, ok := a.L.Get(n).(*lua.LFunction); ok {
		return f
	}
	a.TypeError(n, "function")
	return nil
}

func (a Args) self(n int, typ string) any {
	if ud, ok := a.L.Get(n).(*lua.LUserData); ok {
		if mt, ok := ud.Metatable.(*lua.LTable); ok && mt.RawGetString("__name") == lua.LString(typ) {
			return ud.Value
		}
	}
	a.Bad(n, typ+" expected, got "+a.Got(n)+" (call it with ':')")
	return nil
}

// SelfAs is argument n as the self of type typ (a userdata whose
// metatable's __name is typ), with the Go value checked too: a userdata
// that only looks like typ (newproxy(true) with __name set, or typ's
// metatable put on a foreign userdata with debug.setmetatable) is an
// argument error, never a Go panic.
func SelfAs[T any](a Args, n int, typ string) T {
	v, ok := a.self(n, typ).(T)
	if !ok {
		a.Bad(n, typ+" expected, got "+a.Got(n)+" (call it with ':')")
	}
	return v
}

// Raise raises a Lua error positioned at the user's code: the first stack
// level that is not a Go function and not part of the embedded runtime.
func Raise(L *lua.LState, format string, v ...any) {
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

// SetMethods makes methods the __index of a type's metatable mt. Looking up
// a method the type does not have raises an error naming the type and the
// method ("shield.priority_queue has no method 'push_batch'") instead of
// giving nil for a later "attempt to call a non-function object"; known
// methods cost nothing more (the miss goes through methods' own metatable).
func SetMethods(L *lua.LState, mt, methods *lua.LTable) {
	miss := L.NewTable()
	miss.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		name := L.Get(2)
		if s, ok := name.(lua.LString); ok {
			Raise(L, "%s has no method '%s'", mt.RawGetString("__name").String(), string(s))
		}
		return 0 // a non-string key (t[1]) is nil, as on any table
	}))
	L.SetMetatable(methods, miss)
	mt.RawSetString("__index", methods)
}
