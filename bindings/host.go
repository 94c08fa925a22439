package bindings

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	lua "github.com/yuin/gopher-lua"
	luar "layeh.com/gopher-luar"
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
		base := L.GetTop()
		L.Insert(inner, 1)
		if failed != nil {
			_ = failed()
		}
		if err := L.PCall(base, lua.MultRet, nil); err != nil {
			var api *lua.ApiError
			if errors.As(err, &api) && api.Type == lua.ApiErrorPanic {
				raise(L, "%s: panic: %s", name, lua.LVAsString(api.Object))
			}
			msg := strings.TrimPrefix(lua.LVAsString(errorValue(err)), userWhere(L))
			if arg, ok := strings.CutPrefix(msg, "bad argument "); ok {
				// gopher-luar's conversion error: name the function
				raise(L, "bad argument %s", strings.Replace(arg, " to (anonymous) (", " to '"+name+"' (", 1))
			}
			raise(L, "%s: %s", name, msg)
		}
		if failed != nil {
			if err := failed(); err != nil {
				raise(L, "%s: %s", name, err.Error())
			}
		}
		return L.GetTop()
	})
}

// errorValue is the Lua value a PCall error carries.
func errorValue(err error) lua.LValue {
	var api *lua.ApiError
	if errors.As(err, &api) {
		return api.Object
	}
	return lua.LString(err.Error())
}
