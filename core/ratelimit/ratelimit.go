// Package ratelimit is the rate limiter behind shield.rate_limiter(): named
// limiters of two algorithms, grouped in a Set that owns their background
// work.
//
//   - TokenBucket (the default): a token bucket per key that decides in local
//     memory, never calling Redis on Allow. With Redis, the bucket's rate and
//     burst are global: every SyncInterval each process reports, for all its
//     active keys of a limiter in one script call, what it spent and what it
//     wanted, and receives its share of each key's rate and burst. Shares
//     follow measured demand (max-min fair share), never add up to more than
//     the rate, and are leases: a process that stops reporting (killed, or
//     cut off from Redis) loses its share to the others once its lease ends.
//     Tokens not held by any process wait in a pool in Redis, so a
//     hand-over loses nothing. docs/rate_limiter.md describes the protocol
//     and its measured accuracy.
//   - SlidingWindow: at most MaxRequests in any window of length Window,
//     exactly. With Redis each Allow is one script call (an *store.Op) on
//     the server's clock; when Redis cannot be reached it rejects with
//     Unavailable.
//
// On the memory backend (NewMemory) both algorithms are exact in-process:
// the token bucket has the whole rate and never syncs.
//
// Degradation follows the spec's table: with Redis unreachable a token
// bucket keeps its last share (decisions made after its lease ended are
// counted as degraded) and logs once; when Redis answers again the shares
// are recomputed and the global rate is exact again. A sliding window
// rejects with Unavailable and counts it.
package ratelimit

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Errors returned (wrapped) by this package.
var (
	// ErrInvalid is wrapped by every function given an invalid argument:
	// a bad limiter name or option (the error names the option and its
	// value), or a sliding-window request count n < 1.
	ErrInvalid = errors.New("ratelimit: invalid argument")
	// ErrConflict is returned by Set.Limiter (and Set.TokenBucket,
	// Set.SlidingWindow) when a limiter of that name already exists in the
	// Set with other options.
	ErrConflict = errors.New("ratelimit: limiter exists with other options")
	// ErrStopped is returned by Set.SyncNow after Stop.
	ErrStopped = errors.New("ratelimit: set stopped")
)

// Algorithm names a limiter algorithm, spelled as in the config
// (rate_limiter.algorithm).
type Algorithm string

// The algorithms.
const (
	AlgorithmTokenBucket   Algorithm = "token_bucket"
	AlgorithmSlidingWindow Algorithm = "sliding_window"
)

// Reason says why a request was refused. The values are the Lua API's
// reason strings.
type Reason string

// The reasons. An allowed request has the empty Reason.
const (
	// Rejected: over the limit.
	Rejected Reason = "rejected"
	// Unavailable: a sliding window could not count because Redis did not
	// answer.
	Unavailable Reason = "unavailable"
	// Timeout: a Wait gave up.
	Timeout Reason = "timeout"
)

// Options configure one limiter. A token bucket takes Rate and Burst; a
// sliding window takes Window and MaxRequests. Setting an option of the
// other algorithm is an error.
type Options struct {
	// Algorithm selects the algorithm. "" means AlgorithmSlidingWindow
	// when Sliding is set, else the Set's default (rate_limiter.algorithm,
	// normally AlgorithmTokenBucket).
	Algorithm Algorithm
	// Sliding selects AlgorithmSlidingWindow (the Lua option sliding =
	// true).
	Sliding bool

	// Rate is the token bucket's refill rate in tokens per second, for the
	// whole cluster when the Set is on Redis. It must be finite and > 0.
	Rate float64
	// Burst is the bucket's capacity in tokens: how many requests an idle
	// key allows at once. It must be finite and >= 1.
	Burst float64

	// Window is the sliding window's length; it must be at least 1ms. It
	// is counted in microseconds.
	Window time.Duration
	// MaxRequests is how many requests any window of length Window may
	// hold; it must be >= 1.
	MaxRequests int64
}

// resolve fills in the algorithm and validates o for it. name is used in
// errors.
func (o Options) resolve(name string, def Algorithm) (Options, error) {
	bad := func(option string, value any, rule string) error {
		return fmt.Errorf("%w: rate_limiter %q: %s = %v: %s", ErrInvalid, name, option, value, rule)
	}
	if o.Algorithm == "" {
		o.Algorithm = def
		if o.Sliding {
			o.Algorithm = AlgorithmSlidingWindow
		}
	}
	switch o.Algorithm {
	case AlgorithmTokenBucket:
		switch {
		case o.Sliding:
			return o, bad("sliding", true, "not an option of a token bucket")
		case o.Window != 0:
			return o, bad("window", o.Window, "not an option of a token bucket (set sliding = true for a sliding window)")
		case o.MaxRequests != 0:
			return o, bad("max_requests", o.MaxRequests, "not an option of a token bucket (set sliding = true for a sliding window)")
		case !(o.Rate > 0) || math.IsInf(o.Rate, 0):
			return o, bad("rate", o.Rate, "must be a finite number > 0 (tokens per second)")
		case !(o.Burst >= 1) || math.IsInf(o.Burst, 0):
			return o, bad("burst", o.Burst, "must be a finite number >= 1")
		}
	case AlgorithmSlidingWindow:
		o.Sliding = true
		switch {
		case o.Rate != 0:
			return o, bad("rate", o.Rate, "not an option of a sliding window")
		case o.Burst != 0:
			return o, bad("burst", o.Burst, "not an option of a sliding window")
		case o.Window < time.Millisecond:
			return o, bad("window", o.Window, "must be at least 1ms")
		case o.MaxRequests < 1:
			return o, bad("max_requests", o.MaxRequests, "must be >= 1")
		}
	default:
		return o, bad("algorithm", fmt.Sprintf("%q", o.Algorithm), fmt.Sprintf("unknown (want %q or %q)", AlgorithmTokenBucket, AlgorithmSlidingWindow))
	}
	return o, nil
}

// checkName reports a limiter name that cannot be used: every Redis key of
// a limiter carries the hash tag {name}, so it must be non-empty and must
// not start with '}'.
func checkName(name string) error {
	if name == "" || name[0] == '}' {
		return fmt.Errorf("%w: rate_limiter name %q: must be non-empty and must not start with '}'", ErrInvalid, name)
	}
	return nil
}

// Limiter is a *TokenBucket or a *SlidingWindow.
type Limiter interface {
	// Name returns the limiter's name.
	Name() string
	// Options returns the resolved options (Algorithm set).
	Options() Options
	// Stats returns the limiter's counters.
	Stats() LimiterStats
}

// Config configures a Set. The zero value is usable: the module fills it
// from the rate_limiter config section.
type Config struct {
	// Algorithm is the default algorithm (rate_limiter.algorithm); ""
	// means AlgorithmTokenBucket.
	Algorithm Algorithm
	// SyncInterval is how often a token bucket reports to Redis
	// (rate_limiter.sync_interval); 0 means 1s.
	SyncInterval time.Duration
	// CleanupInterval is how long a key may stay idle before its local
	// state is dropped, and how often idle keys are looked for
	// (rate_limiter.cleanup_interval); 0 means 60s.
	CleanupInterval time.Duration
	// Logger receives one warning when Redis stops answering and one
	// notice when it answers again; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock of the local token-bucket math, of sliding windows
	// on the memory backend, and of rejected_today; nil means time.Now.
	// Anything compared across processes uses Redis server time instead.
	Now func() time.Time
	// AfterFunc schedules Wait's retries; nil means time.AfterFunc. Tests
	// pair it with a fake Now.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// ProcessID identifies this process among those sharing a limiter on
	// Redis; "" means a random id (a restarted process is a new
	// participant, so it never inherits a dead one's lease).
	ProcessID string
	// Timeout is how long a sliding window's Allow waits for Redis before
	// it decides Unavailable (rate_limiter.timeout); 0 means 300ms.
	Timeout time.Duration
}

// defaultTimeout is Config.Timeout's default.
const defaultTimeout = 300 * time.Millisecond

// Stats are a Set's counters: the sums over its limiters.
type Stats struct {
	// Limiters is the number of limiters.
	Limiters int
	// ActiveKeys is the number of keys with local state: token-bucket
	// keys, and sliding-window keys of the memory backend (a Redis sliding
	// window keeps no local state).
	ActiveKeys int
	// Allowed and Rejected count decisions; Unavailable counts sliding
	// window requests refused because Redis did not answer.
	Allowed, Rejected, Unavailable uint64
	// Degraded counts token-bucket decisions made while the key's lease
	// had ended (Redis unreachable or the sync late): local decisions
	// without a valid global share. They are also in Allowed or Rejected.
	Degraded uint64
	// RejectedToday counts Rejected and Unavailable since the last UTC
	// midnight (of Config.Now).
	RejectedToday uint64
	// Syncs and SyncFailures count token-bucket report rounds (one round
	// may be several script calls) that succeeded and that failed.
	Syncs, SyncFailures uint64
}

// LimiterStats are one limiter's counters; the fields mean what they mean
// in Stats.
type LimiterStats struct {
	Name                           string
	Algorithm                      Algorithm
	ActiveKeys                     int
	Allowed, Rejected, Unavailable uint64
	Degraded                       uint64
	RejectedToday                  uint64
	// Processes is the number of live processes sharing this token bucket
	// at its last successful sync (1 on the memory backend).
	Processes int
}

// Decision is the outcome of one sliding-window request.
type Decision struct {
	// Allowed is true when the request fits; then Reason is "".
	Allowed bool
	// Reason is Rejected or Unavailable when not allowed.
	Reason Reason
	// Remaining is how many more requests the current window would
	// accept (0 when unknown).
	Remaining int64
	// RetryAfter, when rejected as over the limit, is how long until
	// enough requests leave the window for this one to fit; -1 when it
	// never fits (n > MaxRequests); 0 otherwise.
	RetryAfter time.Duration
}
