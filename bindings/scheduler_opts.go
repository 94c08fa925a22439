package bindings

import (
	"fmt"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// taskOptions are the keys a task's options table may have; a task file's
// table has name, expression and handle besides (read by readTaskFile).
var (
	taskOptions = runtime.NewOptSpec(
		runtime.Opt{Name: "timezone", Kind: runtime.OptString},
		runtime.Opt{Name: "distributed", Kind: runtime.OptBoolean},
		runtime.Opt{Name: "lock_ttl", Kind: runtime.OptMillis, Min: 1},
		runtime.Opt{Name: "max_retries", Kind: runtime.OptWhole, Min: 0, Max: 1e9},
		runtime.Opt{Name: "retry_delay", Kind: runtime.OptMillis, Min: 0},
		runtime.Opt{Name: "on_error", Kind: runtime.OptFunction},
		runtime.Opt{Name: "overlap", Kind: runtime.OptString},
		runtime.Opt{Name: "catch_up", Kind: runtime.OptMillis, Min: 0},
		runtime.Opt{Name: "on_redis_down", Kind: runtime.OptString},
	)
	taskFileOptions = runtime.NewOptSpec(
		runtime.Opt{Name: "name", Kind: runtime.OptAny},
		runtime.Opt{Name: "expression", Kind: runtime.OptAny},
		runtime.Opt{Name: "handle", Kind: runtime.OptAny},
	).With(taskOptions.Opts()...)
)

// taskOpts are a task's options as Lua gave them.
type taskOpts struct {
	opts    scheduler.Options
	onError *lua.LFunction
}

// parseTaskOpts reads the options of a task from t (nil: the defaults)
// with spec, starting from the Engine's defaults (the scheduler config).
// bad raises an error about the options; it does not return.
func parseTaskOpts(defaults scheduler.Options, t *lua.LTable, spec *runtime.OptSpec, bad func(msg string)) taskOpts {
	o := taskOpts{opts: defaults}
	if t == nil {
		return o
	}
	fail := func(format string, v ...any) { bad(fmt.Sprintf(format, v...)) }
	runtime.ReadOptions(t, spec, bad, func(key string, v lua.LValue) {
		switch key {
		case "timezone":
			o.opts.Timezone = v.String()
			if err := checkTimezone(o.opts.Timezone); err != "" {
				fail("%s", err)
			}
		case "distributed":
			o.opts.Distributed = v == lua.LTrue
		case "lock_ttl":
			o.opts.LockTTL = runtime.Millis(v)
		case "max_retries":
			o.opts.MaxRetries = int(v.(lua.LNumber))
		case "retry_delay":
			o.opts.RetryDelay = runtime.Millis(v)
		case "catch_up":
			o.opts.CatchUp = runtime.Millis(v)
		case "on_error":
			o.onError = v.(*lua.LFunction)
		case "overlap":
			if s := v.String(); s != string(scheduler.OverlapSkip) && s != string(scheduler.OverlapAllow) {
				fail(`option overlap must be "skip" or "allow", got %q`, s)
			}
			o.opts.Overlap = scheduler.Overlap(v.String())
		case "on_redis_down":
			if s := v.String(); s != string(scheduler.RedisDownWait) && s != string(scheduler.RedisDownRunLocal) {
				fail(`option on_redis_down must be "wait" or "run_local", got %q`, s)
			}
			o.opts.OnRedisDown = scheduler.RedisDown(v.String())
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
