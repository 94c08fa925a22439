package benchutil

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
)

// LuaTasks runs n tasks in rt for d, each running setup once (w is its
// index) and then body in a loop (k counts its iterations), and returns the
// total iterations. Each task reads the clock every batch iterations (1 for
// Redis calls; more where body costs about as much as reading the clock).
func LuaTasks(rt *shieldglobal.Runtime, n, batch int, d time.Duration, setup, body string) int {
	src := fmt.Sprintf(`
		local n, ms, batch = %d, %d, %d
		local total, running = 0, n
		for w = 1, n do
			shield.spawn(function()
				%s
				local deadline = shield.now_ms() + ms
				local k = 0
				while k %% batch ~= 0 or shield.now_ms() < deadline do %s; k = k + 1 end
				total = total + k
				running = running - 1
			end)
		end
		while running > 0 do shield.sleep(5) end
		result = total`, n, d.Milliseconds(), batch, setup, body)
	if err := rt.RunString(src, "tasks.lua"); err != nil {
		Fatalf("tasks: %v", err)
	}
	var total int
	rt.Do(func(L *lua.LState) error { total = int(lua.LVAsNumber(L.GetGlobal("result"))); return nil })
	return total
}

// Goroutines runs op(w, i) in n goroutines for d (w the goroutine, i its
// count so far) and returns how many ops ran; each goroutine reads the
// clock every batch ops, as LuaTasks does.
func Goroutines(n, batch int, d time.Duration, op func(w, i int)) int {
	var total atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := 0
			for k%batch != 0 || time.Now().Before(deadline) {
				op(w, k)
				k++
			}
			total.Add(int64(k))
		}()
	}
	wg.Wait()
	return int(total.Load())
}

// LuaLoopNs runs body n times in one Lua for loop on rt and returns the
// wall time per iteration (ns).
func LuaLoopNs(rt *shieldglobal.Runtime, body string, n int) float64 {
	start := time.Now()
	if err := rt.RunString("for i = 1, "+strconv.Itoa(n)+" do "+body+" end", "loop.lua"); err != nil {
		Fatalf("loop: %v", err)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}
