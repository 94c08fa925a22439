package bindings

import (
	"fmt"
	"math"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/ratelimit"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// rateLimiterType is the type name of both kinds of limiter object: they
// differ in their metatables only (see installRateLimiter).
const rateLimiterType = "shield.rate_limiter"

// Limiters backs shield.rate_limiter(): the Module's one limiter Set,
// shared by every runtime (a limiter is one per name and process).
type Limiters struct {
	Set *ratelimit.Set
	// Algorithm is rate_limiter.algorithm: what options that name neither
	// `algorithm` nor `sliding` get ("" means token_bucket).
	Algorithm ratelimit.Algorithm
}

// limiterBinding registers shield.rate_limiter in one runtime.
type limiterBinding struct {
	rt  *runtime.Runtime
	lim *Limiters
	// The two metatables. A token bucket's allow and remaining are plain Go
	// functions (they never block, and a Lua wrapper would double their
	// cost); a sliding window's methods are all blocking calls.
	tbMeta, swMeta *lua.LTable
}

// tbObj and swObj are what a limiter userdata holds.
type tbObj struct {
	l    *ratelimit.TokenBucket
	call string // "shield.rate_limiter(name)": prefixes runtime errors
}

type swObj struct {
	l    *ratelimit.SlidingWindow
	call string
}

var (
	luaRejected    lua.LValue = lua.LString(ratelimit.Rejected)
	luaUnavailable lua.LValue = lua.LString(ratelimit.Unavailable)
	luaTimeout     lua.LValue = lua.LString(ratelimit.Timeout)
)

func installRateLimiter(rt *runtime.Runtime, lib *lua.LTable, lim *Limiters) {
	L := rt.L
	b := &limiterBinding{rt: rt, lim: lim}
	type method struct {
		name string
		fn   lua.LGFunction
	}
	meta := func(plain, blocking []method) *lua.LTable {
		mt := L.NewTable()
		mt.RawSetString("__name", lua.LString(rateLimiterType))
		methods := L.NewTable()
		for _, m := range plain {
			methods.RawSetString(m.name, L.NewFunction(m.fn))
		}
		for _, m := range blocking {
			methods.RawSetString(m.name, rt.Blocking(m.fn))
		}
		runtime.SetMethods(L, mt, methods)
		mt.RawSetString("__tostring", L.NewFunction(b.tostring))
		return mt
	}
	b.tbMeta = meta(
		[]method{{"allow", b.tbAllow}, {"remaining", b.tbRemaining}, {"stats", b.stats}, {"name", b.name}},
		[]method{{"wait", b.tbWait}})
	b.swMeta = meta(
		[]method{{"stats", b.stats}, {"name", b.name}},
		[]method{{"allow", b.swAllow}, {"remaining", b.swRemaining}, {"wait", b.swWait}})
	lib.RawSetString("rate_limiter", L.NewFunction(b.newLimiter))
}

// ---- construction and options

var limiterOptions = runtime.NewOptSpec(
	runtime.Opt{Name: "algorithm", Kind: runtime.OptString},
	runtime.Opt{Name: "burst", Kind: runtime.OptNumber},
	runtime.Opt{Name: "max_requests", Kind: runtime.OptWhole, Min: 1, Max: maxCount},
	runtime.Opt{Name: "rate", Kind: runtime.OptNumber},
	runtime.Opt{Name: "sliding", Kind: runtime.OptBoolean},
	runtime.Opt{Name: "window", Kind: runtime.OptMillis, Min: 1, Max: float64(runtime.MaxSleep)},
)

// maxCount bounds request counts and max_requests: integers a Lua number
// holds exactly.
const maxCount = 1 << 53

// shield.rate_limiter(name, opts) -> limiter. opts is { rate, burst } (a
// token bucket) or { window, max_requests, sliding = true } (a sliding
// window); `algorithm` names one explicitly, and without it or `sliding`
// the config's rate_limiter.algorithm decides. burst defaults to rate (at
// least 1).
func (b *limiterBinding) newLimiter(L *lua.LState) int {
	a := runtime.ArgsOf(L, "shield", "rate_limiter")
	name := a.Name(1, "name")
	o := b.parseOpts(a, 2)
	l, err := b.lim.Set.Limiter(name, o)
	if err != nil {
		// A bad name, or the name taken with other options: misuse.
		msg := err.Error()
		for _, sentinel := range []error{ratelimit.ErrInvalid, ratelimit.ErrConflict} {
			msg = strings.TrimPrefix(msg, sentinel.Error()+": ")
		}
		runtime.Raise(L, "shield.rate_limiter: %s", msg)
	}
	ud := L.NewUserData()
	call := rateLimiterType + "(" + name + ")"
	switch l := l.(type) {
	case *ratelimit.TokenBucket:
		ud.Value, ud.Metatable = &tbObj{l: l, call: call}, b.tbMeta
	case *ratelimit.SlidingWindow:
		ud.Value, ud.Metatable = &swObj{l: l, call: call}, b.swMeta
	}
	L.Push(ud)
	return 1
}

// parseOpts reads the options table at n and has the core resolve the
// algorithm (ratelimit.Resolve). Every check names the option; the core
// checks the same rules again.
func (b *limiterBinding) parseOpts(a runtime.Args, n int) ratelimit.Options {
	if a.L.Get(n) == lua.LNil {
		a.TypeError(n, "table")
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) && x < math.MaxFloat64 }
	var o ratelimit.Options
	var algorithm string
	var sliding lua.LValue = lua.LNil
	a.Options(n, limiterOptions, func(key string, v lua.LValue) {
		f, _ := v.(lua.LNumber)
		switch key {
		case "rate":
			if o.Rate = float64(f); !(o.Rate > 0) || !finite(o.Rate) {
				a.BadOption(n, key, "must be a finite number > 0 (tokens per second), got %s", runtime.NumberText(o.Rate))
			}
		case "burst":
			if o.Burst = float64(f); !(o.Burst >= 1) || !finite(o.Burst) {
				a.BadOption(n, key, "must be a finite number >= 1, got %s", runtime.NumberText(o.Burst))
			}
		case "window":
			o.Window = time.Duration(float64(f) * float64(time.Millisecond))
		case "max_requests":
			o.MaxRequests = int64(f)
		case "sliding":
			sliding = v
		case "algorithm":
			if algorithm = v.String(); algorithm != config.AlgorithmTokenBucket && algorithm != config.AlgorithmSlidingWindow {
				a.BadOption(n, key, "must be %q or %q, got %q", config.AlgorithmTokenBucket, config.AlgorithmSlidingWindow, algorithm)
			}
		}
	})

	// How the options combine (the algorithm, what belongs to it, burst's
	// default) is the core's.
	g := ratelimit.Given{Rate: o.Rate, Burst: o.Burst, Window: o.Window, MaxRequests: o.MaxRequests,
		Algorithm: ratelimit.Algorithm(algorithm)}
	if sliding != lua.LNil {
		on := sliding == lua.LTrue
		g.Sliding = &on
	}
	o, err := ratelimit.Resolve(g, b.lim.Algorithm)
	if err != nil {
		a.Bad(n, err.Error())
	}
	return o
}

// ---- arguments

// badSelf raises the error of a method called without its limiter (with
// '.' instead of ':', or on something else).
func badSelf(L *lua.LState, fn string) {
	a := runtime.ArgsOf(L, rateLimiterType, fn)
	a.Bad(1, rateLimiterType+" expected, got "+a.Got(1)+" (call it with ':')")
}

// tb returns the token bucket the method was called on. A pointer
// comparison of the metatable: no allocation, no table lookup.
func (b *limiterBinding) tb(L *lua.LState, fn string) *tbObj {
	if ud, ok := L.Get(1).(*lua.LUserData); ok && ud.Metatable == lua.LValue(b.tbMeta) {
		o, ok := ud.Value.(*tbObj)
		if !ok {
			badSelf(L, fn)
		}
		// The bucket is process memory, no Op: the module's end is checked
		// here (the sliding window's Ops fail with it by themselves).
		if err := b.rt.ModuleClosed(); err != nil {
			runtime.Raise(L, "%s:%s: %s", o.call, fn, err.Error())
		}
		return o
	}
	badSelf(L, fn)
	return nil
}

func (b *limiterBinding) sw(L *lua.LState, fn string) *swObj {
	if ud, ok := L.Get(1).(*lua.LUserData); ok && ud.Metatable == lua.LValue(b.swMeta) {
		if o, ok := ud.Value.(*swObj); ok {
			return o
		}
	}
	badSelf(L, fn)
	return nil
}

// key reads the key at 2: a non-empty string.
func limiterKey(L *lua.LState, fn string) string {
	if s, ok := L.Get(2).(lua.LString); ok && s != "" {
		return string(s)
	}
	runtime.ArgsOf(L, rateLimiterType, fn).Key(2) // raises with the right message
	return ""
}

// count reads the optional request count at i: an integer >= 1 (1 when
// absent). The core allows n <= 0 without taking anything, which is never
// what a script meant.
func count(L *lua.LState, fn string, i int) int {
	v := L.Get(i)
	if v == lua.LNil {
		return 1
	}
	f, ok := v.(lua.LNumber)
	if !ok {
		runtime.ArgsOf(L, rateLimiterType, fn).TypeError(i, "number")
	}
	if !(f >= 1) || f != lua.LNumber(math.Trunc(float64(f))) || f > maxCount {
		runtime.ArgsOf(L, rateLimiterType, fn).Bad(i, "n must be an integer >= 1, got "+f.String())
	}
	return int(f)
}

// timeout reads wait's timeout_ms at 3: a number of milliseconds >= 0.
func timeout(L *lua.LState, fn string) time.Duration {
	a := runtime.ArgsOf(L, rateLimiterType, fn)
	ms := a.Num(3)
	if !(ms >= 0) || ms > runtime.MaxSleep {
		a.Bad(3, fmt.Sprintf("timeout_ms must be between 0 and %.0f, got %s", float64(runtime.MaxSleep), lua.LNumber(ms).String()))
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// ---- token bucket: decided in local memory, never blocking

// l:allow(key [, n]) -> true, or false, "rejected". The hot path: no
// allocation, no Lua wrapper, no Redis.
func (b *limiterBinding) tbAllow(L *lua.LState) int {
	o := b.tb(L, "allow")
	key := limiterKey(L, "allow")
	n := 1
	if L.GetTop() >= 3 {
		n = count(L, "allow", 3)
	}
	if ok, _ := o.l.Allow(key, n); ok {
		L.Push(lua.LTrue)
		return 1
	}
	L.Push(lua.LFalse)
	L.Push(luaRejected)
	return 2
}

// l:remaining(key) -> tokens this process's bucket of key holds now.
func (b *limiterBinding) tbRemaining(L *lua.LState) int {
	o := b.tb(L, "remaining")
	L.Push(lua.LNumber(o.l.Remaining(limiterKey(L, "remaining"))))
	return 1
}

// l:wait(key, timeout_ms [, n]) -> true, or false, "timeout". Waits in local
// memory (timers; no Redis) and blocks only the calling task.
func (b *limiterBinding) tbWait(L *lua.LState) int {
	o := b.tb(L, "wait")
	key := limiterKey(L, "wait")
	d := timeout(L, "wait")
	n := count(L, "wait", 4)
	if float64(n) > o.l.Options().Burst {
		runtime.ArgsOf(L, rateLimiterType, "wait").Bad(4, fmt.Sprintf("n = %d can never be granted: it exceeds burst (%v)", n, o.l.Options().Burst))
	}
	if o.l.Take(key, n) {
		L.Push(lua.LTrue)
		return 1
	}
	if d <= 0 {
		L.Push(lua.LFalse)
		L.Push(luaTimeout)
		return 2
	}
	return b.rt.Block(L, o.call+":wait", func(w *runtime.Wait) func() {
		w.EndOnClose()
		cancel := o.l.Wait(key, n, d, func(ok bool, _ ratelimit.Reason) {
			w.Complete(func() ([]lua.LValue, error) { return waited(ok), nil })
		})
		return func() { cancel() }
	})
}

func waited(ok bool) []lua.LValue {
	if ok {
		return []lua.LValue{lua.LTrue}
	}
	return []lua.LValue{lua.LFalse, luaTimeout}
}

// ---- sliding window: one Redis script per decision

// l:allow(key [, n]) -> true, or false, "rejected" | "unavailable": one
// script call in this loop turn's pipeline (inline on memory). The op's
// error goes through Outcome, so an unreachable Redis is the "unavailable"
// decision; what Outcome still returns (a bad reply) raises. The call
// answers within rate_limiter.timeout (swTry).
func (b *limiterBinding) swAllow(L *lua.LState) int {
	o := b.sw(L, "allow")
	key := limiterKey(L, "allow")
	n := 1
	if L.GetTop() >= 3 {
		n = count(L, "allow", 3)
	}
	name := o.call + ":allow"
	rt := b.rt
	result := func(d ratelimit.Decision, err error) runtime.Result {
		return func() ([]lua.LValue, error) {
			switch {
			case err != nil:
				return nil, err
			case d.Allowed:
				return []lua.LValue{lua.LTrue}, nil
			case d.Reason == ratelimit.Unavailable:
				return []lua.LValue{lua.LFalse, luaUnavailable}, nil
			}
			return []lua.LValue{lua.LFalse, luaRejected}, nil
		}
	}
	op := o.l.AllowOp(key, n)
	if op.Kind() != store.KindRedis {
		return runtime.RunOutcome(rt, L, name, op, func(_ *lua.LState, d ratelimit.Decision, err error) ([]lua.LValue, error) {
			return result(o.l.Outcome(d, err))()
		})
	}
	return rt.Block(L, name, func(w *runtime.Wait) func() {
		swTry(rt, w, o.l, key, op, func(d ratelimit.Decision, err error) { w.Complete(result(d, err)) })
		return nil
	})
}

// swTry runs op, an AllowOp of l for key, in this loop turn's pipeline and
// calls done on the loop once with its Outcome — or, when Redis has not
// answered within l.Timeout(), with the Unavailable decision then. The
// pipeline's own deadline is the client's (global.redis.read_timeout,
// seconds), too long for a limiter that must answer "unavailable" in well
// under a second; a reply that comes after done was called is only counted
// (Unanswered).
func swTry(rt *runtime.Runtime, w *runtime.Wait, l *ratelimit.SlidingWindow, key string, op *store.Op[ratelimit.Decision], done func(ratelimit.Decision, error)) {
	if op.Kind() != store.KindRedis {
		runtime.Go(rt, op, func(d ratelimit.Decision, err error) { done(l.Outcome(d, err)) })
		return
	}
	settled := false // loop only
	runtime.Go(rt, op, func(d ratelimit.Decision, err error) {
		if !settled {
			settled = true
			done(l.Outcome(d, err))
		}
	})
	timeout := l.Timeout()
	w.After(timeout, func() {
		if !settled {
			settled = true
			done(l.Unanswered(key, timeout), nil)
		}
	})
}

// l:remaining(key) -> how many more requests the window takes now. Raises
// when Redis cannot be reached (there is no decision to degrade to).
func (b *limiterBinding) swRemaining(L *lua.LState) int {
	o := b.sw(L, "remaining")
	return runtime.Run(b.rt, L, o.call+":remaining", o.l.RemainingOp(limiterKey(L, "remaining")), func(_ *lua.LState, n int64) []lua.LValue {
		return []lua.LValue{lua.LNumber(n)}
	})
}

// l:wait(key, timeout_ms [, n]) -> true, or false, "timeout" |
// "unavailable". Retries when the refusal says enough requests have left
// the window (Decision.RetryAfter), sleeping in between; a retry that could
// not succeed before the deadline is not sent. Redis unreachable ends the
// wait at once with "unavailable" (the degradation table: a sliding window
// cannot count without Redis).
func (b *limiterBinding) swWait(L *lua.LState) int {
	o := b.sw(L, "wait")
	key := limiterKey(L, "wait")
	d := timeout(L, "wait")
	n := count(L, "wait", 4)
	if int64(n) > o.l.Options().MaxRequests {
		runtime.ArgsOf(L, rateLimiterType, "wait").Bad(4, fmt.Sprintf("n = %d can never be granted: it exceeds max_requests (%d)", n, o.l.Options().MaxRequests))
	}
	rt := b.rt
	name := o.call + ":wait"
	// The tries, the sleeps between them and the deadline are
	// ratelimit.SlidingWindow.Wait's; this only runs its tries in the loop's
	// pipeline and returns its outcome.
	return rt.Block(L, name, func(w *runtime.Wait) func() {
		w.EndOnClose()
		over := false // loop only
		cancel := o.l.Wait(key, n, d, func(done func(ratelimit.Decision, error)) {
			w.Post(func() { // the core's timers call from their goroutines
				if !over {
					swTry(rt, w, o.l, key, o.l.AllowOp(key, n), done)
				}
			})
		}, func(dec ratelimit.Decision, err error) {
			w.Post(func() {
				if over {
					return
				}
				over = true
				w.Complete(func() ([]lua.LValue, error) {
					if err != nil {
						return nil, err
					}
					return windowWaited(dec), nil
				})
			})
		})
		return func() { over = true; cancel() }
	})
}

// windowWaited is the result of a sliding window's wait: true, or false
// and why ("unavailable" or "timeout").
func windowWaited(d ratelimit.Decision) []lua.LValue {
	switch {
	case d.Allowed:
		return []lua.LValue{lua.LTrue}
	case d.Reason == ratelimit.Unavailable:
		return []lua.LValue{lua.LFalse, luaUnavailable}
	}
	return waited(false)
}

// ---- both

// l:stats() -> this process's counters of the limiter.
func (b *limiterBinding) stats(L *lua.LState) int {
	st := b.limiter(L, "stats").Stats()
	t := L.CreateTable(0, 9)
	t.RawSetString("name", lua.LString(st.Name))
	t.RawSetString("algorithm", lua.LString(st.Algorithm))
	t.RawSetString("active", lua.LNumber(st.ActiveKeys))
	t.RawSetString("allowed", lua.LNumber(st.Allowed))
	t.RawSetString("rejected", lua.LNumber(st.Rejected))
	t.RawSetString("unavailable", lua.LNumber(st.Unavailable))
	t.RawSetString("degraded", lua.LNumber(st.Degraded))
	t.RawSetString("rejected_today", lua.LNumber(st.RejectedToday))
	t.RawSetString("processes", lua.LNumber(st.Processes))
	L.Push(t)
	return 1
}

// l:name() -> the limiter's name.
func (b *limiterBinding) name(L *lua.LState) int {
	L.Push(lua.LString(b.limiter(L, "name").Name()))
	return 1
}

func (b *limiterBinding) limiter(L *lua.LState, fn string) ratelimit.Limiter {
	if ud, ok := L.Get(1).(*lua.LUserData); ok {
		switch o := ud.Value.(type) {
		case *tbObj:
			if ud.Metatable == lua.LValue(b.tbMeta) {
				return o.l
			}
		case *swObj:
			if ud.Metatable == lua.LValue(b.swMeta) {
				return o.l
			}
		}
	}
	badSelf(L, fn)
	return nil
}

func (b *limiterBinding) tostring(L *lua.LState) int {
	l := b.limiter(L, "__tostring")
	o := l.Options()
	if o.Algorithm == ratelimit.AlgorithmSlidingWindow {
		L.Push(lua.LString(fmt.Sprintf("%s(%q, window=%d, max_requests=%d)", rateLimiterType, l.Name(), o.Window.Milliseconds(), o.MaxRequests)))
	} else {
		L.Push(lua.LString(fmt.Sprintf("%s(%q, rate=%v, burst=%v)", rateLimiterType, l.Name(), o.Rate, o.Burst)))
	}
	return 1
}
