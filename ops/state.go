package ops

// State is what a process knows about its capabilities at one moment: read
// once per GET /ops/global (which shows a part of it, see Global) and once
// per scrape of /metrics (which shows all of it). The Module fills it; see
// docs/ops.md for where each field comes from.
type State struct {
	Cache   CacheState
	Locks   LockState
	Ranks   RankState
	Queues  []QueueState // sorted by name
	Limiter LimiterState
	// Runtimes is the number of Lua runtimes open; Tasks the tasks alive in
	// them (running or suspended).
	Runtimes, Tasks int
}

// CacheState is the local cache of shield.global().
type CacheState struct {
	Entries      int
	Hits, Misses uint64
	HitRate      float64 // Hits / (Hits + Misses); 0 before any lookup
}

// LockState counts this process's holds (every lock kind) and waiters.
type LockState struct {
	Held, Waiting int64
	// Lost counts holds whose lease ran out or was taken over while held;
	// Abandoned holds released because their task ended without releasing
	// them.
	Lost, Abandoned int64
}

// RankState counts the leaderboards this process opened and their members.
type RankState struct {
	Boards, Members int
}

// QueueState is one queue this process opened. The facts are the queue's
// as the backend sees it: on Redis the same in every process.
type QueueState struct {
	Name, Kind string
	// Length: messages held (reliable: with those in flight and retrying;
	// broadcast: stream entries retained). Pending: delay messages not yet
	// due. Ready: deliverable now.
	Length, Pending, Ready int64
	InFlight, Retrying     int64
	// Consumers: processes that consumed within the last 10 s;
	// LocalConsumers: this process's consume / subscribe handles.
	Consumers, LocalConsumers int64
	DeadLetters               int64
	// OldestAgeMs: how long the oldest ready message has waited, in ms
	// (queue.Handle.Oldest); nil when the queue is empty.
	OldestAgeMs *int64
	// Counters since the queue was created.
	Expired, Trimmed, Reclaimed, Nacked, DeadLettered, DeadDropped int64
}

// LimiterState is this process's rate limiters.
type LimiterState struct {
	Limiters, ActiveKeys           int
	Allowed, Rejected, Unavailable uint64
	// Degraded counts token-bucket decisions made without a valid global
	// share (Redis unreachable); they are also in Allowed or Rejected.
	Degraded uint64
	// RejectedToday: Rejected and Unavailable since UTC midnight.
	RejectedToday       uint64
	Syncs, SyncFailures uint64
}

// Global is the part of s that GET /ops/global shows, in the spec's shape.
func (s State) Global() Global {
	g := Global{
		Data:        Data{CacheSize: s.Cache.Entries, CacheHitRate: s.Cache.HitRate},
		Locks:       Locks{Active: int(s.Locks.Held), Waiting: int(s.Locks.Waiting)},
		Ranks:       Ranks{Count: s.Ranks.Boards, TotalMembers: s.Ranks.Members},
		Queues:      make([]Queue, 0, len(s.Queues)),
		RateLimiter: RateLimiter{Active: s.Limiter.ActiveKeys, RejectedToday: int64(s.Limiter.RejectedToday)},
	}
	for _, q := range s.Queues {
		e := Queue{Name: q.Name}
		if q.Kind == "delay" {
			e.Pending, e.Ready = ptr(q.Pending), ptr(q.Ready)
		} else {
			e.Length, e.Consumers = ptr(q.Length), ptr(int(q.Consumers))
		}
		g.Queues = append(g.Queues, e)
	}
	return g
}

func ptr[T any](v T) *T { return &v }
