package shieldglobal

// Virtual time for spec files (docs/testing.md, "Virtual time"): a file run
// with SpecOptions.VirtualTime, or whose first line is the marker
// "--!virtual-time", runs on a Module of its own on the memory backend
// whose clock (a testclock.Clock) moves only when the spec's runtime has
// nothing to do: then it jumps to the earliest pending timer. Every
// capability of the memory backend, the scheduler and the runtime's timers
// read that clock, so a spec waits out a week in milliseconds, the same way
// every run.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/internal/clock"
	"github.com/shieldrt/shieldglobal/internal/testclock"
)

// ErrVirtualTimeRedis is the error of virtual time asked of a Module on
// Redis: Redis keeps its own time (TTLs, TIME), which no clock of ours moves.
var ErrVirtualTimeRedis = errors.New("shield: virtual time needs the memory backend (global.redis is configured: Redis keeps its own time); run the spec without global.redis")

// VirtualTimeMarker, as the first line of a spec file, runs that file in
// virtual time.
const VirtualTimeMarker = "--!virtual-time"

// schedClock is the scheduler Engine's clock: nil (the system clock, on a
// timerfd where the kernel allows) unless the module runs on a virtual one.
func (m *Module) schedClock() scheduler.Clock {
	if m.virtual {
		return m.clock
	}
	return nil
}

// runtimeClock is the clock of the runtimes' timers (shield.sleep, pop
// and wait timeouts): the module's, except that on a virtual clock they
// fire after the module's own timers due at the same instant (Late).
func (m *Module) runtimeClock() clock.Clock {
	if l, ok := m.clock.(interface{ Late() clock.Clock }); ok {
		return l.Late()
	}
	return m.clock
}

// wantsVirtualTime reports whether path's first line is the marker.
func wantsVirtualTime(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false // the load reports it
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	return strings.TrimSpace(line) == VirtualTimeMarker
}

// vtime is the virtual clock of one spec file and what it waits for before
// each jump.
type vtime struct {
	clk   *testclock.Clock
	m     *Module      // the file's own module, on clk
	busy  atomic.Int32 // Go-run work under way (rank resets)
	stop  chan struct{}
	ended chan struct{}
}

// newVirtualModule builds a module like m's on a fresh virtual clock.
// Errors: ErrVirtualTimeRedis when m runs on Redis, and New's.
func (m *Module) newVirtualModule() (*vtime, error) {
	if m.backend == BackendRedis {
		return nil, ErrVirtualTimeRedis
	}
	v := &vtime{clk: testclock.New(), stop: make(chan struct{}), ended: make(chan struct{})}
	busy := func() func() {
		v.busy.Add(1)
		return func() { v.busy.Add(-1) }
	}
	vm, err := New(m.cfg, WithLogger(m.log), withClock(v.clk, busy))
	if err != nil {
		return nil, err
	}
	v.m = vm
	return v, nil
}

// drive moves the clock for rt until halt: whenever rt, the scheduler and
// the Go-run work are all quiet, to the earliest pending timer (firing the
// timers due then, in deadline order). It polls: rt posts from many
// goroutines and parks only through them.
func (v *vtime) drive(rt *Runtime) {
	defer close(v.ended)
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	const minPoll, maxPoll = 50 * time.Microsecond, 5 * time.Millisecond
	poll := minPoll
	for {
		if v.step(rt) {
			poll = minPoll
			select {
			case <-v.stop:
				return
			default:
			}
			continue
		}
		// Backing off: a file whose tasks wait on nothing a timer ends
		// polls 200 times a second until its timeout, not 20 000.
		idle.Reset(poll)
		poll = min(2*poll, maxPoll)
		select {
		case <-v.stop:
			return
		case <-idle.C:
		}
	}
}

// step makes one jump if everything is quiet and reports whether it did.
func (v *vtime) step(rt *Runtime) bool {
	posts, quiet := rt.rt.Quiet()
	if !quiet || v.busy.Load() > 0 || (v.m.sched != nil && !v.m.sched.Quiet()) {
		return false
	}
	// Nothing may have happened since the first look (a scheduler run
	// handed to rt meanwhile, say).
	if again, still := rt.rt.Quiet(); !still || again != posts || v.busy.Load() > 0 {
		return false
	}
	// One timer at a time: of timers due at the same instant the one set
	// first fires first, and its effects settle before the next fires.
	// false: every task waits on something no timer ends.
	return v.clk.FireNext()
}

// halt stops drive and closes the module.
func (v *vtime) halt() {
	close(v.stop)
	<-v.ended
	v.m.Close()
}

// installTestTime sets shield.test in a spec's runtime: advance and
// set_time move a virtual clock (v), and raise a clear error without one
// (v nil). In virtual time os.time() and os.date() read the virtual clock
// too.
func installTestTime(L *lua.LState, v *vtime) error {
	L.SetGlobal("__shield_test_time_of", L.NewFunction(timeOf))
	L.SetGlobal("__shield_test_virtual", lua.LBool(v != nil))
	defer L.SetGlobal("__shield_test_time_of", lua.LNil)
	defer L.SetGlobal("__shield_test_virtual", lua.LNil)
	return L.DoString(testTimeLua)
}

// testTimeLua is shield.test's time functions, in Lua so they may block
// (they sleep in virtual time: every timer due on the way fires in order
// and its effects run before they return).
const testTimeLua = `
local shield = require("shield")
local time_of, virtual = __shield_test_time_of, __shield_test_virtual
local t = shield.test or {}
shield.test = t
local function need(name)
  if not virtual then
    error("shield.test." .. name .. " needs virtual time: run shield test --virtual-time, or make '` + VirtualTimeMarker + `' the file's first line", 3)
  end
end
-- shield.test.advance(ms): moves the clock ms forward.
function t.advance(ms)
  need("advance")
  if type(ms) ~= "number" or ms ~= ms or ms < 0 then
    error("shield.test: bad argument #1 to 'advance' (milliseconds >= 0 expected, got " .. tostring(ms) .. ")", 2)
  end
  shield.sleep(ms)
end
-- shield.test.set_time(t): moves the clock forward to t: Unix ms, an RFC 3339
-- string ("2025-03-10T00:00:00Z") or a table of UTC fields (os.time's).
function t.set_time(when)
  need("set_time")
  local target, err = time_of(when)
  if not target then error("shield.test: bad argument #1 to 'set_time' (" .. err .. ")", 2) end
  local now = shield.now_ms()
  if target < now then
    error(string.format("shield.test: set_time cannot go back in time (now %d ms, asked %d ms)", now, target), 2)
  end
  shield.sleep(target - now)
end
function t.virtual() return virtual end
if virtual then
  local now_ms, otime, odate, floor = shield.now_ms, os.time, os.date, math.floor
  os.time = function(tbl)
    if tbl == nil then return floor(now_ms() / 1000) end
    return otime(tbl)
  end
  os.date = function(fmt, tm)
    if tm == nil then tm = floor(now_ms() / 1000) end
    return odate(fmt, tm)
  end
end
`

// time_of(t) -> Unix ms | nil, reason: set_time's argument.
func timeOf(L *lua.LState) int {
	fail := func(msg string) int {
		L.Push(lua.LNil)
		L.Push(lua.LString(msg))
		return 2
	}
	switch x := L.Get(1).(type) {
	case lua.LNumber:
		if x != x || float64(x) < 0 || float64(x) > 1e15 {
			return fail("Unix milliseconds expected, got " + x.String())
		}
		L.Push(x)
	case lua.LString:
		t, err := time.Parse(time.RFC3339Nano, string(x))
		if err != nil {
			return fail(fmt.Sprintf("an RFC 3339 time such as \"2025-03-10T00:00:00Z\" expected, got %q", string(x)))
		}
		L.Push(lua.LNumber(t.UnixMilli()))
	case *lua.LTable:
		field := func(name string, def int) (int, bool) {
			v := x.RawGetString(name)
			if v == lua.LNil {
				return def, def >= 0
			}
			n, ok := v.(lua.LNumber)
			return int(n), ok
		}
		var f [6]int
		for i, k := range []struct {
			name string
			def  int
		}{{"year", -1}, {"month", -1}, {"day", -1}, {"hour", 0}, {"min", 0}, {"sec", 0}} {
			n, ok := field(k.name, k.def)
			if !ok {
				return fail("a table with numbers year, month, day (hour, min, sec optional; UTC) expected; " + k.name + " is missing or not a number")
			}
			f[i] = n
		}
		L.Push(lua.LNumber(time.Date(f[0], time.Month(f[1]), f[2], f[3], f[4], f[5], 0, time.UTC).UnixMilli()))
	default:
		return fail("Unix milliseconds, an RFC 3339 string or a table of UTC fields expected, got " + x.Type().String())
	}
	return 1
}
