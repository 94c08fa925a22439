package runtime

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

type player struct {
	UID  string
	Gold int
}

func (p *player) Give(n int) int { p.Gold += n; return p.Gold }

func TestCallRunsAScriptFunctionAsATask(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `
		handlers = {}
		function handlers.on_login(uid, level, vip, items, p)
			shield.sleep(1) -- a task: it may block
			return "welcome " .. uid, level * 2, not vip, items[2], p.UID, p:Give(5)
		end`)
	p := &player{UID: "u1", Gold: 10}
	vals, err := rt.Call(context.Background(), "handlers.on_login", "u1", 7, true, []string{"a", "b"}, p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"welcome u1", "14", "false", "b", "u1", "15"}
	if len(vals) != len(want) {
		t.Fatalf("results %v", vals)
	}
	for i, w := range want {
		if vals[i].String() != w {
			t.Fatalf("result %d = %v, want %s", i+1, vals[i], w)
		}
	}
	if p.Gold != 15 {
		t.Fatalf("the proxy did not reach the Go value: %+v", p)
	}
}

func TestCallErrors(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, "function fails() shield.sleep(1); error('no gold') end\nnot_a_function = 5")
	_, err := rt.Call(context.Background(), "fails")
	var te *TaskError
	if !errors.As(err, &te) || !strings.Contains(te.Message, "no gold") || !strings.Contains(te.Traceback, "stack traceback:") {
		t.Fatalf("want a TaskError with a traceback, got %v", err)
	}
	for _, fn := range []any{"missing", "not_a_function", "a.b.c", 42} {
		if _, err := rt.Call(context.Background(), fn); err == nil || errors.As(err, &te) {
			t.Fatalf("%v: got %v", fn, err)
		}
	}
	var f *lua.LFunction
	_ = rt.Do(func(L *lua.LState) error {
		f, _ = L.LoadString(`return ...`)
		return nil
	})
	vals, err := rt.Call(context.Background(), f, "x")
	if err != nil || len(vals) != 1 || vals[0].String() != "x" {
		t.Fatalf("calling an LFunction: %v %v", vals, err)
	}
}

// A cancelled Call returns at once; its task is told (interrupted), not
// leaked, also when it never yields.
func TestCallCancellation(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `
		function nap() shield.sleep(60000); reached = true end
		function spin() while true do end end`)
	for _, fn := range []string{"nap", "spin"} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		_, err := rt.Call(ctx, fn)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
			t.Fatalf("%s: %v after %v", fn, err, time.Since(start))
		}
		waitIdle(t, rt)
	}
	if global(t, rt, "reached") != lua.LNil {
		t.Fatal("the cancelled task went on")
	}
}

func waitIdle(t *testing.T, rt *Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := rt.Wait(ctx); err != nil {
		t.Fatalf("the runtime did not become idle: %v", err)
	}
}

func TestCallFromManyGoroutines(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `function add(a, b) shield.sleep(0); return a + b end`)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				vals, err := rt.Call(context.Background(), "add", g, i)
				if err != nil || len(vals) != 1 || vals[0] != lua.LNumber(g+i) {
					errs <- fmt.Errorf("add(%d, %d) = %v %v", g, i, vals, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Go dispatches without a goroutine per call.
func TestGoIsAsynchronous(t *testing.T) {
	rt := newTestRuntime(t, nil)
	mustRun(t, rt, `function slow(n) shield.sleep(100); return n * 2 end`)
	before := goruntime.NumGoroutine()
	const n = 2000
	results := make(chan float64, n)
	for i := 0; i < n; i++ {
		rt.Go("slow", []any{i}, func(vals []lua.LValue, err error) {
			if err != nil {
				panic(err)
			}
			results <- float64(vals[0].(lua.LNumber))
		})
	}
	if grew := goruntime.NumGoroutine() - before; grew > 100 {
		t.Fatalf("%d goroutines for %d calls in flight", grew, n)
	}
	sum := 0.0
	for i := 0; i < n; i++ {
		sum += <-results
	}
	if sum != float64(n*(n-1)) {
		t.Fatalf("sum %v", sum)
	}
	rt.Close(time.Second)
	called := make(chan error, 1)
	rt.Go("slow", nil, func(_ []lua.LValue, err error) { called <- err })
	if err := <-called; !errors.Is(err, ErrClosed) {
		t.Fatalf("Go after Close: %v", err)
	}
}

func TestSetExposesGoValues(t *testing.T) {
	rt := newTestRuntime(t, nil)
	var gotCtx context.Context
	rewards := map[string]int{}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(rt.Set("give_reward", func(ctx context.Context, uid, item string) error {
		gotCtx = ctx
		if item == "" {
			return errors.New("no item")
		}
		rewards[uid+":"+item]++
		return nil
	}))
	must(rt.Set("lookup", func(uid string) (*player, bool) { return &player{UID: uid, Gold: 3}, true }))
	must(rt.Set("scores", []int{5, 6, 7}))
	must(rt.Set("config", map[string]string{"mode": "pvp"}))
	must(rt.Set("limit", 99))
	mustRun(t, rt, `
		give_reward("u1", "sword")
		local p, ok = lookup("u2")
		assert(ok and p.UID == "u2" and p.Gold == 3 and p:Give(2) == 5)
		assert(scores[2] == 6 and #scores == 3)
		assert(config.mode == "pvp" and limit == 99)
		local ok2, err = pcall(give_reward, "u1", "")
		assert(not ok2 and err:find("test.lua:7: give_reward: no item", 1, true), err)`)
	if rewards["u1:sword"] != 1 {
		t.Fatalf("rewards %v", rewards)
	}
	if gotCtx == nil || gotCtx == context.Background() {
		t.Fatal("the function did not get the runtime's context")
	}
	rt.Close(time.Second)
	if gotCtx.Err() == nil {
		t.Fatal("the runtime's context outlived the runtime")
	}
}
