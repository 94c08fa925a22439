package store

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// ErrReply is wrapped by every error about a reply of the wrong shape: a
// script and its decoder disagree (a deployment running other scripts under
// the same prefix, or a bug).
var ErrReply = errors.New("unexpected reply")

// Reply reads an array reply (a script's, typically) element by element,
// checking each element's type. The first mismatch is kept and reported by
// Err or End, so a decoder reads every field it expects and checks once:
//
//	r := store.ReadReply("rank: update", cmd)
//	status, version := r.Int(), r.Int()
//	if err := r.End(); err != nil { ... }
type Reply struct {
	what string
	vals []any
	i    int
	err  error
}

// ReadReply starts reading cmd's reply; what names the operation in errors
// ("rank: update"). A command error (the script raised, the connection
// failed) becomes Err as it is, not as ErrReply.
func ReadReply(what string, cmd *redis.Cmd) *Reply {
	r := &Reply{what: what}
	v, err := cmd.Result()
	if err != nil {
		r.err = fmt.Errorf("%s: %w", what, err)
		return r
	}
	vals, ok := v.([]any)
	if !ok {
		r.err = fmt.Errorf("%s: %w: want an array, got %T %v", what, ErrReply, v, v)
		return r
	}
	r.vals = vals
	return r
}

// ReplyOf reads vals, an array already taken out of a reply (a nested one).
func ReplyOf(what string, vals []any) *Reply { return &Reply{what: what, vals: vals} }

// Len returns the number of elements not read yet.
func (r *Reply) Len() int {
	if r.err != nil {
		return 0
	}
	return len(r.vals) - r.i
}

func (r *Reply) next(want string) (any, bool) {
	if r.err != nil {
		return nil, false
	}
	if r.i >= len(r.vals) {
		r.fail("element %d: want %s, the reply has only %d elements", r.i+1, want, len(r.vals))
		return nil, false
	}
	v := r.vals[r.i]
	r.i++
	return v, true
}

func (r *Reply) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %w: %s (reply %v)", r.what, ErrReply, fmt.Sprintf(format, args...), r.vals)
	}
}

// Int reads an integer element.
func (r *Reply) Int() int64 {
	v, ok := r.next("an integer")
	if !ok {
		return 0
	}
	n, ok := v.(int64)
	if !ok {
		r.fail("element %d: want an integer, got %T %v", r.i, v, v)
	}
	return n
}

// Str reads a string element.
func (r *Reply) Str() string {
	v, ok := r.next("a string")
	if !ok {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.fail("element %d: want a string, got %T %v", r.i, v, v)
	}
	return s
}

// OptStr reads a string element that may be nil (a Lua false): ok is false then.
func (r *Reply) OptStr() (s string, ok bool) {
	v, more := r.next("a string or nil")
	if !more || v == nil {
		return "", false
	}
	s, ok = v.(string)
	if !ok {
		r.fail("element %d: want a string or nil, got %T %v", r.i, v, v)
	}
	return s, ok
}

// Float reads a number sent as a string (scripts return scores with
// tostring, since Lua numbers become integers in replies) or an integer.
func (r *Reply) Float() float64 {
	v, ok := r.next("a number")
	if !ok {
		return 0
	}
	switch x := v.(type) {
	case int64:
		return float64(x)
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			r.fail("element %d: want a number, got %q", r.i, x)
		}
		return f
	}
	r.fail("element %d: want a number, got %T %v", r.i, v, v)
	return 0
}

// Array reads a nested array element.
func (r *Reply) Array() []any {
	v, ok := r.next("an array")
	if !ok {
		return nil
	}
	a, ok := v.([]any)
	if !ok && v != nil {
		r.fail("element %d: want an array, got %T %v", r.i, v, v)
	}
	return a
}

// Err returns the first error met so far.
func (r *Reply) Err() error { return r.err }

// End returns the first error, or an error when elements are left unread.
func (r *Reply) End() error {
	if r.err == nil && r.i != len(r.vals) {
		r.fail("%d elements left unread", len(r.vals)-r.i)
	}
	return r.err
}
