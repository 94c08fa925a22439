// Package kv is the key-value storage behind shield.global(): a Store
// interface with two interchangeable backends — Redis (standalone or Cluster,
// see NewRedis) and an in-process memory store (see NewMemory) — and Cache,
// the process-local LRU used by get_cached.
//
// Values are opaque, already-encoded byte strings (JSON text produced by
// package core/codec). The only operation that looks inside a value is
// IncrBy, which requires the whole value to be a JSON number.
//
// Both backends implement the same semantics, checked by one conformance
// suite run against memory, standalone Redis and Redis Cluster. The known,
// documented difference is the arithmetic precision of IncrBy on
// non-integral or very large results (see Store.IncrBy).
package kv

import (
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/shieldrt/shieldglobal/core/codec"
	"github.com/shieldrt/shieldglobal/core/store"
)

// Store is a key-value store of encoded values. Its methods build
// operations (store.Op): nothing happens until the op runs (op.Do, or a
// batch of the Lua runtime). Implementations are safe for concurrent use. A
// value returned by a Store belongs to the caller; a value passed to a Store
// may be reused by the caller once the op has run.
//
// Errors come from the backend (I/O, a cancelled context) and name the
// operation and key, e.g. `kv: get "k": dial tcp ...`, except where a
// method names a sentinel.
type Store interface {
	// Get returns the value of key. A missing or expired key gives
	// Found == false and no error.
	Get(key string) *store.Op[Value]

	// MGet returns the values of keys in the same order; a missing key has a
	// nil entry (an existing empty value is a non-nil empty slice).
	MGet(keys []string) *store.Op[[][]byte]

	// Set stores value under key. ttl > 0 makes the key expire after ttl
	// (rounded down to whole milliseconds, at least 1ms); ttl <= 0 stores it
	// without expiry and clears any previous expiry.
	Set(key string, value []byte, ttl time.Duration) *store.Op[struct{}]

	// MSet stores every pair with the same ttl rule as Set. If a key repeats,
	// the last pair wins. Atomicity is backend-specific (see Memory and
	// Redis).
	MSet(pairs []Pair, ttl time.Duration) *store.Op[struct{}]

	// Delete removes key and reports whether it existed (an expired key did
	// not).
	Delete(key string) *store.Op[bool]

	// IncrBy atomically adds delta to the number stored under key and returns
	// the new value. A missing key starts at 0 and is created without
	// expiry; an existing key keeps its TTL.
	//
	// The whole stored value must be a JSON number with no surrounding
	// whitespace, else the error wraps ErrNotNumber and the value is left
	// unchanged. If delta or the result is NaN or outside the float64 range,
	// the error wraps ErrNotFinite and the value is left unchanged.
	//
	// The result is stored as a JSON number. Integral results with
	// |x| < 2^53 are stored as the same plain integers ("6") by every
	// backend, and so are fractions that binary floating point holds
	// exactly in at most 15 significant digits ("1.5", "1000001.25"). Other
	// results may differ in their digits between backends (Redis computes in
	// long double and prints fixed-point with at most 17 decimals, so
	// 0.1+0.2 is "0.3" there and "0.30000000000000004" in memory), but on
	// every backend the stored text parses, as a float64, to exactly the
	// returned value. Values that are not JSON text at all (which
	// core/codec never produces) may be accepted by Redis (`+1`, `.5`,
	// `0x10`) and rejected by memory.
	IncrBy(key string, delta float64) *store.Op[float64]

	// TTL returns the remaining time to live of key. Found is false for a
	// missing or expired key; Left is NoExpiry (negative) for a key without
	// expiry and >= 0 otherwise (0: expires within the millisecond).
	TTL(key string) *store.Op[Expiry]

	// Invalidate tells the other processes' local caches to drop key,
	// without writing it (writes tell them by themselves when the store
	// announces; see WithAnnounce).
	Invalidate(key string) *store.Op[struct{}]
}

// Value is what Get found.
type Value struct {
	Data  []byte
	Found bool
}

// Expiry is what TTL found.
type Expiry struct {
	Left  time.Duration
	Found bool
}

// Pair is one key and value for MSet.
type Pair struct {
	Key   string
	Value []byte
}

// NoExpiry is the ttl TTL reports for a key that exists without expiry.
const NoExpiry time.Duration = -1

// ErrNotNumber is wrapped by IncrBy when the stored value is not a JSON
// number: fmt.Errorf("%w: %q", ErrNotNumber, key).
var ErrNotNumber = errors.New("kv: value is not a number")

// ErrNotFinite is wrapped by IncrBy when delta or the result would be NaN or
// infinite: fmt.Errorf("%w: %q", ErrNotFinite, key).
var ErrNotFinite = errors.New("kv: increment would produce NaN or Infinity")

// normTTL applies the Redis PX rule to ttl so both backends agree: whole
// milliseconds, at least one; 0 means no expiry.
func normTTL(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return 0
	}
	if ttl < time.Millisecond {
		return time.Millisecond
	}
	return ttl.Truncate(time.Millisecond)
}

// parseNumber parses b if the whole of b is a JSON number (codec.IsNumber:
// no surrounding whitespace) representable as a finite float64 (unlike
// codec.ParseNumber, an underflow to 0 is not a number here).
func parseNumber(b []byte) (float64, bool) {
	if !codec.IsNumber(b) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || !finite(f) {
		return 0, false
	}
	return f, true
}

// formatNumber formats x as a JSON number the way encoding/json and
// JavaScript do: fixed-point with the shortest digits that round-trip when
// 1e-6 <= |x| < 1e21 (so integral values print as plain integers: "6"),
// exponent form otherwise ("1e+300"). Redis's INCRBYFLOAT prints integral
// results below 1e21 the same way.
func formatNumber(x float64) []byte {
	if x == 0 {
		return []byte("0") // also for -0, like Redis
	}
	if a := math.Abs(x); a >= 1e-6 && a < 1e21 {
		return strconv.AppendFloat(nil, x, 'f', -1, 64)
	}
	return strconv.AppendFloat(nil, x, 'g', -1, 64)
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
