package bindings

import (
	"log/slog"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testlog"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// Test helpers of the capability tests (internal/runtime's tests have their
// own: a package's internal tests cannot share test files).

// newTestRuntime starts a runtime with svc's capabilities.
func newTestRuntime(t *testing.T, svc *runtime.Services) *runtime.Runtime {
	t.Helper()
	L := lua.NewState(runtime.StateOptions())
	rt, err := runtime.NewRuntime(L, svc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(time.Second); L.Close() })
	return rt
}

// run runs src as a task and returns its error.
func run(t *testing.T, rt *runtime.Runtime, src string) error {
	t.Helper()
	return rt.RunString(src, "test.lua")
}

func mustRun(t *testing.T, rt *runtime.Runtime, src string) {
	t.Helper()
	if err := run(t, rt, src); err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func global(t *testing.T, rt *runtime.Runtime, name string) lua.LValue {
	t.Helper()
	var v lua.LValue
	if err := rt.Do(func(L *lua.LState) error { v = L.GetGlobal(name); return nil }); err != nil {
		t.Fatal(err)
	}
	return v
}

// withEach exposes each(fn), a Go function that calls the Lua function it is
// given: Lua called from Go, the way a host's callbacks are.
func withEach(t *testing.T, rt *runtime.Runtime) {
	t.Helper()
	if err := rt.Set("each", func(fn func()) { fn() }); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = testlog.Buffer

func logTo(w *syncBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
