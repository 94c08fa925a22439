package ratelimit

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
)

// The sliding-window scripts; each file's header lists its KEYS, ARGV and
// replies.
var (
	//go:embed scripts/window_allow.lua
	windowAllowSrc string
	//go:embed scripts/window_remaining.lua
	windowRemainingSrc string

	windowAllowScript     = store.NewScript("ratelimit/window_allow.lua", windowAllowSrc)
	windowRemainingScript = store.NewScript("ratelimit/window_remaining.lua", windowRemainingSrc)
)

// errNoReply is wrapped when a command settled with neither a reply nor an
// error: go-redis leaves a pipeline's commands so when it could not get a
// connection after its last retry. It means Redis was not reached.
var errNoReply = errors.New("no reply from Redis (connection failed)")

// noReply reports a command that was never answered.
func noReply(cmd *redis.Cmd) bool { return cmd.Err() == nil && cmd.Val() == nil }

// noReplyErr is errNoReply naming where the client connects.
func noReplyErr(c redis.UniversalClient) error {
	switch c := c.(type) {
	case *redis.Client:
		return fmt.Errorf("%w: %s", errNoReply, c.Options().Addr)
	case *redis.ClusterClient:
		return fmt.Errorf("%w: %s", errNoReply, strings.Join(c.Options().Addrs, ","))
	}
	return errNoReply
}

// redisWindow counts requests in one sorted set per key, on the server's
// clock: store.Keys.RateLimitWindow(name, key).
type redisWindow struct {
	c      redis.UniversalClient
	keys   store.Keys
	name   string
	window int64 // µs
	max    int64
}

func newRedisWindow(s *Set, name string, o Options) *redisWindow {
	return &redisWindow{c: s.c, keys: s.keys, name: name, window: o.Window.Microseconds(), max: o.MaxRequests}
}

func (w *redisWindow) allow(key string, n int64, settle settleFunc, seq uint64) *store.Op[Decision] {
	cmd := windowAllowScript.Cmd([]string{w.keys.RateLimitWindow(w.name, key)}, w.window, w.max, n)
	return store.Commands(w.c, func() (Decision, error) {
		if noReply(cmd.Cmd) {
			return settle(seq, Decision{}, fmt.Errorf("ratelimit: %q: allow %q: %w", w.name, key, noReplyErr(w.c)))
		}
		r := store.ReadReply("window_allow.lua", cmd.Cmd)
		ok, remaining, retry := r.Int(), r.Int(), r.Int()
		if err := r.End(); err != nil {
			err = fmt.Errorf("ratelimit: %q: allow %q: %w", w.name, key, err)
			if errors.Is(err, store.ErrReply) {
				return Decision{}, err // a reply this code does not understand: no outage
			}
			return settle(seq, Decision{}, err) // Redis did not answer
		}
		d := Decision{Allowed: ok == 1, Remaining: remaining}
		if !d.Allowed {
			d.Reason = Rejected
			d.RetryAfter = -1
			if retry >= 0 {
				d.RetryAfter = time.Duration(retry) * time.Microsecond
			}
		}
		return settle(seq, d, nil)
	}, cmd)
}

func (w *redisWindow) remaining(key string) *store.Op[int64] {
	cmd := windowRemainingScript.Cmd([]string{w.keys.RateLimitWindow(w.name, key)}, w.window, w.max)
	return store.Commands(w.c, func() (int64, error) {
		if noReply(cmd.Cmd) {
			return 0, fmt.Errorf("ratelimit: %q: remaining %q: %w", w.name, key, noReplyErr(w.c))
		}
		r := store.ReadReply("window_remaining.lua", cmd.Cmd)
		n := r.Int()
		if err := r.End(); err != nil {
			return 0, fmt.Errorf("ratelimit: %q: remaining %q: %w", w.name, key, err)
		}
		return n, nil
	}, cmd)
}

// active is 0: a Redis window keeps no local state.
func (w *redisWindow) active() int { return 0 }

func (w *redisWindow) cleanup(int64) {}
