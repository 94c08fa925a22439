package bindings

import (
	"fmt"
	"math"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/scheduler"
)

// schedOptionNames are the keys a task's options table may have.
var schedOptionNames = []string{"timezone", "distributed", "lock_ttl", "max_retries", "retry_delay",
	"on_error", "overlap", "catch_up", "on_redis_down"}

// taskOpts are a task's options as Lua gave them.
type taskOpts struct {
	opts    scheduler.Options
	onError *lua.LFunction
}

// parseTaskOpts reads the options of a task from t (nil: the defaults),
// starting from the Engine's defaults (the scheduler config). skip lists
// keys that belong to the caller (a task file's name, expression, handle).
// bad raises an error about the options; it does not return.
func parseTaskOpts(defaults scheduler.Options, t *lua.LTable, skip map[string]bool, bad func(msg string)) taskOpts {
	o := taskOpts{opts: defaults}
	if t == nil {
		return o
	}
	fail := func(format string, v ...any) { bad(fmt.Sprintf(format, v...)) }
	millis := func(key string, v lua.LValue, positive bool) time.Duration {
		f, ok := v.(lua.LNumber)
		if !ok {
			fail("option %s: number of milliseconds expected, got %s", key, v.Type())
		}
		x := float64(f)
		if x != x || x > 1e15 || x < 0 || (positive && x <= 0) {
			want := ">= 0"
			if positive {
				want = "> 0"
			}
			fail("option %s must be %s milliseconds, got %s", key, want, f.String())
		}
		return time.Duration(math.Ceil(x)) * time.Millisecond
	}
	str := func(key string, v lua.LValue) string {
		s, ok := v.(lua.LString)
		if !ok {
			fail("option %s: string expected, got %s", key, v.Type())
		}
		return string(s)
	}
	t.ForEach(func(k, v lua.LValue) {
		key, _ := k.(lua.LString)
		if skip[string(key)] {
			return
		}
		switch string(key) {
		case "timezone":
			o.opts.Timezone = str("timezone", v)
			if err := checkTimezone(o.opts.Timezone); err != "" {
				fail("%s", err)
			}
		case "distributed":
			bv, ok := v.(lua.LBool)
			if !ok {
				fail("option distributed: boolean expected, got %s", v.Type())
			}
			o.opts.Distributed = bool(bv)
		case "lock_ttl":
			o.opts.LockTTL = millis("lock_ttl", v, true)
		case "max_retries":
			f, ok := v.(lua.LNumber)
			if !ok || float64(f) < 0 || float64(f) != math.Floor(float64(f)) || float64(f) > 1e9 {
				fail("option max_retries must be a whole number >= 0, got %s", describeValue(v))
			}
			o.opts.MaxRetries = int(f)
		case "retry_delay":
			o.opts.RetryDelay = millis("retry_delay", v, false)
		case "catch_up":
			o.opts.CatchUp = millis("catch_up", v, false)
		case "on_error":
			fn, ok := v.(*lua.LFunction)
			if !ok {
				fail("option on_error: function expected, got %s", v.Type())
			}
			o.onError = fn
		case "overlap":
			s := str("overlap", v)
			if s != string(scheduler.OverlapSkip) && s != string(scheduler.OverlapAllow) {
				fail(`option overlap %q: want "skip" or "allow"`, s)
			}
			o.opts.Overlap = scheduler.Overlap(s)
		case "on_redis_down":
			s := str("on_redis_down", v)
			if s != string(scheduler.RedisDownWait) && s != string(scheduler.RedisDownRunLocal) {
				fail(`option on_redis_down %q: want "wait" or "run_local"`, s)
			}
			o.opts.OnRedisDown = scheduler.RedisDown(s)
		default:
			fail("unknown option %s (known: %s)", describeValue(k), strings.Join(schedOptionNames, ", "))
		}
	})
	return o
}

// checkTimezone validates an IANA zone name as the Engine does ("" and
// "UTC" are UTC; the process's "Local" zone is refused), returning the
// error text or "".
func checkTimezone(tz string) string {
	switch tz {
	case "", "UTC":
		return ""
	case "Local":
		return `timezone "Local": name an IANA zone (the process's local zone differs between hosts)`
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return fmt.Sprintf("timezone %q: unknown time zone", tz)
	}
	return ""
}

// describeValue renders a Lua value in an error: strings quoted.
func describeValue(v lua.LValue) string {
	if s, ok := v.(lua.LString); ok {
		return fmt.Sprintf("%q", string(s))
	}
	return v.Type().String() + " " + v.String()
}

// invalidText is an engine ErrInvalid error without its package prefix:
// `cron "0 25 * * *": hour field: 25 out of range 0-23`.
func invalidText(err error) string {
	return strings.TrimPrefix(err.Error(), scheduler.ErrInvalid.Error()+": ")
}
