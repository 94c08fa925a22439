// Package shieldglobal gives gopher-lua scripts of a game server the global
// capabilities of shield_global as the shield.* namespace: shared data with a
// local cache, pub/sub, local and distributed locks, leaderboards, five kinds
// of queues, rate limiters and a cron scheduler, backed by Redis when several
// processes share state and by an in-process backend otherwise; and an ops
// endpoint with the spec's reports and Prometheus metrics.
//
// One Module per process; one Runtime per *lua.LState:
//
//	cfg, err := shieldglobal.LoadConfig("global.yaml")
//	mod, err := shieldglobal.New(cfg)
//	defer mod.Close()
//	rt, err := mod.NewRuntime(lua.NewState())
//	defer rt.Close(5 * time.Second)
//	err = rt.RunFile("main.lua")
package shieldglobal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/bindings"
	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/kv"
	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/lock/local"
	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/core/rank"
	"github.com/shieldrt/shieldglobal/core/ratelimit"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/clock"
	"github.com/shieldrt/shieldglobal/internal/edge"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	"github.com/shieldrt/shieldglobal/ops"
)

// Config is the module configuration (see config/global.yaml).
type Config = config.Config

// ErrRuntimeClosed is returned by a Runtime's Do, RunFile and RunString once
// it is closing.
var ErrRuntimeClosed = runtime.ErrClosed

// LoadConfig reads and strictly validates a YAML config file.
func LoadConfig(path string) (Config, error) { return config.Load(path) }

// DefaultConfig returns the documented defaults (memory backend).
func DefaultConfig() Config { return config.Default() }

// Option customises New.
type Option func(*options)

type options struct {
	client redis.UniversalClient
	log    *slog.Logger
	clock  clock.Clock // nil: the real clock; see withClock
	// resetsBusy is rank.EngineResets.Busy (withClock): the virtual clock
	// waits for a Go-run rank reset under way.
	resetsBusy func() (done func())
}

// withClock runs the module on c instead of the system clock: the spec
// runner's virtual time (vtime.go). Only the memory backend follows it
// (Redis keeps its own time), so New refuses it with Redis configured.
// busy, when set, is told of each Go-run rank reset (rank.EngineResets.Busy).
func withClock(c clock.Clock, busy func() (done func())) Option {
	return func(o *options) { o.clock, o.resetsBusy = c, busy }
}

// WithRedisClient hands the module the host's own client: what
// global.redis.inherit: true refers to. The module never closes it.
func WithRedisClient(c redis.UniversalClient) Option { return func(o *options) { o.client = c } }

// WithLogger sets the logger of the module and its Lua scripts (shield.log).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// Backend names which backend a Module runs on.
type Backend string

// The backends.
const (
	BackendNone   Backend = "none" // global.enabled is false
	BackendMemory Backend = "memory"
	BackendRedis  Backend = "redis"
)

// Module is the process-wide part of shield_global: config, backend clients
// and state shared by every Lua state of the process. Goroutine-safe.
type Module struct {
	cfg     Config
	backend Backend
	log     *slog.Logger
	// clock is the time of the memory backend, the scheduler and the
	// runtimes' timers: clock.Real unless withClock.
	clock   clock.Clock
	virtual bool // withClock: a virtual clock (the spec runner's)
	// resetsBusy: withClock's busy (nil without).
	resetsBusy func() (done func())

	client redis.UniversalClient // the Redis client in use (nil on memory or disabled)
	// kv, bus and cache back shield.global(); nil when the module is
	// disabled (cache also when global.cache.enabled is false).
	kv    kv.Store
	bus   pubsub.Bus
	cache *kv.Cache

	// localLocks are the in-process locks (shield.mutex, rwlock, spinlock)
	// and distLocks the distributed ones; nil when lock.enabled is false.
	localLocks *local.Manager
	distLocks  lock.Backend
	// rateLimiters are the process's rate limiters (shield.rate_limiter):
	// in-process on the memory backend, sharing their limits through Redis
	// otherwise; nil when rate_limiter.enabled is false.
	rateLimiters *ratelimit.Set
	// rankBackend backs shield.rank; nil when rank.enabled is false.
	rankBackend rank.Backend
	// queueBackend is the message-queue backend shared by every runtime;
	// nil when queue.enabled is false.
	queueBackend queue.Backend

	global     *bindings.Global
	locks      *bindings.Locks
	ranks      *bindings.Ranks
	queues     *bindings.Queues
	queueBus   pubsub.Bus // Redis: queue wake-ups (channels under the global prefix)
	limiters   *bindings.Limiters
	redlock    []redis.UniversalClient // lock.redlock nodes
	owner      runtime.Owner
	ownsClient bool
	instance   string     // tells this process's cache announcements from others'
	internal   pubsub.Bus // Redis: cache invalidations and lock wake-ups, on their own connection
	closeOnce  sync.Once
	closed     atomic.Bool
	// ctx is the parent of every runtime's context; Close cancels it with
	// ErrModuleClosed.
	ctx    context.Context
	cancel context.CancelCauseFunc

	hostMu   sync.Mutex
	exposed  []exposed                // Expose: set in every new runtime
	runtimes map[*lua.LState]*Runtime // for Loader and the ops report

	// The scheduler (nil when scheduler.enabled is false): its Engine, the
	// binding shared by the runtimes, the Redis store (nil on memory), and
	// the context of Go-run tasks (scheduleGo); see scheduler.go.
	sched        *scheduler.Engine
	schedBinding *bindings.Scheduler
	schedStore   *scheduler.Redis
	schedCtx     context.Context
	schedCancel  context.CancelFunc
	ops          *ops.Server  // nil unless ops.enabled
	metrics      *ops.Metrics // nil when global.enabled is false (ops.go)
	failing      sync.Map     // task name -> true: its latest attempt here failed (ops.go)

	// parts are the started rows of the capability table, in table order
	// (capabilities.go), and installs their runtime sides: set by New,
	// read-only afterwards. reported is what the ops report reads (see
	// startCapabilities).
	parts    []started
	installs []runtime.Capability
	reported atomic.Pointer[[]started]
}

// New builds the Module cfg describes. With global.enabled false it returns a
// Module with no capability, opens no connection and starts no goroutine.
// Errors: an invalid config, global.redis.inherit without WithRedisClient, or
// Redis not answering (the error says where it tried).
func New(cfg Config, opts ...Option) (*Module, error) {
	return newWithTable(cfg, capabilities, opts...)
}

// newWithTable is New with the capability table to run (tests hand their own).
func newWithTable(cfg Config, table []capability, opts ...Option) (*Module, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := o.log
	if log == nil {
		log = slog.Default()
	}
	m := &Module{cfg: cfg, backend: BackendNone, log: log, clock: clock.OrReal(o.clock), virtual: o.clock != nil, resetsBusy: o.resetsBusy}
	m.ctx, m.cancel = context.WithCancelCause(context.Background())
	store.RouteLogs(log) // go-redis's own log lines go through our logger
	nodeID, err := cfg.Global.EffectiveNodeID()
	if err != nil {
		return nil, err
	}
	m.owner = runtime.Owner{NodeID: nodeID, ServiceID: cfg.Global.ServiceID, ServiceName: cfg.Global.EffectiveServiceName(), Instance: randomID(4)}
	if !cfg.Global.Enabled {
		return m, nil
	}
	if err := m.connect(o.client); err != nil {
		return nil, err
	}
	if m.virtual && m.backend != BackendMemory {
		m.Close()
		return nil, ErrVirtualTimeRedis
	}
	m.startMetrics()
	if err := m.startCapabilities(table); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Config returns the configuration the module was built with (after
// validation and environment overrides).
func (m *Module) Config() Config { return m.cfg }

// Backend tells which backend the module runs on.
func (m *Module) Backend() Backend { return m.backend }

// Logger returns the module's logger (WithLogger, or slog.Default()).
func (m *Module) Logger() *slog.Logger { return m.log }

// Redis returns the Redis client in use: the module's own, or the host's
// (WithRedisClient); nil on the memory backend or when disabled. Do not
// close it.
func (m *Module) Redis() redis.UniversalClient { return m.client }

// durability is what global.redis.wait_replicas and wait_timeout ask of the
// writes that must survive a failover (docs/durability.md).
func (m *Module) durability() store.Durability {
	r := m.cfg.Global.Redis
	return store.Durability{Replicas: r.WaitReplicas, Timeout: time.Duration(r.WaitTimeout) * time.Millisecond}
}

// openRanks builds the leaderboard backend: in-process on the memory
// backend, else on Redis under the module's prefix. Periodic resets need a
// scheduler (bindings.Ranks.Scheduler); without one shield.rank refuses the
// reset option.
func (m *Module) openRanks() {
	c := m.cfg.Rank
	if m.backend == BackendMemory {
		m.rankBackend = rank.NewMemory(m.clock.Now)
	} else {
		m.rankBackend = rank.NewRedis(m.client, m.cfg.Global.Redis.Prefix, rank.WithDurability(m.durability()))
	}
	m.ranks = &bindings.Ranks{Backend: m.rankBackend, MaxMembers: c.MaxMembers, Archive: c.Reset.Enabled,
		ArchiveTTL: config.Seconds(c.Reset.ArchiveTTL), Log: m.log}
}

// openQueues opens the queue backend. Each process is its own consumer in
// the reliable and broadcast queues' consumer groups, named
// node_id:service_id:instance (instance is random per process, so two
// processes of one host and config never share a consumer).
func (m *Module) openQueues() {
	q := &bindings.Queues{Config: m.cfg.Queue}
	consumer := m.owner.Process()
	if m.backend == BackendMemory {
		m.queueBackend, q.Inline = queue.NewMemory(queue.MemoryOptions{Consumer: consumer, Clock: m.clock}), true
	} else {
		// The queue scripts publish wake-ups on <prefix>queue:{name}:notify
		// and the core subscribes to channel names relative to the global
		// prefix: a bus of its own under that prefix (neither the user bus,
		// under <prefix>pubsub:, nor the internal one, with full names, fits).
		prefix := m.cfg.Global.Redis.Prefix
		m.queueBus = pubsub.NewRedis(m.client, prefix, pubsub.Events{
			Down: func(err error) {
				m.log.Warn("shield: queue pub/sub connection down; waiting consumers re-check every 0.5-1 s", "error", err)
			},
			Up: func() { m.log.Info("shield: queue pub/sub connection back") },
		})
		m.queueBackend = queue.NewRedis(m.client, prefix, m.queueBus, queue.RedisOptions{Consumer: consumer, Durability: m.durability()})
	}
	q.Backend = m.queueBackend
	m.queues = q
}

func (m *Module) openLocks() error {
	c := m.cfg.Lock
	m.localLocks = local.NewManager(m.clock.Now)
	if m.virtual {
		m.localLocks.UseClock(func(d time.Duration, f func()) func() bool { return m.clock.AfterFunc(d, f).Stop })
	}
	m.localLocks.StartExpiry()
	l := &bindings.Locks{Local: m.localLocks, Config: c, OnWaited: m.lockWaited, Clock: m.clock}
	prefix := m.cfg.Global.Redis.Prefix
	if m.backend == BackendMemory {
		m.distLocks = lock.NewMemory(m.clock.Now)
	} else {
		m.distLocks = lock.NewRedis(m.client, prefix, m.internal, lock.WithDurability(m.durability()), lock.WithServiceName(m.owner.ServiceName))
	}
	l.Dist = m.distLocks
	if c.Redlock.Enabled {
		// Independent masters (host:port, checked by the config) with the
		// credentials of global.redis and short timeouts: a slow node must not
		// eat the lock's validity.
		g := m.cfg.Global.Redis
		nodes := make([]lock.Backend, 0, len(c.Redlock.Addrs))
		for _, addr := range c.Redlock.Addrs {
			client, err := store.NewClient(store.Options{Addrs: []string{addr}, Username: g.Username, Password: g.Password,
				TLS: g.TLS, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
			if err != nil {
				return fmt.Errorf("shield: lock.redlock.addrs: %w", err)
			}
			m.redlock = append(m.redlock, client)
			nodes = append(nodes, lock.NewRedis(client, prefix, nil, lock.WithServiceName(m.owner.ServiceName)))
		}
		l.Redlock = lock.NewRedlock(nodes, c.Redlock.Quorum)
	}
	m.locks = l
	return nil
}

// openRateLimiters starts the process's one limiter Set. On Redis it
// reports under a process id unique to this process (node, service and a
// random instance: a restarted process never inherits a dead one's
// leases), and the first report round is awaited so the process is
// counted before a script meets its first key.
func (m *Module) openRateLimiters() {
	cfg := edge.RateLimiterConfig(m.cfg.RateLimiter)
	cfg.Logger = m.log
	cfg.ProcessID = m.owner.Process()
	if m.virtual {
		cfg.Now = m.clock.Now
		cfg.AfterFunc = func(d time.Duration, f func()) func() bool { return m.clock.AfterFunc(d, f).Stop }
	}
	if m.backend == BackendMemory {
		m.rateLimiters = ratelimit.NewMemory(cfg)
	} else {
		m.rateLimiters = ratelimit.NewRedis(m.client, m.cfg.Global.Redis.Prefix, cfg)
	}
	m.rateLimiters.Start()
	if m.backend == BackendRedis {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := m.rateLimiters.SyncNow(ctx); err != nil {
			m.log.Warn("shield: rate limiter: first report failed; new keys start on a guess until Redis answers", "error", err)
		}
		cancel()
	}
	m.limiters = &bindings.Limiters{Set: m.rateLimiters, Algorithm: ratelimit.Algorithm(m.cfg.RateLimiter.Algorithm)}
}

// RateLimiterStats returns the counters of this process's rate limiters
// (zero when rate_limiter.enabled is false). The ops endpoint reports
// ActiveKeys as rate_limiter.active (keys with local state: token-bucket
// keys, and sliding-window keys of the memory backend; a Redis sliding
// window keeps none) and RejectedToday as rate_limiter.rejected_today
// (requests refused, as over the limit or unavailable, since UTC
// midnight). Cheap: no Redis call.
func (m *Module) RateLimiterStats() ratelimit.Stats {
	if m.rateLimiters == nil {
		return ratelimit.Stats{}
	}
	return m.rateLimiters.Stats()
}

func (m *Module) connect(host redis.UniversalClient) error {
	r := m.cfg.Global.Redis
	switch {
	case r.Inherit && host == nil:
		return errors.New("shield: global.redis.inherit is true but no client was handed to New (use WithRedisClient)")
	case r.Inherit:
		m.client = host
	case r.Configured():
		c, err := store.NewClient(edge.RedisOptions(r))
		if err != nil {
			return fmt.Errorf("shield: %w", err)
		}
		m.client, m.ownsClient = c, true
	default:
		m.backend = BackendMemory
		m.log.Info("shield: no Redis configured (global.redis), using the in-process memory backend")
		return nil
	}
	m.backend = BackendRedis
	if err := store.Ping(context.Background(), m.client, edge.DescribeRedis(r), 5*time.Second); err != nil {
		if m.ownsClient {
			m.client.Close()
		}
		return fmt.Errorf("shield: global.redis: %w", err)
	}
	return nil
}

func (m *Module) openGlobal() error {
	c := m.cfg.Global.Cache
	keys := store.Keys{Prefix: m.cfg.Global.Redis.Prefix}
	g := &bindings.Global{CacheTTL: config.Millis(c.DefaultTTL)}
	if c.Enabled {
		m.cache = kv.NewCache(c.MaxSize, m.clock.Now)
		g.Cache = m.cache
	}
	if m.backend == BackendMemory {
		m.kv, m.bus = kv.NewMemory(kv.WithClock(m.clock.Now)), pubsub.NewMemory()
		g.Inline = true
	} else {
		m.bus = pubsub.NewRedis(m.client, keys.PubSubPrefix(), pubsub.Events{
			Down: func(err error) {
				m.log.Warn("shield: pub/sub connection down; subscriptions resume when it is back", "error", err)
			},
			Up: func() { m.log.Info("shield: pub/sub connection back; subscriptions resumed") },
		})
		// The internal bus takes full channel names (store.Keys builds them).
		m.internal = pubsub.NewRedis(m.client, "", pubsub.Events{
			// SetBypass clears the cache whenever it flips.
			Down: func(err error) {
				if m.cache != nil {
					m.cache.SetBypass(true)
				}
				m.log.Warn("shield: internal pub/sub connection down; local cache bypassed, lock waiters poll", "error", err)
			},
			Up: func() {
				if m.cache != nil {
					m.cache.SetBypass(false)
				}
				m.log.Info("shield: internal pub/sub connection back; local cache cleared")
			},
		})
		opts := []kv.RedisOption{kv.WithDurability(m.durability())}
		if c.Enabled && c.Sync {
			if err := m.startCacheSync(g, keys); err != nil {
				return err
			}
			opts = append(opts, kv.WithAnnounce(keys.CacheInvalidation(), m.instance))
		}
		m.kv = kv.NewRedis(m.client, keys.Prefix, opts...)
	}
	g.Store, g.Bus = m.kv, m.bus
	m.global = g
	return nil
}

// startCacheSync subscribes to the invalidation channel on the internal bus
// (writes announce their keys there, see kv.WithAnnounce). While that
// connection is down the cache is bypassed, and it is cleared when it comes
// back: announcements may have been missed, so nothing stale is ever
// served.
func (m *Module) startCacheSync(g *bindings.Global, keys store.Keys) error {
	m.instance = randomID(8)
	channel := keys.CacheInvalidation()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := m.internal.Subscribe(ctx, channel, func(msg pubsub.Message) {
		origin, key, ok := strings.Cut(string(msg.Payload), "\n")
		if ok && origin != m.instance {
			g.Evict(key)
		}
	})
	if err != nil {
		return fmt.Errorf("shield: global.cache.sync: %w", err)
	}
	return nil
}

// NewRuntime installs shield into L and starts its loop. L then belongs to
// the runtime: reach it only through Runtime.Do / RunFile / RunString.
// Errors: ErrModuleClosed after Close; ErrRuntimeInUse when L (or a thread
// of L) already has a runtime that is not closed, of this Module or another
// (two loops would drive one state); a Lua state without the base
// libraries.
func (m *Module) NewRuntime(L *lua.LState) (*Runtime, error) {
	if m.closed.Load() {
		return nil, ErrModuleClosed
	}
	release, err := claim(L)
	if err != nil {
		return nil, err
	}
	brt, err := runtime.NewRuntime(L, &runtime.Services{Context: m.ctx, Log: m.log, Owner: m.owner, Capabilities: m.installs,
		Now: m.clock.Now, Clock: m.runtimeClock(), SlowTask: config.Millis(m.cfg.Global.Runtime.SlowTask), Observe: m.observers()})
	if err != nil {
		release()
		return nil, err
	}
	brt.OnStop(release)
	rt := &Runtime{rt: brt, state: L}
	return rt, m.attach(L, rt)
}

// StateOptions are the lua.Options recommended for a Lua state given to
// NewRuntime: lua.NewState(shieldglobal.StateOptions()). With them tasks may
// recurse 2 000 levels deep (lua.NewState()'s default allows 256); either
// way every task thread starts small (see docs/embedding.md).
func StateOptions() lua.Options { return runtime.StateOptions() }

// ErrModuleClosed is returned by NewRuntime once the module is closed, and
// matches (errors.Is) the error of every capability call made afterwards
// from a runtime left open: its message, "shield: module closed", is in the
// Lua error.
var ErrModuleClosed = store.ErrModuleClosed

// CacheStats are the counters of the local cache of shield.global.
type CacheStats struct {
	Size    int     // entries held now (some may have expired but not yet been dropped)
	Hits    uint64  // reads the cache answered
	Misses  uint64  // reads it did not (missing, expired, or bypassed while the invalidation channel was down)
	HitRate float64 // Hits / (Hits + Misses); 0 before any lookup
}

// CacheStats reports the local cache (zero when it is off).
func (m *Module) CacheStats() CacheStats {
	if m.cache == nil {
		return CacheStats{}
	}
	s := m.cache.Stats()
	return CacheStats(s)
}

// QueueInfo is the ops view of one queue; see QueueStats.
type QueueInfo struct {
	// Stats are the queue's facts as the backend sees them: on Redis,
	// across every process (Consumers counts the processes seen in the last
	// 10 s).
	queue.Stats
	// LocalConsumers counts the consume / subscribe handles running in this
	// process.
	LocalConsumers int
}

// QueueStats returns, sorted by name, the ops facts of every queue this
// process opened: kind, length, pending / ready (delay), in flight and
// retrying (reliable, broadcast per group), consumers (processes seen in
// the last 10 s; LocalConsumers: consume / subscribe handles of this
// process), dead letters and the counters (expired, trimmed, reclaimed,
// nacked, dead-lettered, dead-dropped). On Redis it is one pipeline. nil
// when queue.enabled is false. A queue whose stats could not be read is
// left out and its error joined into err.
func (m *Module) QueueStats(ctx context.Context) ([]QueueInfo, error) {
	if m.queues == nil {
		return nil, nil
	}
	infos, err := m.queues.Stats(ctx)
	out := make([]QueueInfo, len(infos))
	for i, q := range infos {
		out[i] = QueueInfo(q)
	}
	return out, err
}

// Close releases what the module opened: the capabilities in reverse order
// of the capability table (capabilities.go), that is the ops endpoint; the
// scheduler (Go runs in progress get global.runtime.shutdown_grace); queue
// settles still being sent (up to 5 s), then the queue consumers (in-flight
// reliable messages are released for immediate redelivery) and the queue
// bus; the rate limiters (their shares handed back, about a second at
// most); the lock expiry and the Redlock clients; the internal and user
// pub/sub connections. Then its own Redis client (not one handed in with
// WithRedisClient). Close runtimes first. Idempotent.
func (m *Module) Close() error {
	var err error
	m.closeOnce.Do(func() {
		m.closed.Store(true)
		if m.cancel != nil {
			m.cancel(ErrModuleClosed) // runtimes left open fail their calls with it
		}
		err = errors.Join(err, m.closeCapabilities()) // in reverse table order (capabilities.go)
		if m.ownsClient && m.client != nil {
			err = errors.Join(err, closedQuietly(m.client.Close()))
		}
	})
	return err
}

// closedQuietly drops a Close error that only says the connection was
// closed already (net.ErrClosed: "use of closed network connection"), as
// go-redis's Sentinel client reports for its Sentinel pub/sub connection
// when that connection had been closed by a reconnect or a failover. At a
// clean exit it is no failure, and `shield run` printed it as one.
func closedQuietly(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// randomID returns n random bytes in hex.
func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
