package shieldglobal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

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

// A Go panic in an exposed function raises a Lua error that names the
// function, at the caller's line (it surfaced as the bare panic value); a
// conversion error names it too. The runtime stays usable.
func TestExposedFunctionErrorsNameTheFunction(t *testing.T) {
	m := newModule(t, config.Default())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.Expose("grant_gold", func(uid string, n int) int { panic("ledger offline") }))
	must(m.Expose("load_player", func(ctx context.Context, uid string) (string, error) {
		var seen map[string]bool
		seen[uid] = true // a runtime panic: assignment to entry in nil map
		return uid, nil
	}))
	must(m.Expose("double", func(n int) int { return 2 * n }))
	rt := newRuntime(t, m)
	for src, want := range map[string]string{
		`grant_gold("u1", 5)`: `t.lua:1: grant_gold: panic: ledger offline`,
		"\nlocal ok, e = pcall(grant_gold, 'u1', 5)\nerror(e, 0)": `t.lua:2: grant_gold: panic: ledger offline`,
		`load_player("u1")`: `t.lua:1: load_player: panic: assignment to entry in nil map`,
		`double("x")`:       `t.lua:1: bad argument #1 to 'double' (cannot use x (type lua.LString) as type int)`,
	} {
		err := rt.RunString(src, "t.lua")
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", src, err, want)
		}
	}
	if err := rt.RunString(`assert(double(21) == 42)`, "t.lua"); err != nil {
		t.Fatal(err)
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

// A second runtime on a Lua state that has one is refused, from the same
// Module, another Module, or through a thread of the state (two loops drove
// one LState: data races and wrong results). Once the first is closed the
// state may get a new one.
func TestSecondRuntimeOnOneStateIsRefused(t *testing.T) {
	m := newModule(t, config.Default())
	other := newModule(t, config.Default())
	L := lua.NewState()
	defer L.Close()
	rt, err := m.NewRuntime(L)
	if err != nil {
		t.Fatal(err)
	}
	thread, _ := L.NewThread()
	for name, try := range map[string]func() (*Runtime, error){
		"same module":    func() (*Runtime, error) { return m.NewRuntime(L) },
		"another module": func() (*Runtime, error) { return other.NewRuntime(L) },
		"a thread":       func() (*Runtime, error) { return m.NewRuntime(thread) },
	} {
		if second, err := try(); !errors.Is(err, ErrRuntimeInUse) || second != nil {
			t.Errorf("%s: got %v, %v; want ErrRuntimeInUse", name, second, err)
		}
	}
	if err := rt.RunString(`x = 1`, "t.lua"); err != nil {
		t.Fatalf("the first runtime after the refusals: %v", err)
	}
	rt.Close(time.Second)
	again, err := other.NewRuntime(L)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	defer again.Close(time.Second)
	if err := again.RunString(`assert(x == 1)`, "t.lua"); err != nil {
		t.Fatal(err)
	}
}

type vault struct {
	Gold int
	Room *room
}

func (v *vault) Take(n int) int {
	if n > v.Gold {
		panic(fmt.Sprintf("only %d gold", v.Gold))
	}
	v.Gold -= n
	return v.Gold
}

type room struct{ ID string }

func (r room) Kick(uid string) { panic("kick " + uid + ": not in " + r.ID) }

// A Go panic in a method of an exposed struct (gopher-luar proxy) raises a
// Lua error naming Type.Method at the caller's line (it surfaced as the
// bare panic value), also for a type reached through a field; the value
// stays usable.
func TestExposedMethodPanicsNameTheMethod(t *testing.T) {
	m := newModule(t, config.Default())
	if err := m.Expose("vault", &vault{Gold: 10, Room: &room{ID: "r1"}}); err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, m)
	for src, want := range map[string]string{
		`vault:Take(50)`: `t.lua:1: vault.Take: panic: only 10 gold`,
		"\nlocal ok, e = pcall(vault.Take, vault, 50)\nerror(e, 0)": `t.lua:2: vault.Take: panic: only 10 gold`,
		`vault.Room:Kick("u1")`: `t.lua:1: room.Kick: panic: kick u1: not in r1`,
	} {
		err := rt.RunString(src, "t.lua")
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", src, err, want)
		}
	}
	if err := rt.RunString(`assert(vault:Take(4) == 6)`, "t.lua"); err != nil {
		t.Fatal(err)
	}
}
