package shieldglobal

import (
	"context"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
)

func TestExposeReachesLaterRuntimes(t *testing.T) {
	m := newModule(t, config.Default())
	var shown []string
	if err := m.Expose("show_notification", func(uid, text string) { shown = append(shown, uid+": "+text) }); err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, m)
	if err := rt.RunString(`show_notification("u1", "boss down")`, "t.lua"); err != nil {
		t.Fatal(err)
	}
	if len(shown) != 1 || shown[0] != "u1: boss down" {
		t.Fatalf("shown %v", shown)
	}
}

// L.PreloadModule("shield", mod.Loader): require returns the runtime's
// library; without a runtime it says what to do.
func TestLoader(t *testing.T) {
	m := newModule(t, config.Default())
	L := lua.NewState()
	defer L.Close()
	m.Preload(L)
	err := L.DoString(`require("shield")`)
	if err == nil || !strings.Contains(err.Error(), "call Module.NewRuntime(L) before requiring shield") {
		t.Fatalf("without a runtime: %v", err)
	}
	L2 := lua.NewState()
	defer L2.Close()
	m.Preload(L2)
	rt, err := m.NewRuntime(L2)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(0)
	m.Preload(L2) // after NewRuntime too
	vals, err := rt.Call(context.Background(), mustLoad(t, rt, `return require("shield") == shield and shield.sleep ~= nil`))
	if err != nil || len(vals) != 1 || vals[0] != lua.LTrue {
		t.Fatalf("require through the loader: %v %v", vals, err)
	}
}

func mustLoad(t *testing.T, rt *Runtime, src string) *lua.LFunction {
	t.Helper()
	var fn *lua.LFunction
	if err := rt.Do(func(L *lua.LState) error {
		var err error
		fn, err = L.LoadString(src)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return fn
}
