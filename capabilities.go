package shieldglobal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shieldrt/shieldglobal/bindings"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	"github.com/shieldrt/shieldglobal/ops"
)

// The capability table (gopher-lua's luaLibs, asynq's components). Each row
// is one capability of the Module. New starts the enabled rows in table
// order; NewRuntime installs their runtime parts into the shield table in
// that order; the ops report reads their stats; Close closes the started
// rows in reverse order. Adding a capability is one row here and a file of
// its own with its start function.
//
// The order is the order of shutdown, read backwards, and it matters:
//
//   - ops first: the endpoint stops reading the other capabilities;
//   - the scheduler before what its runs use (Go runs, such as leaderboard
//     resets, get global.runtime.shutdown_grace to finish);
//   - queues before rate limiters (as before the table; neither needs the
//     other);
//   - rate limiters hand their shares back while the Redis client is open;
//   - locks after them (the local expiry timer, the Redlock clients);
//   - global last of the rows: its pub/sub buses (the internal one carries
//     lock wake-ups and cache invalidations); then Close closes the
//     module's own Redis client.
//
// Start order has one constraint of its own: rank after scheduler (periodic
// resets register with the Engine), and locks after global (lock wake-ups
// ride the internal bus global opens).
var capabilities = []capability{
	{name: "global", start: (*Module).startGlobal},
	{name: "lock", enabled: func(c *Config) bool { return c.Lock.Enabled }, start: (*Module).startLocks},
	{name: "rate_limiter", enabled: func(c *Config) bool { return c.RateLimiter.Enabled }, start: (*Module).startRateLimiters},
	{name: "queue", enabled: func(c *Config) bool { return c.Queue.Enabled }, start: (*Module).startQueues},
	{name: "scheduler", enabled: func(c *Config) bool { return c.Scheduler.Enabled }, start: (*Module).startScheduler},
	{name: "rank", enabled: func(c *Config) bool { return c.Rank.Enabled }, start: (*Module).startRanks},
	{name: "ops", enabled: func(c *Config) bool { return c.Ops.Enabled }, start: (*Module).startOps},
}

// capability is one row of the table.
type capability struct {
	name string
	// enabled says whether the config switches the capability on (nil:
	// always, when global.enabled is true).
	enabled func(c *Config) bool
	// start opens what the capability needs. On error, the part it returns
	// (possibly partial) is still closed.
	start func(m *Module) (part, error)
}

// part is a started capability.
type part struct {
	// install is what it puts into the shield table of every new runtime
	// (nil: nothing).
	install runtime.Capability
	// stats fills in its share of the ops report (nil: none). An error
	// names the part; the rest of s is still filled in.
	stats func(ctx context.Context, s *ops.State) error
	// close releases what start opened (nil: nothing). Called once.
	close func() error
}

// started is a part with the name of its row.
type started struct {
	name string
	part
}

// startCapabilities starts the enabled rows of table in order. On error the
// rows started so far are left in m.parts for Close.
func (m *Module) startCapabilities(table []capability) error {
	for _, c := range table {
		if c.enabled != nil && !c.enabled(&m.cfg) {
			continue
		}
		p, err := c.start(m)
		m.parts = append(m.parts, started{name: c.name, part: p})
		// The ops row serves /metrics as soon as it started, and a scrape
		// reads the parts: it gets its own copy.
		m.reported.Store(ptr(slices.Clone(m.parts)))
		if err != nil {
			return err
		}
		if p.install != nil {
			m.installs = append(m.installs, p.install)
		}
	}
	return nil
}

// closeCapabilities closes the started parts in reverse order, each once.
func (m *Module) closeCapabilities() error {
	var err error
	for i := len(m.parts) - 1; i >= 0; i-- {
		if c := m.parts[i].close; c != nil {
			err = errors.Join(err, c())
		}
	}
	return err
}

// capabilityStats fills in s from every started part.
func (m *Module) capabilityStats(ctx context.Context, s *ops.State) error {
	var errs error
	parts := m.reported.Load()
	if parts == nil {
		return nil
	}
	for _, p := range *parts {
		if p.stats != nil {
			errs = errors.Join(errs, p.stats(ctx, s))
		}
	}
	return errs
}

// The parts of the rows above that are not in their own files.

func (m *Module) startGlobal() (part, error) {
	err := m.openGlobal()
	return part{install: m.global,
		stats: func(_ context.Context, s *ops.State) error {
			c := m.CacheStats()
			s.Cache = ops.CacheState{Entries: c.Size, Hits: c.Hits, Misses: c.Misses, HitRate: c.HitRate}
			return nil
		},
		close: func() error {
			var err error
			if m.internal != nil {
				err = errors.Join(err, closedQuietly(m.internal.Close()))
			}
			if m.bus != nil {
				err = errors.Join(err, closedQuietly(m.bus.Close()))
			}
			return err
		}}, err
}

func (m *Module) startLocks() (part, error) {
	err := m.openLocks()
	p := part{close: func() error {
		var err error
		if m.localLocks != nil {
			m.localLocks.StopExpiry()
		}
		for _, c := range m.redlock {
			err = errors.Join(err, closedQuietly(c.Close()))
		}
		return err
	}}
	if err != nil {
		return p, err
	}
	p.install = m.locks
	p.stats = func(_ context.Context, s *ops.State) error {
		l := m.locks.Stats()
		s.Locks = ops.LockState{Held: l.Holds, Waiting: l.Waiting, Lost: l.Lost, Abandoned: l.Abandoned}
		return nil
	}
	return p, nil
}

func (m *Module) startRateLimiters() (part, error) {
	m.openRateLimiters()
	return part{install: m.limiters,
		stats: func(_ context.Context, s *ops.State) error {
			l := m.RateLimiterStats()
			s.Limiter = ops.LimiterState{Limiters: l.Limiters, ActiveKeys: l.ActiveKeys, Allowed: l.Allowed, Rejected: l.Rejected,
				Unavailable: l.Unavailable, Degraded: l.Degraded, RejectedToday: l.RejectedToday, Syncs: l.Syncs, SyncFailures: l.SyncFailures}
			return nil
		},
		close: func() error {
			m.rateLimiters.Stop() // hands the shares back first (at most about a second)
			return nil
		}}, nil
}

func (m *Module) startQueues() (part, error) {
	m.openQueues()
	return part{install: m.queues,
		stats: func(ctx context.Context, s *ops.State) error {
			qs, err := m.QueueStats(ctx)
			if err != nil {
				err = fmt.Errorf("queues: %w", err)
			}
			ages, aerr := m.oldestAges(ctx, qs)
			if aerr != nil {
				err = errors.Join(err, fmt.Errorf("queues: oldest message: %w", aerr))
			}
			for i, q := range qs {
				s.Queues = append(s.Queues, ops.QueueState{Name: q.Name, Kind: q.Kind.String(), OldestAgeMs: ages[i],
					Length: q.Length, Pending: q.Pending, Ready: q.Ready, InFlight: q.InFlight, Retrying: q.Retrying,
					Consumers: q.Consumers, LocalConsumers: int64(q.LocalConsumers), DeadLetters: q.DeadLetters,
					Expired: q.Expired, Trimmed: q.Trimmed, Reclaimed: q.Reclaimed, Nacked: q.Nacked,
					DeadLettered: q.DeadLettered, DeadDropped: q.DeadDropped})
			}
			return err
		},
		close: func() error {
			m.queues.Drain(5 * time.Second) // releases runtimes sent as they closed
			err := m.queueBackend.Close()
			if m.queueBus != nil {
				err = errors.Join(err, m.queueBus.Close())
			}
			return err
		}}, nil
}

func (m *Module) startScheduler() (part, error) {
	if err := m.openScheduler(); err != nil {
		return part{}, err
	}
	return part{install: m.schedBinding, close: m.closeScheduler}, nil
}

func (m *Module) startRanks() (part, error) {
	m.openRanks()
	if m.sched != nil {
		m.ranks.Scheduler = bindings.EngineResets{Engine: m.sched, Busy: m.resetsBusy} // periodic resets
	}
	return part{install: m.ranks,
		stats: func(ctx context.Context, s *ops.State) error {
			r, err := m.ranks.Stats(ctx)
			if err != nil {
				err = fmt.Errorf("ranks: %w", err)
			}
			s.Ranks = ops.RankState{Boards: r.Boards, Members: r.Members}
			return err
		}}, nil
}

func (m *Module) startOps() (part, error) {
	if err := m.openOps(); err != nil {
		return part{}, err
	}
	return part{close: m.ops.Close}, nil
}

func ptr[T any](v T) *T { return &v }
