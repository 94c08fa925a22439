package lock

import (
	"errors"
	"fmt"
	"time"
)

// Scope says where a lock is shared.
type Scope uint8

// The scopes.
const (
	// InProcess locks (shield.mutex, rwlock, spinlock) are shared by every
	// Session of one Service: the Lua states of one process.
	InProcess Scope = iota
	// Distributed locks (shield.distributed_mutex, distributed_rwlock,
	// lock()) are shared through the Service's backend by every process.
	Distributed
)

func (s Scope) String() string {
	if s == Distributed {
		return "distributed"
	}
	return "in-process"
}

// Defaults are the lock options of the configuration (the lock section).
type Defaults struct {
	// TTL is the lease of a distributed lock given none (lock.default_ttl).
	TTL time.Duration
	// MaxTTL caps every lease asked for (lock.max_ttl).
	MaxTTL time.Duration
	// Retry is the longest wait between two attempts (lock.retry).
	Retry time.Duration
	// MaxRetries bounds the attempts of an acquire; 0 = unlimited
	// (lock.max_retries).
	MaxRetries int
	// Reentrant lets an owner acquire a lock it holds (lock.reentrant).
	Reentrant bool
	// AutoExtend runs the watchdog on distributed holds
	// (lock.auto_extend.enabled) every ExtendInterval
	// (lock.auto_extend.interval).
	AutoExtend     bool
	ExtendInterval time.Duration
	// Fair makes distributed locks FIFO across processes (lock.fair.enabled).
	Fair bool
	// Wait is the timeout of an acquire given none (lock.wait); 0: none.
	Wait time.Duration
}

// Given are the options a caller passed when making a lock object; a nil
// field takes its default.
type Given struct {
	TTL, Retry, Wait, ExtendInterval *time.Duration
	MaxRetries                       *int
	Reentrant, Fair, AutoExtend      *bool
}

// Settings are a lock object's options, resolved once from Defaults and
// Given when it is made.
type Settings struct {
	// TTL is the lease of each hold; 0 means none (in-process locks by
	// default): the hold lasts until released.
	TTL time.Duration
	// Retry is the longest wait between two attempts of an acquire when no
	// wake-up (a release) comes first.
	Retry time.Duration
	// MaxRetries bounds the attempts of one acquire (0: unlimited); each
	// wake-up and each Retry interval without one is an attempt, and the
	// acquire gives up after its MaxRetries-th failed attempt (1: a single
	// attempt, no waiting).
	MaxRetries int
	// Reentrant lets the holder acquire again; each acquire needs a release.
	Reentrant bool
	// Wait is the default timeout of an acquire (0: as long as it takes).
	Wait time.Duration
	// Fair (distributed) queues waiters FIFO across processes. In-process
	// locks are always FIFO.
	Fair bool
	// AutoExtend renews each hold's lease every ExtendInterval while it is
	// held (the watchdog).
	AutoExtend     bool
	ExtendInterval time.Duration
}

// OptionError is an invalid option of a lock object: it matches ErrInvalid
// and its text names the option (without a package prefix, for argument
// errors).
type OptionError struct {
	Option string
	Msg    string
}

func (e *OptionError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *OptionError) Is(target error) bool { return target == ErrInvalid }

func optionErr(option, format string, v ...any) error {
	return &OptionError{Option: option, Msg: fmt.Sprintf(format, v...)}
}

// IsOptionError returns the OptionError in err's chain.
func IsOptionError(err error) (*OptionError, bool) {
	var oe *OptionError
	ok := errors.As(err, &oe)
	return oe, ok
}

// resolve computes the Settings of a lock of scope made with g. Errors
// (*OptionError): a ttl above MaxTTL, auto_extend without a ttl, an
// extend_interval not shorter than the ttl, fair on Redlock.
func (d Defaults) resolve(scope Scope, g Given, redlock bool) (Settings, error) {
	s := Settings{Retry: d.Retry, MaxRetries: d.MaxRetries, Reentrant: d.Reentrant, ExtendInterval: d.ExtendInterval, Wait: d.Wait}
	if scope == Distributed {
		s.TTL, s.Fair, s.AutoExtend = d.TTL, d.Fair, d.AutoExtend
	}
	set := func(dst *time.Duration, v *time.Duration) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.TTL, g.TTL)
	set(&s.Retry, g.Retry)
	set(&s.Wait, g.Wait)
	set(&s.ExtendInterval, g.ExtendInterval)
	if g.MaxRetries != nil {
		s.MaxRetries = *g.MaxRetries
	}
	for _, b := range []struct {
		dst *bool
		v   *bool
	}{{&s.Reentrant, g.Reentrant}, {&s.Fair, g.Fair}, {&s.AutoExtend, g.AutoExtend}} {
		if b.v != nil {
			*b.dst = *b.v
		}
	}
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	switch {
	case s.TTL < 0:
		return Settings{}, optionErr("ttl", "option ttl must be >= 0, got %v", s.TTL)
	case s.Retry <= 0:
		return Settings{}, optionErr("retry", "option retry must be > 0, got %v", s.Retry)
	case s.Wait < 0:
		return Settings{}, optionErr("wait", "option wait must be >= 0, got %v", s.Wait)
	case s.MaxRetries < 0:
		return Settings{}, optionErr("max_retries", "option max_retries must be >= 0, got %d", s.MaxRetries)
	case s.ExtendInterval <= 0:
		return Settings{}, optionErr("extend_interval", "option extend_interval must be > 0, got %v", s.ExtendInterval)
	case d.MaxTTL > 0 && s.TTL > d.MaxTTL:
		return Settings{}, optionErr("ttl", "ttl %d exceeds lock.max_ttl (%d)", ms(s.TTL), ms(d.MaxTTL))
	case s.AutoExtend && s.TTL == 0:
		return Settings{}, optionErr("auto_extend", "auto_extend needs a ttl")
	case s.Fair && redlock:
		return Settings{}, optionErr("fair", "fair locks are not available on Redlock (lock.redlock.enabled)")
	}
	if s.AutoExtend && s.ExtendInterval >= s.TTL {
		if g.ExtendInterval != nil || s.TTL <= 3*time.Millisecond {
			return Settings{}, optionErr("extend_interval", "extend_interval (%d) must be shorter than ttl (%d)", ms(s.ExtendInterval), ms(s.TTL))
		}
		// A ttl shorter than the default interval: renew three times per lease.
		s.ExtendInterval = s.TTL / 3
	}
	return s, nil
}
