package bindings

import (
	"fmt"
	"math"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

var lockOptions = runtime.NewOptSpec(
	runtime.Opt{Name: "ttl", Kind: runtime.OptMillis, Min: 1},
	runtime.Opt{Name: "retry", Kind: runtime.OptMillis, Min: 1},
	runtime.Opt{Name: "max_retries", Kind: runtime.OptWhole, Min: 0},
	runtime.Opt{Name: "reentrant", Kind: runtime.OptBoolean},
	runtime.Opt{Name: "wait", Kind: runtime.OptMillis, Min: 0},
	runtime.Opt{Name: "fair", Kind: runtime.OptBoolean},
	runtime.Opt{Name: "auto_extend", Kind: runtime.OptBoolean},
	runtime.Opt{Name: "extend_interval", Kind: runtime.OptMillis, Min: 1},
	runtime.Opt{Name: "on_lost", Kind: runtime.OptFunction},
)

// maxMillis bounds every duration argument (about 31 700 years).
const maxMillis = runtime.MaxMillis

// readLockOptions reads the options table at n (optional) into what
// core/lock resolves against the configured defaults. It checks types and
// ranges; the policy (max_ttl, an interval shorter than the ttl) is
// core/lock's.
func readLockOptions(a runtime.Args, n int) (lock.Given, *lua.LFunction) {
	var g lock.Given
	var onLost *lua.LFunction
	millis := func(v lua.LValue) *time.Duration { d := runtime.Millis(v); return &d }
	boolean := func(v lua.LValue) *bool { b := v == lua.LTrue; return &b }
	a.Options(n, lockOptions, func(key string, v lua.LValue) {
		switch key {
		case "ttl":
			g.TTL = millis(v)
		case "retry":
			g.Retry = millis(v)
		case "wait":
			g.Wait = millis(v)
		case "extend_interval":
			g.ExtendInterval = millis(v)
		case "max_retries":
			m := int(v.(lua.LNumber))
			g.MaxRetries = &m
		case "reentrant":
			g.Reentrant = boolean(v)
		case "fair":
			g.Fair = boolean(v)
		case "auto_extend":
			g.AutoExtend = boolean(v)
		case "on_lost":
			onLost = v.(*lua.LFunction)
		}
	})
	return g, onLost
}

// lockMillis reads an optional duration argument in ms (0 when absent).
func lockMillis(a runtime.Args, n int, what string) time.Duration {
	if a.L.Get(n) == lua.LNil {
		return 0
	}
	f := a.Num(n)
	if f != f || math.IsInf(f, 0) || f <= 0 || f > maxMillis {
		a.Bad(n, fmt.Sprintf("%s must be a finite number of milliseconds > 0, got %s", what, runtime.NumberText(f)))
	}
	return time.Duration(math.Ceil(f)) * time.Millisecond
}
