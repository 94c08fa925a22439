package bindings

import (
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// BenchmarkYieldRoundTrip: a blocking call that completes on the loop's
// next turn (one yield and resume of the task), from Lua in a loop.
func BenchmarkYieldRoundTrip(b *testing.B) {
	benchLuaLoopWith(b, func(rt *runtime.Runtime, L *lua.LState) {
		L.SetGlobal("block", L.NewFunction(func(L *lua.LState) int {
			return rt.Block(L, "block", func(w *runtime.Wait) func() {
				rt.Post(func() { w.Complete(func() ([]lua.LValue, error) { return nil, nil }) })
				return nil
			})
		}))
	}, ``, `block()`)
}
