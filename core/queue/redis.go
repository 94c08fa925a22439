package queue

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/core/store"
)

// Redis is the Backend on Redis (standalone, Sentinel or Cluster). Every
// operation is one script (scripts/*.lua, each headed by its KEYS, ARGV and
// replies) on the keys of one queue, which share the hash tag {name}; times
// are the server's TIME. See docs/queues.md for the key layout and what
// Redis can only approximate.
//
// Goroutines: one notifier per queue (per broadcast group) with local
// waiters, started by the first PopWait and ended 30s after the last waiter
// left or by Close; one per Consume. The pub/sub bus given to NewRedis runs
// its own delivery goroutine.
type Redis struct {
	c        redis.UniversalClient
	keys     store.Keys
	bus      pubsub.Bus
	consumer string
	durable  store.Durability
	t        timing
	wg       sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	queues  map[string]*redisOpen
	stops   map[int]StopFunc
	nextReg int
}

type redisOpen struct {
	kind    Kind
	opts    Options
	q       any
	closeFn func()
}

// RedisOptions configure NewRedis.
type RedisOptions struct {
	// Consumer is this process's consumer name in every consumer group
	// (unique per process: "node_id:service_id:<random>"). "" means
	// "<hostname>:<pid>:<random>".
	Consumer string
	// Durability makes pushes (every kind of queue, dead-letter requeues
	// included) and acks wait for its replicas (see store.Durability); their
	// error is then a *store.NotDurableError when the replicas did not
	// confirm in time (the master applied the push or ack). Pops, nacks,
	// releases and extends do not wait: a failover that loses one delivers
	// the message again. Zero: off.
	Durability store.Durability
}

// timing holds the Redis backend's intervals (tests shorten them).
type timing struct {
	recheck       time.Duration // safety re-pop of a waiting plain/delay/priority queue
	streamRecheck time.Duration // the same for reliable and broadcast groups (bounds reclaim latency)
	reclaimGate   time.Duration // a group's visibility scan runs at most this often (all processes together)
	flagTTL       time.Duration // lifetime of the waiting flag a waiting process sets
	linger        time.Duration // a notifier without waiters ends after this
	popTimeout    time.Duration // client-side deadline of one notifier round trip
	maxBatch      int           // messages one notifier pop may take
}

var defaultTiming = timing{
	recheck:       time.Second,
	streamRecheck: 500 * time.Millisecond,
	reclaimGate:   100 * time.Millisecond,
	flagTTL:       3 * time.Second,
	linger:        30 * time.Second,
	popTimeout:    2 * time.Second,
	maxBatch:      64,
}

var _ Backend = (*Redis)(nil)

// NewRedis returns a backend on c with keys under prefix. bus carries the
// wake-ups: a pubsub.NewRedis(c, prefix, ...) bus on the same deployment and
// prefix (it may be shared); nil means no wake-ups (waiters then re-check
// every second, half a second for reliable and broadcast queues). It does no
// I/O; c and bus stay the caller's.
func NewRedis(c redis.UniversalClient, prefix string, bus pubsub.Bus, o RedisOptions) *Redis {
	if o.Consumer == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Consumer = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	return &Redis{c: c, keys: store.Keys{Prefix: prefix}, bus: bus, consumer: o.Consumer, durable: o.Durability, t: defaultTiming,
		queues: map[string]*redisOpen{}, stops: map[int]StopFunc{}}
}

// Consumer returns this process's consumer name.
func (r *Redis) Consumer() string { return r.consumer }

func (r *Redis) open(kind Kind, name string, o Options, mk func() (any, func())) (any, error) {
	if err := checkName("queue", name); err != nil {
		return nil, err
	}
	if err := o.validate(name); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, opErr("open", name, ErrClosed)
	}
	if e := r.queues[name]; e != nil {
		if e.kind != kind || e.opts != o {
			return nil, fmt.Errorf("queue: open %q as a %s queue: %w: it is open as a %s queue with options %+v",
				name, kind, ErrConflict, e.kind, e.opts)
		}
		return e.q, nil
	}
	q, closeFn := mk()
	r.queues[name] = &redisOpen{kind: kind, opts: o, q: q, closeFn: closeFn}
	return q, nil
}

// Plain opens a FIFO queue (a Redis list).
func (r *Redis) Plain(name string, o Options) (Plain, error) {
	q, err := r.open(KindPlain, name, o, func() (any, func()) {
		s := newRedisSorted(r, KindPlain, name, o)
		return &redisPlain{s}, s.n.close
	})
	if err != nil {
		return nil, err
	}
	return q.(*redisPlain), nil
}

// Delay opens a delay queue (a sorted set by due time).
func (r *Redis) Delay(name string, o Options) (Delay, error) {
	q, err := r.open(KindDelay, name, o, func() (any, func()) {
		s := newRedisSorted(r, KindDelay, name, o)
		return &redisDelay{s}, s.n.close
	})
	if err != nil {
		return nil, err
	}
	return q.(*redisDelay), nil
}

// Priority opens a priority queue (a sorted set by priority).
func (r *Redis) Priority(name string, o Options) (Priority, error) {
	q, err := r.open(KindPriority, name, o, func() (any, func()) {
		s := newRedisSorted(r, KindPriority, name, o)
		return &redisPriority{s}, s.n.close
	})
	if err != nil {
		return nil, err
	}
	return q.(*redisPriority), nil
}

// Reliable opens a reliable queue (a stream with one consumer group).
func (r *Redis) Reliable(name string, o Options) (Reliable, error) {
	q, err := r.open(KindReliable, name, o, func() (any, func()) {
		s := newRedisStream(r, KindReliable, name, o)
		return &redisReliable{redisReceiver: s.receiver(reliableGroup)}, s.close
	})
	if err != nil {
		return nil, err
	}
	return q.(*redisReliable), nil
}

// Broadcast opens a broadcast queue (a stream with a consumer group per
// subscriber group).
func (r *Redis) Broadcast(name string, o Options) (Broadcast, error) {
	q, err := r.open(KindBroadcast, name, o, func() (any, func()) {
		s := newRedisStream(r, KindBroadcast, name, o)
		return &redisBroadcast{s: s}, s.close
	})
	if err != nil {
		return nil, err
	}
	return q.(*redisBroadcast), nil
}

// Opened lists the open queues sorted by name.
func (r *Redis) Opened() []Opened {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Opened, 0, len(r.queues))
	for name, e := range r.queues {
		out = append(out, Opened{Kind: e.kind, Name: name})
	}
	slices.SortFunc(out, func(a, b Opened) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Close stops consumers (releasing their in-flight messages), fails waits
// with ErrClosed and waits for the notifiers to end.
func (r *Redis) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.wg.Wait()
		return nil
	}
	r.closed = true
	stops := make([]StopFunc, 0, len(r.stops))
	for _, s := range r.stops {
		stops = append(stops, s)
	}
	queues := make([]*redisOpen, 0, len(r.queues))
	for _, e := range r.queues {
		queues = append(queues, e)
	}
	r.mu.Unlock()
	stopAll(stops)
	for _, e := range queues {
		e.closeFn()
	}
	r.wg.Wait()
	return nil
}

func (r *Redis) register(stop StopFunc) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextReg++
	id := r.nextReg
	r.stops[id] = stop
	return func() {
		r.mu.Lock()
		delete(r.stops, id)
		r.mu.Unlock()
	}
}

func (r *Redis) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// channel is a notify channel relative to the bus prefix.
func (r *Redis) channel(name string) string {
	return strings.TrimPrefix(r.keys.QueueNotify(name), r.keys.Prefix)
}

// scriptErr maps a script's error reply: WRONGKIND to ErrConflict, the rest
// wrapped as an infrastructure error.
func scriptErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var re redis.Error
	if errors.As(err, &re) && strings.HasPrefix(err.Error(), "WRONGKIND") {
		return fmt.Errorf("queue: %s %q: %w: %s", op, name, ErrConflict, strings.TrimPrefix(err.Error(), "WRONGKIND "))
	}
	return opErr(op, name, err)
}

// The scripts; each file's header lists its KEYS, ARGV and replies. The
// prelude (helpers) is prepended to each.
var (
	//go:embed scripts/prelude.lua
	preludeSrc string
	//go:embed scripts/list_push.lua
	listPushSrc string
	//go:embed scripts/list_pop.lua
	listPopSrc string
	//go:embed scripts/list_unpop.lua
	listUnpopSrc string
	//go:embed scripts/zset_push.lua
	zsetPushSrc string
	//go:embed scripts/zset_pop.lua
	zsetPopSrc string
	//go:embed scripts/zset_unpop.lua
	zsetUnpopSrc string
	//go:embed scripts/zset_count.lua
	zsetCountSrc string
	//go:embed scripts/purge.lua
	purgeSrc string
	//go:embed scripts/stats.lua
	statsSrc string

	listPushScript  = script("list_push.lua", listPushSrc)
	listPopScript   = script("list_pop.lua", listPopSrc)
	listUnpopScript = script("list_unpop.lua", listUnpopSrc)
	zsetPushScript  = script("zset_push.lua", zsetPushSrc)
	zsetPopScript   = script("zset_pop.lua", zsetPopSrc)
	zsetUnpopScript = script("zset_unpop.lua", zsetUnpopSrc)
	zsetCountScript = script("zset_count.lua", zsetCountSrc)
	purgeScript     = script("purge.lua", purgeSrc)
	statsScript     = script("stats.lua", statsSrc)
)

func script(name, src string) *store.Script {
	return store.NewScript("queue/"+name, preludeSrc+"\n"+src)
}
