package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
)

// The operator's view of queues by name, shared by the ops console's
// actions and the `shield ops` CLI, so that each admin operation is written
// once: find or open a queue by name, read its stats and dead letters,
// requeue, delete or purge them, purge the queue.

// Handle is one queue found or opened by name, of any kind.
type Handle struct {
	Kind Kind
	Name string
	q    any
}

// finder is implemented by both backends.
type finder interface {
	find(name string) (kind Kind, q any, ok bool)
}

// Find returns the queue name as this process opened it (with the options
// it was opened with). Errors: ErrNotFound (not opened in this process),
// ErrInvalid (a backend that cannot look queues up).
func Find(b Backend, name string) (Handle, error) {
	f, ok := b.(finder)
	if !ok {
		return Handle{}, fmt.Errorf("%w: backend %T cannot look queues up", ErrInvalid, b)
	}
	kind, q, ok := f.find(name)
	if !ok {
		return Handle{}, fmt.Errorf("queue %q: %w (not opened in this process)", name, ErrNotFound)
	}
	return Handle{Kind: kind, Name: name, q: q}, nil
}

// Open opens name as a queue of kind with o (the admin CLI, which knows a
// queue's kind from Discover). Errors: those of the Backend's open calls.
func Open(b Backend, kind Kind, name string, o Options) (Handle, error) {
	var q any
	var err error
	switch kind {
	case KindPlain:
		q, err = b.Plain(name, o)
	case KindDelay:
		q, err = b.Delay(name, o)
	case KindPriority:
		q, err = b.Priority(name, o)
	case KindReliable:
		q, err = b.Reliable(name, o)
	case KindBroadcast:
		q, err = b.Broadcast(name, o)
	default:
		err = fmt.Errorf("%w: unknown queue kind %v", ErrInvalid, kind)
	}
	if err != nil {
		return Handle{}, err
	}
	return Handle{Kind: kind, Name: name, q: q}, nil
}

// Stats reads the queue's stats.
func (h Handle) Stats() *store.Op[Stats] {
	return h.q.(interface{ Stats() *store.Op[Stats] }).Stats()
}

// DeadLetters are the queue's dead letters. Errors: ErrInvalid for a kind
// without dead letters (plain, delay, priority).
func (h Handle) DeadLetters() (DeadLetters, error) {
	if d, ok := h.q.(interface{ DeadLetters() DeadLetters }); ok {
		return d.DeadLetters(), nil
	}
	return nil, fmt.Errorf("%w: queue %q is a %s queue: it has no dead letters", ErrInvalid, h.Name, h.Kind)
}

// Purge drops every message of the queue (not its dead letters) and
// returns how many there were. Errors: ErrInvalid for a broadcast queue
// (its groups each have their own place in it: remove a group instead).
func (h Handle) Purge() *store.Op[int64] {
	if p, ok := h.q.(interface{ Purge() *store.Op[int64] }); ok {
		return p.Purge()
	}
	return store.Failed[int64](fmt.Errorf("%w: queue %q is a %s queue: it cannot be purged", ErrInvalid, h.Name, h.Kind))
}

// ParseKind is the inverse of Kind.String. Errors: ErrInvalid.
func ParseKind(s string) (Kind, error) {
	for k := KindPlain; k <= KindBroadcast; k++ {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown queue kind %q", ErrInvalid, s)
}

// Discover lists the queues that exist in Redis (every queue that was ever
// pushed to has a meta hash naming its kind), sorted by name, scanning
// every master of a Cluster. It reads keys only; opens nothing.
func (r *Redis) Discover(ctx context.Context) ([]Opened, error) {
	metas, err := store.ScanKeys(ctx, r.c, r.keys.Prefix+"queue:{*}:meta")
	if err != nil {
		return nil, fmt.Errorf("queue: discover: %w", err)
	}
	out := make([]Opened, 0, len(metas))
	for _, key := range metas {
		rest := strings.TrimPrefix(key, r.keys.Prefix+"queue:{")
		name := strings.TrimSuffix(rest, "}:meta")
		if name == rest || name == "" {
			continue
		}
		k, err := r.c.HGet(ctx, key, "kind").Result()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("queue: discover %q: %w", name, err)
		}
		kind, err := ParseKind(k)
		if err != nil {
			continue
		}
		out = append(out, Opened{Kind: kind, Name: name})
	}
	slices.SortFunc(out, func(a, b Opened) int { return strings.Compare(a.Name, b.Name) })
	out = slices.CompactFunc(out, func(a, b Opened) bool { return a.Name == b.Name })
	return out, nil
}

func (r *Redis) find(name string) (Kind, any, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.queues[name]; e != nil {
		return e.kind, e.q, true
	}
	return 0, nil, false
}

func (m *Memory) find(name string) (Kind, any, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.queues[name]; e != nil {
		return e.kind, e.q, true
	}
	return 0, nil, false
}

// Oldest returns since when the message at the head of the queue (the next
// one delivered) has been waiting: plain and priority queues, when it was
// pushed; delay queues, when it became due (zero while nothing is due);
// reliable queues, when the oldest message not yet acknowledged was pushed
// (in flight or not); broadcast queues, when the oldest entry retained was
// pushed. Zero when the queue is empty. Server time on Redis.
func (h Handle) Oldest() *store.Op[time.Time] {
	o, ok := h.q.(interface{ oldest() *store.Op[time.Time] })
	if !ok {
		return store.Failed[time.Time](fmt.Errorf("%w: queue %q: no head for %T", ErrInvalid, h.Name, h.q))
	}
	return o.oldest()
}

// The plain, delay and priority queues get oldest from their sorted set;
// the stream kinds from their stream.
func (q *redisReliable) oldest() *store.Op[time.Time]  { return q.s.oldest() }
func (q *redisBroadcast) oldest() *store.Op[time.Time] { return q.s.oldest() }
func (q *memReliable) oldest() *store.Op[time.Time]    { return q.s.oldest() }
func (q *memBroadcast) oldest() *store.Op[time.Time]   { return q.s.oldest() }

func (s *redisSorted) oldest() *store.Op[time.Time] {
	ctx := context.Background()
	if s.kind == KindPlain {
		cmd := redis.NewStringCmd(ctx, "LINDEX", s.key, -1) // RPOP end: the oldest
		return store.Commands(s.r.c, func() (time.Time, error) {
			raw, err := cmd.Result()
			if errors.Is(err, redis.Nil) {
				return time.Time{}, nil
			}
			if err != nil {
				return time.Time{}, opErr("oldest", s.name, err)
			}
			m, ok := parseListElement(raw)
			if !ok {
				return time.Time{}, opErr("oldest", s.name, store.ErrReply)
			}
			return m.EnqueuedAt, nil
		}, cmd)
	}
	cmd := redis.NewZSliceCmd(ctx, "ZRANGE", s.key, 0, 0, "WITHSCORES")
	tcmd := redis.NewTimeCmd(ctx, "TIME")
	return store.Commands(s.r.c, func() (time.Time, error) {
		zs, err := cmd.Result()
		if err == nil {
			err = tcmd.Err()
		}
		if err != nil {
			return time.Time{}, opErr("oldest", s.name, err)
		}
		if len(zs) == 0 {
			return time.Time{}, nil
		}
		member, _ := zs[0].Member.(string)
		m, err := parseZsetMember(member, strconv.FormatFloat(zs[0].Score, 'f', -1, 64), s.kind)
		if err != nil {
			return time.Time{}, opErr("oldest", s.name, err)
		}
		if s.kind == KindDelay {
			if m.Due.After(tcmd.Val()) {
				return time.Time{}, nil // nothing due yet
			}
			return m.Due, nil
		}
		return m.EnqueuedAt, nil
	}, cmd, tcmd)
}

func (s *redisStream) oldest() *store.Op[time.Time] {
	cmd := redis.NewXMessageSliceCmd(context.Background(), "XRANGE", s.key, "-", "+", "COUNT", 1)
	return store.Commands(s.r.c, func() (time.Time, error) {
		es, err := cmd.Result()
		if err != nil {
			return time.Time{}, opErr("oldest", s.name, err)
		}
		if len(es) == 0 {
			return time.Time{}, nil
		}
		k, ok := parseKey(es[0].ID)
		if !ok {
			return time.Time{}, opErr("oldest", s.name, store.ErrReply)
		}
		return fromMs(k.ms), nil
	}, cmd)
}

func (s *memSorted) oldest() *store.Op[time.Time] {
	return store.Local(func() (time.Time, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.items) == 0 {
			return time.Time{}, nil
		}
		m := s.items[0].msg // the heap's root is the next delivered
		if s.kind == KindDelay {
			if m.Due.After(s.now()) {
				return time.Time{}, nil
			}
			return m.Due, nil
		}
		return m.EnqueuedAt, nil
	})
}

func (s *memStream) oldest() *store.Op[time.Time] {
	return store.Local(func() (time.Time, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.entries {
			if !e.deleted {
				return fromMs(e.key.ms), nil
			}
		}
		return time.Time{}, nil
	})
}
