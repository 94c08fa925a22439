package runtime

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	lua "github.com/yuin/gopher-lua"
	luar "layeh.com/gopher-luar"

	shieldlua "github.com/shieldrt/shieldglobal/lua/shield"
)

// The host's side: Go code calling script functions and handing Go values
// to scripts.

// ErrCancelled ends a task whose Call's context ended: the task raises it at
// its next instruction (or, parked in a blocking call, ends at once).
var ErrCancelled = errors.New("shield: call cancelled by the host")

// Call runs the Lua function fn — the name of a global, a dotted path such as
// "handlers.on_login", or a *lua.LFunction — as a task with args converted by
// gopher-luar (see Value), and returns its results when the task ends. The
// function may block. When ctx ends first, Call returns ctx's error and the
// task is interrupted (it ends with ErrCancelled; tasks it spawned go on). A
// Lua error comes back as a *TaskError with its traceback; other errors:
// ErrClosed, fn not found or not a function.
//
// The results are the Lua state's values: strings, numbers and booleans are
// safe to keep; read tables inside Do, or convert them in Go's done, since
// the loop may change them at any time.
func (rt *Runtime) Call(ctx context.Context, fn any, args ...any) ([]lua.LValue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type result struct {
		vals []lua.LValue
		err  error
	}
	res := make(chan result, 1)
	g := &Group{}
	if !rt.post(func() {
		rt.start(g, fn, args, func(vals []lua.LValue, err error) { res <- result{vals, err} })
	}) {
		return nil, ErrClosed
	}
	select {
	case r := <-res:
		return r.vals, r.err
	case <-ctx.Done():
		rt.interruptGroup(g, fmt.Errorf("%w: %w", ErrCancelled, ctx.Err()))
		return nil, ctx.Err()
	case <-rt.done:
		return nil, ErrClosed
	}
}

// Go is Call without waiting, for hosts that dispatch many requests: done
// is called on the loop when the task ends (it must not block; take what
// you need out of the Lua values there). It costs no goroutine. When the
// runtime is closing, done gets ErrClosed at once, on the calling goroutine.
func (rt *Runtime) Go(fn any, args []any, done func(results []lua.LValue, err error)) {
	if !rt.post(func() { rt.start(nil, fn, args, done) }) {
		done(nil, ErrClosed)
	}
}

// post is Post that reports false once the runtime is closing.
func (rt *Runtime) post(fn func()) bool {
	rt.mu.Lock()
	closing := rt.closing
	rt.mu.Unlock()
	if closing {
		return false
	}
	rt.Post(fn)
	return true
}

// start resolves fn and runs it as a task of g. Loop only.
func (rt *Runtime) start(g *Group, fn any, args []any, done func([]lua.LValue, error)) {
	f, name, err := rt.resolve(fn)
	if err != nil {
		done(nil, err)
		return
	}
	lvs := make([]lua.LValue, len(args))
	for i, a := range args {
		lvs[i] = rt.Value(a)
	}
	t := &Task{end: func(t *Task, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(t.results, nil)
	}}
	rt.spawnTask(t, g, name, f, lvs)
}

// resolve finds the function fn names.
func (rt *Runtime) resolve(fn any) (*lua.LFunction, string, error) {
	switch f := fn.(type) {
	case *lua.LFunction:
		return f, "call", nil
	case string:
		var v lua.LValue = rt.L.Get(lua.GlobalsIndex)
		for _, part := range strings.Split(f, ".") {
			t, ok := v.(*lua.LTable)
			if !ok || part == "" {
				return nil, f, fmt.Errorf("shield: call %q: %w", f, errNoFunction)
			}
			v = t.RawGetString(part)
		}
		lf, ok := v.(*lua.LFunction)
		if !ok {
			return nil, f, fmt.Errorf("shield: call %q: %w (it is a %s)", f, errNoFunction, v.Type())
		}
		return lf, f, nil
	}
	return nil, "", fmt.Errorf("shield: call: fn must be a function name or a *lua.LFunction, got %T", fn)
}

var errNoFunction = errors.New("no such function")

// Set makes v the global name of the Lua state (see Value for how Go values
// are converted). Safe from any goroutine: it runs on the loop.
func (rt *Runtime) Set(name string, v any) error {
	if name == "" {
		return errors.New("shield: Set: empty name")
	}
	return rt.Do(func(L *lua.LState) error {
		L.SetGlobal(name, rt.valueNamed(name, v))
		return nil
	})
}

// Value converts a Go value for Lua (loop only): nil, booleans, numbers and
// strings become Lua values; a lua.LValue is kept; functions become Lua
// functions; maps, slices, arrays, structs, pointers and channels become
// gopher-luar proxies (userdata that index, call and iterate their Go
// value). A Go function whose first parameter is a context.Context receives
// the runtime's context there; one whose last result is an error raises it
// in Lua ("<name>: <error>" at the caller's line) instead of returning it.
func (rt *Runtime) Value(v any) lua.LValue { return rt.valueNamed("host function", v) }

var (
	ctxType = reflect.TypeFor[context.Context]()
	errType = reflect.TypeFor[error]()
)

func (rt *Runtime) valueNamed(name string, v any) lua.LValue {
	fn := reflect.ValueOf(v)
	switch fn.Kind() {
	case reflect.Invalid, reflect.Bool, reflect.String, reflect.Int, reflect.Int64, reflect.Float64: // the common scalars: no methods to guard
	default:
		if _, ok := v.(lua.LValue); !ok {
			rt.guardMethods(fn.Type(), map[reflect.Type]bool{})
		}
	}
	if fn.Kind() != reflect.Func || fn.IsNil() {
		return luar.New(rt.L, v)
	}
	t := fn.Type()
	withCtx := t.NumIn() > 0 && t.In(0) == ctxType
	withErr := t.NumOut() > 0 && t.Out(t.NumOut()-1) == errType
	if !withCtx && !withErr {
		// Called through the same protected wrapper, so a panic names
		// the function like an error does.
		return rt.guarded(name, luar.New(rt.L, v), nil)
	}
	// An adapter without the context parameter and the error result, which
	// gopher-luar converts; the error it swallowed is raised afterwards.
	in := make([]reflect.Type, 0, t.NumIn())
	for i := 0; i < t.NumIn(); i++ {
		if i > 0 || !withCtx {
			in = append(in, t.In(i))
		}
	}
	out := make([]reflect.Type, 0, t.NumOut())
	for i := 0; i < t.NumOut(); i++ {
		if i < t.NumOut()-1 || !withErr {
			out = append(out, t.Out(i))
		}
	}
	var failed error
	adapter := reflect.MakeFunc(reflect.FuncOf(in, out, t.IsVariadic()), func(args []reflect.Value) []reflect.Value {
		if withCtx {
			args = append([]reflect.Value{reflect.ValueOf(rt.ctx)}, args...)
		}
		var res []reflect.Value
		if t.IsVariadic() {
			res = fn.CallSlice(args)
		} else {
			res = fn.Call(args)
		}
		if withErr {
			if e := res[len(res)-1]; !e.IsNil() {
				failed = e.Interface().(error)
			}
			res = res[:len(res)-1]
		}
		return res
	})
	return rt.guarded(name, luar.New(rt.L, adapter.Interface()), func() error {
		err := failed
		failed = nil
		return err
	})
}

// guarded is a Lua function that calls inner (a gopher-luar function)
// protected: its error, and a Go panic inside it, raise "<name>: ..." at the
// caller's line ("<name>: panic: ..." for a panic; without the wrapper a
// panic surfaced as its bare value, with no name and no position). failed,
// when not nil, returns the error an adapter swallowed, to raise after.
func (rt *Runtime) guarded(name string, inner lua.LValue, failed func() error) *lua.LFunction {
	return rt.L.NewFunction(func(L *lua.LState) int {
		if failed != nil {
			_ = failed()
		}
		rt.pcallNamed(L, name, inner)
		if failed != nil {
			if err := failed(); err != nil {
				Raise(L, "%s: %s", name, err.Error())
			}
		}
		return L.GetTop()
	})
}

// guardedMark marks a gopher-luar metatable whose methods guardMethods
// wrapped.
const guardedMark = "shield.guarded"

// guardMethods wraps the methods gopher-luar gives Lua values of type t, and
// of every type a value of t leads to (fields, elements, method and
// function results), in guarded: a Go panic in p:Give(5) then raises
// "player.Give: panic: ..." at the caller's line instead of a bare value.
// Each type is wrapped once per Lua state (its metatable is marked). Loop
// only.
func (rt *Runtime) guardMethods(t reflect.Type, seen map[reflect.Type]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Func:
		for i := 0; i < t.NumOut(); i++ {
			rt.guardMethods(t.Out(i), seen)
		}
		return
	case reflect.Array, reflect.Chan, reflect.Map, reflect.Pointer, reflect.Slice, reflect.Struct:
	default:
		return
	}
	if t.Implements(lvalueType) {
		return // a Lua value: gopher-luar passes it through
	}
	mt := luar.MT(rt.L, reflect.Zero(t).Interface())
	if mt == nil || mt.RawGetString(guardedMark) != lua.LNil {
		return
	}
	mt.RawSetString(guardedMark, lua.LTrue)
	if methods, ok := mt.RawGetString("methods").(*lua.LTable); ok {
		typeName := t.Name()
		if t.Kind() == reflect.Pointer {
			typeName = t.Elem().Name()
		}
		if typeName == "" {
			typeName = t.String()
		}
		var names []string
		methods.ForEach(func(k, _ lua.LValue) { names = append(names, lua.LVAsString(k)) })
		for _, m := range names {
			methods.RawSetString(m, rt.guarded(typeName+"."+m, methods.RawGetString(m), nil))
		}
	}
	for i := 0; i < t.NumMethod(); i++ {
		rt.guardMethods(t.Method(i).Type, seen)
	}
	switch t.Kind() {
	case reflect.Array, reflect.Chan, reflect.Slice:
		rt.guardMethods(t.Elem(), seen)
	case reflect.Pointer:
		rt.guardMethods(t.Elem(), seen)
	case reflect.Map:
		rt.guardMethods(t.Key(), seen)
		rt.guardMethods(t.Elem(), seen)
	case reflect.Struct:
		rt.guardMethods(reflect.PointerTo(t), seen) // an addressable field is handed out through a pointer
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() {
				rt.guardMethods(f.Type, seen)
			}
		}
	}
}

// pcallNamed calls inner with every value on L's stack as arguments and
// leaves its results there; an error or a Go panic raises as guarded says.
func (rt *Runtime) pcallNamed(L *lua.LState, name string, inner lua.LValue) {
	base := L.GetTop()
	L.Insert(inner, 1)
	if err := L.PCall(base, lua.MultRet, nil); err != nil {
		var api *lua.ApiError
		if errors.As(err, &api) && api.Type == lua.ApiErrorPanic {
			Raise(L, "%s: panic: %s", name, lua.LVAsString(api.Object))
		}
		msg := strings.TrimPrefix(lua.LVAsString(errorValue(err)), userWhere(L))
		if strings.HasPrefix(msg, shieldlua.ChunkPrefix) { // raised at the prelude's wrapper
			if _, rest, ok := strings.Cut(msg, ": "); ok {
				msg = rest
			}
		}
		if arg, ok := strings.CutPrefix(msg, "bad argument "); ok {
			// gopher-luar's conversion error: name the function
			Raise(L, "bad argument %s", strings.Replace(arg, " to (anonymous) (", " to '"+name+"' (", 1))
		}
		Raise(L, "%s: %s", name, msg)
	}
}

// errorValue is the Lua value a PCall error carries.
func errorValue(err error) lua.LValue {
	var api *lua.ApiError
	if errors.As(err, &api) {
		return api.Object
	}
	return lua.LString(err.Error())
}

// Async host functions: Go functions a script calls like any other, which
// run off the loop and suspend only the calling task (OpenResty's
// cosockets, skynet.call), for host work that waits (a database load, an
// HTTP call to a payment service).

// CheckAsync reports why fn cannot be an async host function: it must be a
// func whose first parameter is a context.Context, and no parameter may
// receive Lua values themselves (lua.LValue, *lua.LTable, funcs...): the
// function runs on another goroutine, where touching the Lua state races
// with the loop.
func CheckAsync(fn any) error {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.IsNil() {
		return fmt.Errorf("an async host function must be a non-nil func, got %T", fn)
	}
	t := v.Type()
	if t.NumIn() == 0 || t.In(0) != ctxType {
		return fmt.Errorf("an async host function's first parameter must be a context.Context (%s)", t)
	}
	for i := 1; i < t.NumIn(); i++ {
		if p := t.In(i); holdsLua(p, map[reflect.Type]bool{}) {
			return fmt.Errorf("parameter %d of an async host function (%s) would carry Lua values or functions to another goroutine; take plain Go values", i, p)
		}
	}
	return nil
}

var lvalueType = reflect.TypeFor[lua.LValue]()

// holdsLua tells whether gopher-luar would put a Lua value, or a Go func
// that calls into Lua, somewhere in a value of type p.
func holdsLua(p reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[p] {
		return false
	}
	seen[p] = true
	if p.Implements(lvalueType) {
		return true
	}
	switch p.Kind() {
	case reflect.Func:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
		return holdsLua(p.Elem(), seen)
	case reflect.Map:
		return holdsLua(p.Key(), seen) || holdsLua(p.Elem(), seen)
	case reflect.Struct:
		for i := 0; i < p.NumField(); i++ {
			if f := p.Field(i); f.IsExported() && holdsLua(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// SetAsync makes fn, an async host function (see CheckAsync), the global
// name of the Lua state. Called from a task, it converts the arguments on
// the loop (as Set's functions do), runs fn on a worker goroutine and
// suspends only the calling task until fn returns; its results convert
// back on the loop, and a non-nil last error result raises "<name>:
// <error>" (a panic "<name>: panic: <value>") at the caller's line. fn's
// context is cancelled when the calling task ends (a cancelled Call, an
// interrupt) or the runtime closes (when Close's grace period is over).
// Outside any task (Lua run by Do) the
// loop waits for fn; where a task cannot yield it raises cannot block here.
func (rt *Runtime) SetAsync(name string, fn any) error {
	if name == "" {
		return errors.New("shield: SetAsync: empty name")
	}
	if err := CheckAsync(fn); err != nil {
		return fmt.Errorf("shield: SetAsync %q: %w", name, err)
	}
	return rt.Do(func(L *lua.LState) error {
		rt.guardMethods(reflect.TypeOf(fn), map[reflect.Type]bool{})
		L.SetGlobal(name, rt.asyncFunction(name, reflect.ValueOf(fn)))
		return nil
	})
}

// asyncFunction is the Lua function of an async host function (a blocking
// call, in the prelude's wrapper). Loop only.
func (rt *Runtime) asyncFunction(name string, fn reflect.Value) lua.LValue {
	t := fn.Type()
	withErr := t.NumOut() > 0 && t.Out(t.NumOut()-1) == errType
	in := make([]reflect.Type, 0, t.NumIn()-1)
	for i := 1; i < t.NumIn(); i++ {
		in = append(in, t.In(i))
	}
	// gopher-luar converts the arguments by calling capture, which keeps
	// them for the worker; capture runs on the loop and never yields, so
	// one slot serves every call.
	var captured []reflect.Value
	capture := luar.New(rt.L, reflect.MakeFunc(reflect.FuncOf(in, nil, t.IsVariadic()), func(args []reflect.Value) []reflect.Value {
		captured = args
		return nil
	}).Interface())
	return rt.Blocking(func(L *lua.LState) int {
		for i := 1; i <= L.GetTop(); i++ {
			if what := luaOnly(L.Get(i), map[*lua.LTable]bool{}); what != "" {
				Raise(L, "bad argument #%d to '%s' (%s cannot be handed to an async host function)", i, name, what)
			}
		}
		rt.pcallNamed(L, name, capture)
		args := append([]reflect.Value{{}}, captured...)
		captured = nil
		L.SetTop(0)
		// The task's end (or an interrupt) calls the cancel Block is given:
		// the host function's context ends with the task.
		return rt.Block(L, name, func(w *Wait) func() {
			// Where the call may not wait (a metamethod, Lua called from
			// Go) the host function must not even start.
			rt.refuseAtOnce()
			ctx, cancel := context.WithCancel(rt.hostContext())
			args[0] = reflect.ValueOf(ctx)
			rt.goWork(func() {
				outs, err := callHost(fn, args, withErr)
				w.Complete(func() ([]lua.LValue, error) {
					cancel()
					if err != nil {
						return nil, err
					}
					vals := make([]lua.LValue, len(outs))
					for i, o := range outs {
						vals[i] = luar.New(rt.L, o.Interface())
					}
					return vals, nil
				})
			})
			return cancel
		})
	})
}

// hostContext is the parent context of async host calls: it ends when the
// runtime's context does, or earlier, when Close's grace period is over
// (vm.kill). A call the loop itself waits for (outside any task) must end
// then, or the loop never comes back for Close. Loop only.
func (rt *Runtime) hostContext() context.Context {
	if rt.hostCtx == nil {
		ctx, cancel := context.WithCancel(rt.ctx)
		go func() {
			select {
			case <-rt.vm.kill:
			case <-ctx.Done():
			}
			cancel()
		}()
		rt.hostCtx = ctx
	}
	return rt.hostCtx
}

// callHost calls fn on a worker: its results without the error, its error,
// or a panic as an error ("panic: <value>").
func callHost(fn reflect.Value, args []reflect.Value, withErr bool) (outs []reflect.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			outs, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	if fn.Type().IsVariadic() {
		outs = fn.CallSlice(args)
	} else {
		outs = fn.Call(args)
	}
	if withErr {
		if e := outs[len(outs)-1]; !e.IsNil() {
			return nil, e.Interface().(error)
		}
		outs = outs[:len(outs)-1]
	}
	return outs, nil
}

// luaOnly names what in v only lives in the Lua state (a function, a
// coroutine), searching tables too; "" when v converts to plain Go values.
func luaOnly(v lua.LValue, seen map[*lua.LTable]bool) string {
	switch x := v.(type) {
	case *lua.LFunction:
		return "a function"
	case *lua.LState:
		return "a coroutine"
	case *lua.LTable:
		if seen[x] {
			return ""
		}
		seen[x] = true
		what := ""
		x.ForEach(func(k, v lua.LValue) {
			if what == "" {
				if what = luaOnly(k, seen); what == "" {
					what = luaOnly(v, seen)
				}
			}
		})
		if what != "" {
			return "a table holding " + what
		}
	}
	return ""
}
