package bindings

import (
	"fmt"
	"math"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

var lockOptionNames = []string{"ttl", "retry", "max_retries", "reentrant", "wait", "fair", "auto_extend", "extend_interval", "on_lost"}

// maxMillis bounds every duration option (about 31 700 years).
const maxMillis = 1e15

// lockOptions reads the options table at n (optional) into what core/lock
// resolves against the configured defaults. It checks types and ranges; the
// policy (max_ttl, an interval shorter than the ttl) is core/lock's.
func lockOptions(a runtime.Args, n int) (lock.Given, *lua.LFunction) {
	var g lock.Given
	if a.L.Get(n) == lua.LNil {
		return g, nil
	}
	t := a.Table(n)
	var onLost *lua.LFunction
	bad := func(msg string, v ...any) { a.Bad(n, fmt.Sprintf(msg, v...)) }
	number := func(key string, v lua.LValue) float64 {
		f, ok := v.(lua.LNumber)
		if !ok {
			bad("option %s: number expected, got %s", key, v.Type())
		}
		return float64(f)
	}
	millis := func(key string, v lua.LValue, min float64) *time.Duration {
		f := number(key, v)
		if f != f || math.IsInf(f, 0) || f < min || f > maxMillis {
			bad("option %s must be a finite number of milliseconds >= %v, got %s", key, min, numberText(f))
		}
		d := time.Duration(math.Ceil(f)) * time.Millisecond // 0.5 ms is 1 ms, never "none"
		return &d
	}
	boolean := func(key string, v lua.LValue) *bool {
		b, ok := v.(lua.LBool)
		if !ok {
			bad("option %s: boolean expected, got %s", key, v.Type())
		}
		x := bool(b)
		return &x
	}
	t.ForEach(func(k, v lua.LValue) {
		key, _ := k.(lua.LString)
		switch string(key) {
		case "ttl":
			g.TTL = millis("ttl", v, 1)
		case "retry":
			g.Retry = millis("retry", v, 1)
		case "wait":
			g.Wait = millis("wait", v, 0)
		case "extend_interval":
			g.ExtendInterval = millis("extend_interval", v, 1)
		case "max_retries":
			f := number("max_retries", v)
			if f != math.Floor(f) || f < 0 || f > math.MaxInt32 {
				bad("option max_retries must be a whole number >= 0 (0: unlimited), got %s", numberText(f))
			}
			m := int(f)
			g.MaxRetries = &m
		case "reentrant":
			g.Reentrant = boolean("reentrant", v)
		case "fair":
			g.Fair = boolean("fair", v)
		case "auto_extend":
			g.AutoExtend = boolean("auto_extend", v)
		case "on_lost":
			f, ok := v.(*lua.LFunction)
			if !ok {
				bad("option on_lost: function expected, got %s", v.Type())
			}
			onLost = f
		default:
			bad("unknown option %q (known: %s)", k.String(), strings.Join(lockOptionNames, ", "))
		}
	})
	return g, onLost
}

// numberText writes a number as Lua users read it: inf, -inf, nan, 1.5.
func numberText(f float64) string {
	switch {
	case f != f:
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return lua.LNumber(f).String()
}

// lockMillis reads an optional duration argument in ms (0 when absent).
func lockMillis(a runtime.Args, n int, what string) time.Duration {
	if a.L.Get(n) == lua.LNil {
		return 0
	}
	f := a.Num(n)
	if f != f || math.IsInf(f, 0) || f <= 0 || f > maxMillis {
		a.Bad(n, fmt.Sprintf("%s must be a finite number of milliseconds > 0, got %s", what, numberText(f)))
	}
	return time.Duration(math.Ceil(f)) * time.Millisecond
}
