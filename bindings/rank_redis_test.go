package bindings

import (
	"context"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/rank"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// The expected outcomes of a swap come back as values on Redis in every
// calling context runOutcome handles: a task (the op joins the turn's
// pipeline and the task yields), code outside any task (the loop waits),
// and where nothing may block (refused); backend failures raise.
func TestRankSwapOutcomesOnRedis(t *testing.T) {
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			prefix := testredis.Prefix(t)
			rt := newTestRuntime(t, &runtime.Services{Capabilities: []runtime.Capability{testRanks(rank.NewRedis(c, prefix), nil)}})
			mustRun(t, rt, `
				local r = shield.rank("b")
				r:mupdate({ a = 1, b = 2, c = 3 })
				local results, running = {}, 0
				for i = 1, 8 do -- concurrent tasks: their swaps share round trips
					running = running + 1
					shield.spawn(function()
						local x, y = r:swap("a", "ghost")
						assert(x == nil and y == "not_found", tostring(y))
						x, y = r:swap("a", "b", { expect = { a = 100, b = 2 } })
						assert(x == nil and y == "version_conflict", tostring(y))
						running = running - 1
					end)
				end
				while running > 0 do shield.sleep(1) end
				local sa, sb, v = r:swap("a", "c", { expect = { a = 1, c = 3 } })
				assert(sa == 3 and sb == 1 and v == 2, tostring(v))
				assert(r:count() == 3)`)

			err := rt.Do(func(L *lua.LState) error {
				return L.DoString(`
					local r = shield.rank("b")
					local x, why = r:swap("a", "ghost")
					assert(x == nil and why == "not_found")
					local sa, sb, v = r:swap("a", "c")
					assert(sa == 1 and sb == 3 and v == 3)
					outside = true`)
			})
			if err != nil || global(t, rt, "outside") != lua.LTrue {
				t.Fatalf("outside any task: %v", err)
			}

			err = run(t, rt, `table.sort({ 2, 1 }, function(x, y) shield.rank("b"):swap("a", "c"); return x < y end)`)
			if err == nil || !strings.Contains(err.Error(), "shield.rank:swap: cannot block here") {
				t.Fatalf("in a sort comparator: %v", err)
			}

			if err := c.Set(context.Background(), prefix+"rank:meta:{broken}", "not a hash", 0).Err(); err != nil {
				t.Fatal(err)
			}
			err = run(t, rt, `shield.rank("broken"):swap("a", "b")`)
			if err == nil || !strings.Contains(err.Error(), `test.lua:1: shield.rank:swap: rank: swap "broken"`) || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Fatalf("a Redis error: %v", err)
			}
			err = run(t, rt, `shield.rank("broken"):update("a", 1)`)
			if err == nil || !strings.Contains(err.Error(), `test.lua:1: shield.rank:update: rank: update "broken"`) {
				t.Fatalf("a Redis error: %v", err)
			}
		})
	}
}

// On Redis a reset run goes to a goroutine of its own (run never blocks),
// archives the board as it was and clears it.
func TestRankResetOnRedis(t *testing.T) {
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			clk := &clock{t: time.Date(2024, 6, 1, 0, 0, 1, 0, time.UTC)}
			s := &fakeScheduler{}
			rt := newTestRuntime(t, &runtime.Services{Capabilities: []runtime.Capability{testRanks(rank.NewRedis(c, testredis.Prefix(t)), s)}})
			mustRun(t, rt, `
				m = shield.rank("monthly", { reset = "monthly" })
				m:mupdate({ a = 1, b = 2 })`)
			if err := s.fire(t, "rank:monthly:reset", clk.now()); err != nil {
				t.Fatal(err)
			}
			mustRun(t, rt, `
				assert(m:count() == 0)
				local a = m:archive("20240501")
				assert(#a == 2 and a[1].uid == "b" and a[1].score == 2 and a[1].rank == 1 and a[2].uid == "a")`)
		})
	}
}
