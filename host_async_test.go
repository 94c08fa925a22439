package shieldglobal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
)

// Five tasks calling a slow async host function all have their call in
// flight at once: each call waits (up to 5 s) until the five are running,
// which a host function run on the loop — one call at a time, 1 005 ms for
// five 200 ms calls — never reaches. The loop stays free meanwhile.
func TestAsyncHostFunctionsRunSideBySide(t *testing.T) {
	m := newModule(t, config.Default())
	const n = 5
	var inFlight atomic.Int32
	all := make(chan struct{})
	if err := m.ExposeAsync("load_player", func(ctx context.Context, uid string) (string, int, error) {
		if inFlight.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(5 * time.Second):
			return "", 0, fmt.Errorf("only %d of %d calls in flight", inFlight.Load(), n)
		}
		time.Sleep(200 * time.Millisecond) // the slow part, side by side
		return "player " + uid, len(uid), nil
	}); err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, m)
	if err := rt.RunString(`
		function login(uid)
			local name, n = load_player(uid)
			return name .. "/" .. n
		end
		ticks = 0
		function ticker() -- runs while the loads wait
			while not stop do ticks = ticks + 1; shield.sleep(1) end
		end`, "t.lua"); err != nil {
		t.Fatal(err)
	}
	rt.Go("ticker", nil, func([]lua.LValue, error) {})
	start := time.Now()
	var wg sync.WaitGroup
	results := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals, err := rt.Call(context.Background(), "login", fmt.Sprintf("u%d", i))
			errs[i] = err
			if len(vals) == 1 {
				results[i] = vals[0].String()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d calls of a 200 ms async host function: %v", n, time.Since(start))
	for i := range n {
		if want := fmt.Sprintf("player u%d/2", i); errs[i] != nil || results[i] != want {
			t.Errorf("call %d: %q, %v; want %q", i, results[i], errs[i], want)
		}
	}
	var ticks float64
	_ = rt.Do(func(L *lua.LState) error {
		ticks = float64(lua.LVAsNumber(L.GetGlobal("ticks")))
		L.SetGlobal("stop", lua.LTrue)
		return nil
	})
	if ticks < 2 {
		t.Errorf("the other task ran %v times while the calls waited", ticks)
	}
}

// The context of an async host function ends when the calling task ends
// (here: its Call's context is cancelled) and when the runtime closes.
func TestAsyncHostContextEndsWithTheTask(t *testing.T) {
	m := newModule(t, config.Default())
	started := make(chan string, 2)
	ended := make(chan error, 2)
	if err := m.ExposeAsync("wait_forever", func(ctx context.Context, who string) error {
		started <- who
		<-ctx.Done()
		ended <- ctx.Err()
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, m)
	if err := rt.RunString(`function f(who) wait_forever(who); reached = true end`, "t.lua"); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, ch any) {
		t.Helper()
		select {
		case v := <-started:
			if ch != "started" {
				t.Fatalf("unexpected start %v", v)
			}
		case err := <-ended:
			if ch != "ended" || !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: ctx ended with %v", what, err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: nothing within 3 s", what)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := rt.Call(ctx, "f", "call"); done <- err }()
	waitFor("the call", "started")
	cancel()
	waitFor("the cancelled call", "ended")
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Call: %v", err)
	}

	rt.Go("f", []any{"close"}, func([]lua.LValue, error) {})
	waitFor("the second call", "started")
	closed := make(chan struct{})
	go func() { rt.Close(100 * time.Millisecond); close(closed) }()
	waitFor("the closing runtime", "ended")
	<-closed
}

// Errors, panics and bad arguments of async host functions raise Lua
// errors that name the function at the caller's line; pcall catches them
// and the task goes on.
func TestAsyncHostErrors(t *testing.T) {
	m := newModule(t, config.Default())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.ExposeAsync("charge", func(ctx context.Context, uid string, amount int) (int, error) {
		switch {
		case amount < 0:
			return 0, errors.New("negative amount")
		case amount == 0:
			var ledger map[string]int
			ledger[uid] = amount // a runtime panic
		case amount == 13:
			panic("payment service gone")
		}
		return amount * 2, nil
	}))
	must(m.ExposeAsync("sum", func(ctx context.Context, xs ...int) int {
		s := 0
		for _, x := range xs {
			s += x
		}
		return s
	}))
	rt := newRuntime(t, m)
	for src, want := range map[string]string{
		`charge("u1", -1)`: `t.lua:1: charge: negative amount`,
		`charge("u1", 13)`: `t.lua:1: charge: panic: payment service gone`,
		`charge("u1", 0)`:  `t.lua:1: charge: panic: assignment to entry in nil map`,
		"\nlocal ok, e = pcall(charge, 'u1', 13)\nerror(e, 0)": `t.lua:2: charge: panic: payment service gone`,
		`charge("u1", "x")`:                `t.lua:1: bad argument #2 to 'charge' (cannot use x (type lua.LString) as type int)`,
		`charge(function() end, 1)`:        `t.lua:1: bad argument #1 to 'charge' (a function cannot be handed to an async host function)`,
		`charge({cb = function() end}, 1)`: `t.lua:1: bad argument #1 to 'charge' (a table holding a function cannot be handed to an async host function)`,
	} {
		err := rt.RunString(src, "t.lua")
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", src, err, want)
		}
	}
	if err := rt.RunString(`assert(charge("u1", 21) == 42); assert(sum(1, 2, 3) == 6); assert(sum() == 0)`, "t.lua"); err != nil {
		t.Fatal(err)
	}
}

// Where Lua runs outside any task (Lua run by Do itself) the loop waits for
// an async host function; where a task cannot yield (a metamethod) the
// call raises "cannot block here" instead of corrupting the state.
func TestAsyncHostOutsideATask(t *testing.T) {
	m := newModule(t, config.Default())
	var calls atomic.Int32
	if err := m.ExposeAsync("lookup", func(ctx context.Context, k string) string { calls.Add(1); return "v-" + k }); err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, m)
	var got string
	if err := rt.Do(func(L *lua.LState) error {
		if err := L.DoString(`r = lookup("a")`); err != nil {
			return err
		}
		got = lua.LVAsString(L.GetGlobal("r"))
		return nil
	}); err != nil || got != "v-a" {
		t.Fatalf("outside a task: %q, %v", got, err)
	}
	err := rt.RunString(`local t = setmetatable({}, {__index = function(_, k) return lookup(k) end}); return t.x`, "t.lua")
	if err == nil || !strings.Contains(err.Error(), "lookup: cannot block here") {
		t.Fatalf("in a metamethod: %v", err)
	}
	// Refused before it ran: a host function with side effects must not
	// run where its result cannot be taken (a worker would have run it by
	// now).
	time.Sleep(200 * time.Millisecond)
	if n := calls.Load(); n != 1 {
		t.Fatalf("lookup ran %d times, want once (outside a task; not in the metamethod)", n)
	}

	// The loop waits for the call there, and its context ends when the
	// runtime closes, which frees the loop.
	started, ended := make(chan struct{}), make(chan error, 1)
	if err := rt.SetAsync("wait_forever", func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	go rt.Do(func(L *lua.LState) error { return L.DoString(`wait_forever()`) })
	<-started
	closed := make(chan struct{})
	go func() { rt.Close(50 * time.Millisecond); close(closed) }()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ctx ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing the runtime did not end the call's context")
	}
	<-closed
}

// ExposeAsync refuses what cannot work, when it is called.
func TestExposeAsyncRefuses(t *testing.T) {
	m := newModule(t, config.Default())
	for name, fn := range map[string]any{
		"not a func":       42,
		"nil func":         (func(context.Context))(nil),
		"no context":       func(uid string) {},
		"context second":   func(uid string, ctx context.Context) {},
		"a callback":       func(ctx context.Context, cb func()) {},
		"a Lua table":      func(ctx context.Context, t *lua.LTable) {},
		"Lua values":       func(ctx context.Context, m map[string]lua.LValue) {},
		"a struct of them": func(ctx context.Context, s *struct{ F func() }) {},
	} {
		if err := m.ExposeAsync("f", fn); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := m.ExposeAsync("", func(context.Context) {}); err == nil {
		t.Error("an empty name: accepted")
	}
	rt := newRuntime(t, m)
	if err := rt.SetAsync("g", func(uid string) {}); err == nil {
		t.Error("SetAsync without a context: accepted")
	}
	if err := rt.SetAsync("g", func(ctx context.Context, p *player) int { return p.Gold }); err != nil {
		t.Fatalf("SetAsync with a host struct: %v", err)
	}
}

type player struct{ Gold int }
