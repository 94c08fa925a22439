package ratelimit

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Given are a limiter's options as a script gave them (the table of
// shield.rate_limiter): a zero field was not given. The binding has checked
// each value on its own (types, ranges); Resolve checks how they combine.
type Given struct {
	Rate, Burst float64
	Window      time.Duration
	MaxRequests int64
	Algorithm   Algorithm // "" when not given
	Sliding     *bool     // nil when not given
}

// optionError is an ErrInvalid whose text is only the rule broken, for the
// Lua argument error.
type optionError string

func (e optionError) Error() string { return string(e) }
func (optionError) Unwrap() error   { return ErrInvalid }

// Resolve picks the algorithm — g.Algorithm, else g.Sliding, else def (the
// config's rate_limiter.algorithm; "" means the token bucket) — and checks
// that the options given belong to it and that its required ones are
// there. A token bucket's Burst defaults to Rate (one second of traffic, at
// least 1). Errors wrap ErrInvalid; their text names the options.
func Resolve(g Given, def Algorithm) (Options, error) {
	bad := func(format string, v ...any) (Options, error) {
		return Options{}, optionError(fmt.Sprintf(format, v...))
	}
	algorithm := g.Algorithm
	// from names what decided the algorithm, for errors.
	from := fmt.Sprintf("option algorithm = %q", algorithm)
	switch {
	case algorithm != "":
		if g.Sliding != nil && *g.Sliding != (algorithm == AlgorithmSlidingWindow) {
			return bad("option sliding = %v contradicts algorithm = %q", *g.Sliding, algorithm)
		}
	case g.Sliding != nil:
		from = "sliding = " + strconv.FormatBool(*g.Sliding)
		algorithm = AlgorithmTokenBucket
		if *g.Sliding {
			algorithm = AlgorithmSlidingWindow
		}
	default:
		if algorithm = def; algorithm == "" {
			algorithm = AlgorithmTokenBucket
		}
		from = fmt.Sprintf("rate_limiter.algorithm = %q", algorithm)
	}
	o := Options{Algorithm: algorithm, Sliding: algorithm == AlgorithmSlidingWindow,
		Rate: g.Rate, Burst: g.Burst, Window: g.Window, MaxRequests: g.MaxRequests}
	if o.Sliding {
		for _, k := range []struct {
			name string
			set  bool
		}{{"rate", g.Rate != 0}, {"burst", g.Burst != 0}} {
			if k.set {
				return bad("option %s is a token-bucket option, but %s makes this a sliding window (options: window, max_requests)", k.name, from)
			}
		}
		if g.Window == 0 {
			return bad("option window is required for a sliding window")
		}
		if g.MaxRequests == 0 {
			return bad("option max_requests is required for a sliding window")
		}
		return o, nil
	}
	for _, k := range []struct {
		name string
		set  bool
	}{{"window", g.Window != 0}, {"max_requests", g.MaxRequests != 0}} {
		if k.set {
			return bad("option %s is a sliding-window option, but %s makes this a token bucket (set sliding = true for a sliding window)", k.name, from)
		}
	}
	if g.Rate == 0 {
		return bad("option rate is required for a token bucket (tokens per second)")
	}
	if g.Burst == 0 {
		o.Burst = math.Max(o.Rate, 1)
	}
	return o, nil
}
