package shieldglobal

import (
	"errors"
	"fmt"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// exposed is one value Expose (or ExposeAsync) gave every runtime.
type exposed struct {
	name  string
	v     any
	async bool
}

// Expose makes v the global name of every Lua state whose runtime is
// created afterwards (NewRuntime), converted as Runtime.Set converts it: Go
// functions, structs, maps and values of the host become callable and
// readable from scripts (docs/embedding.md has the type mapping). Runtimes
// created before keep what they had; use Runtime.Set for them.
func (m *Module) Expose(name string, v any) error {
	if name == "" {
		return errors.New("shield: Expose: empty name")
	}
	m.hostMu.Lock()
	defer m.hostMu.Unlock()
	m.exposed = append(m.exposed, exposed{name: name, v: v})
	return nil
}

// ExposeAsync makes fn the global name of every Lua state whose runtime is
// created afterwards, as an async host function: fn runs on a goroutine of
// its own, off the loop, and only the calling task waits for it, so a slow
// host call (a database load, an HTTP request) does not stop the other
// tasks of the state. fn's first parameter must be a context.Context: it is
// cancelled when the calling task ends (its Call's context ended, it was
// interrupted) or the runtime closes (when Close's grace period is over).
// The other parameters and the results convert as Expose's do, with plain
// Go types only: a parameter that would carry a Lua table, function or
// value to fn's goroutine is refused (an error here), and so is a Lua
// function passed as an argument. A non-nil
// last error result raises "<name>: <error>" at the caller's line; a panic
// raises "<name>: panic: <value>". Errors: an empty name, fn not a func or
// without the context parameter, or such a parameter.
//
// Lua that runs outside any task (run by Runtime.Do itself) waits for fn
// with the whole state, as for every blocking call (docs/embedding.md).
func (m *Module) ExposeAsync(name string, fn any) error {
	if name == "" {
		return errors.New("shield: ExposeAsync: empty name")
	}
	if err := runtime.CheckAsync(fn); err != nil {
		return fmt.Errorf("shield: ExposeAsync %q: %w", name, err)
	}
	m.hostMu.Lock()
	defer m.hostMu.Unlock()
	m.exposed = append(m.exposed, exposed{name: name, v: fn, async: true})
	return nil
}

// attach gives a new runtime what Expose recorded and remembers it for
// Loader; it is forgotten when the runtime closes.
func (m *Module) attach(L *lua.LState, rt *Runtime) error {
	m.hostMu.Lock()
	values := append([]exposed(nil), m.exposed...)
	if m.runtimes == nil {
		m.runtimes = map[*lua.LState]*Runtime{}
	}
	m.runtimes[L] = rt
	m.hostMu.Unlock()
	rt.rt.OnStop(func() {
		m.hostMu.Lock()
		delete(m.runtimes, L)
		m.hostMu.Unlock()
	})
	for _, e := range values {
		set := rt.Set
		if e.async {
			set = rt.SetAsync
		}
		if err := set(e.name, e.v); err != nil {
			return fmt.Errorf("shield: exposing %q: %w", e.name, err)
		}
	}
	return nil
}

// Loader is a gopher-lua module loader for hosts that open modules the
// gopher-lua way: L.PreloadModule("shield", mod.Loader). It returns the
// shield library of L's runtime, so create the runtime (NewRuntime, which
// also makes require("shield") work by itself) before Lua code requires it;
// without one it raises an error that says so.
func (m *Module) Loader(L *lua.LState) int {
	m.hostMu.Lock()
	rt := m.runtimes[L]
	if rt == nil {
		for _, r := range m.runtimes { // L may be a thread of a runtime's state
			if r.state.G == L.G {
				rt = r
				break
			}
		}
	}
	m.hostMu.Unlock()
	if rt == nil {
		L.RaiseError("shield: this Lua state has no runtime: call Module.NewRuntime(L) before requiring shield")
		return 0
	}
	L.Push(rt.rt.Library())
	return 1
}

// Preload registers Loader as package.preload["shield"] of L.
func (m *Module) Preload(L *lua.LState) { L.PreloadModule("shield", m.Loader) }
