package runtime

import (
	lua "github.com/yuin/gopher-lua"
)

// The Go half of the prelude's coroutine functions.

// coCreate is coroutine.create: the new thread gets the runtime's thread
// options (small stacks that grow) and its interrupt context.
func (rt *Runtime) coCreate(L *lua.LState) int {
	saved, ctx := L.Options, L.RemoveContext()
	L.Options = rt.threadOpts
	defer func() {
		L.Options = saved
		if ctx != nil {
			L.SetContext(ctx)
		}
	}()
	n := rt.rawCreate(L)
	if co, ok := L.Get(-1).(*lua.LState); ok {
		co.SetContext(rt.vm)
	}
	return n
}

// busy(co, fn) -> why a script may not resume co, or nil: co waits in a
// shield call (it belongs to that call until the call completes), or co is
// a task's own thread (the runtime resumes it). A co that is not a thread
// is an argument error of coroutine.fn, raised at the script's line (the
// stock function, called from the prelude, named a runtime position).
func (rt *Runtime) busy(L *lua.LState) int {
	co, ok := L.Get(1).(*lua.LState)
	if !ok {
		Raise(L, "bad argument #1 to '%s' (coroutine expected, got %s)", L.Get(2).String(), L.Get(1).Type())
	}
	if o := rt.parked[co]; o != nil {
		L.Push(lua.LString("it is waiting in " + o.name))
		return 1
	}
	t, own := rt.threads[co]
	if !own || L.G.CurrentThread == co {
		return 0
	}
	switch {
	case t == nil:
		L.Push(lua.LString("it is an idle task thread of the runtime"))
	case t.waiting != nil:
		L.Push(lua.LString("it is task " + t.Name + ", waiting in " + t.waiting.name))
	default:
		L.Push(lua.LString("it is task " + t.Name + ", which the runtime resumes"))
	}
	return 1
}

// callable(v) -> whether v can be called: a function, or a value whose
// metatable has __call.
func callable(L *lua.LState) int {
	v := L.Get(1)
	ok := v.Type() == lua.LTFunction
	if !ok {
		if mt, isT := L.GetMetatable(v).(*lua.LTable); isT {
			ok = mt.RawGetString("__call") != lua.LNil
		}
	}
	L.Push(lua.LBool(ok))
	return 1
}

// adopt(co): the pooled pcall worker co now runs for the calling coroutine.
func (rt *Runtime) adopt(L *lua.LState) int {
	if co, ok := L.Get(1).(*lua.LState); ok {
		rt.owners[co] = rt.logical(L)
	}
	return 0
}

// disown(co): co went back to the pool (or died).
func (rt *Runtime) disown(L *lua.LState) int {
	if co, ok := L.Get(1).(*lua.LState); ok {
		delete(rt.owners, co)
	}
	return 0
}

// logical returns the coroutine a script sees as running on thread L: L
// itself, the coroutine a pcall worker runs for, or nil on the main thread.
func (rt *Runtime) logical(L *lua.LState) *lua.LState {
	if o, ok := rt.owners[L]; ok {
		return o
	}
	if L.G.MainThread == L {
		return nil
	}
	return L
}

// coroutine.running() -> the running coroutine as the script sees it (nil
// on the main thread).
func (rt *Runtime) coRunning(L *lua.LState) int {
	if co := rt.logical(L); co != nil {
		L.Push(co)
	} else {
		L.Push(lua.LNil)
	}
	return 1
}
