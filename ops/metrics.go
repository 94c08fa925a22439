package ops

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// Metrics is the Prometheus registry of a Module (GET /metrics). Events are
// observed as they happen through the methods below; State is read at
// scrape time, so the core packages never depend on Prometheus. Names follow
// Prometheus conventions: shield_ prefix, units in names, _total counters
// (docs/ops.md lists them all).
//
// Labels that carry names (queue, task, operation) are bounded: each family
// keeps at most MetricsOptions.LabelCap names, and counts the rest under the
// value Other (see labels.go). A removed task's series and an idle queue's
// leave the registry and free their place.
type Metrics struct {
	// Registry holds the shield_* metrics; the endpoint adds the Go
	// runtime's and the process's (see Gatherer).
	Registry *prometheus.Registry
	process  *prometheus.Registry
	opts     MetricsOptions

	// LockWait observes how long each acquire that had to wait waited.
	LockWait prometheus.Histogram
	// TriggerLateness observes each scheduled firing's start minus its
	// scheduled time (first attempts of firings, not manual triggers).
	TriggerLateness prometheus.Histogram
	// LoopLag observes how long posted work waits before a runtime's loop
	// runs it (probed every 250 ms per runtime).
	LoopLag prometheus.Histogram
	// TaskErrors counts tasks, callbacks and scheduled runs that ended
	// with an uncaught error.
	TaskErrors prometheus.Counter

	// By task: finished runs by result, missed and skipped firings, run
	// durations.
	schedRuns, schedMissed, schedSkipped *prometheus.CounterVec
	schedDuration                        *prometheus.HistogramVec
	// By operation: failed Lua calls; Redis round trips by command.
	redisErrors    *prometheus.CounterVec
	redisRoundTrip *prometheus.HistogramVec
	// By queue: consumer handler durations.
	queueHandler *prometheus.HistogramVec

	tasks, queues, ops, commands *labelCap
	idle                         queueIdle
}

// MetricsOptions bound the registry's labels.
type MetricsOptions struct {
	// LabelCap is how many names one family keeps (ops.metrics.label_cap);
	// <= 0 means 100.
	LabelCap int
	// IdleAfter is how long a queue stays empty, without consumers and
	// unchanged before its series leave (ops.metrics.idle_after); <= 0
	// means 5 min.
	IdleAfter time.Duration
	// Now is the clock of IdleAfter; nil means time.Now.
	Now func() time.Time
	// Tasks lists the scheduler tasks that exist now. Before each gather
	// the series of tasks no longer listed (removed, or one-shot tasks
	// that ran) are dropped. nil: task series are never dropped.
	Tasks func(ctx context.Context) ([]string, error)
}

// NewMetrics returns a registry with the event instruments, the metrics of
// state (read through state at each scrape, with a deadline of 5 s) and the
// Go runtime and process collectors.
func NewMetrics(state func(ctx context.Context) (State, error), o MetricsOptions) *Metrics {
	if o.LabelCap <= 0 {
		o.LabelCap = 100
	}
	if o.IdleAfter <= 0 {
		o.IdleAfter = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		opts:     o,
		LockWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shield_lock_acquire_wait_seconds", Help: "Time acquires that had to wait waited for the lock.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		TriggerLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shield_scheduler_trigger_lateness_seconds", Help: "Start of each scheduled firing minus its scheduled time.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 5, 60},
		}),
		schedRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shield_scheduler_runs_total", Help: "Finished runs of scheduled tasks in this process, by task and result (ok, failed).",
		}, []string{"task", "result"}),
		schedMissed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shield_scheduler_missed_total", Help: "Firings that did not run (the process was down, or too late), by task.",
		}, []string{"task"}),
		schedSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shield_scheduler_skipped_total", Help: "Firings skipped because the previous run was still going (overlap skip), by task.",
		}, []string{"task"}),
		schedDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shield_scheduler_run_duration_seconds", Help: "How long each attempt of a scheduled run took, by task.",
			Buckets: []float64{.001, .01, .05, .1, .5, 1, 5, 30, 120},
		}, []string{"task"}),
		LoopLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shield_loop_lag_seconds", Help: "How long posted work waits for a runtime's loop (probed every 250ms).",
			Buckets: []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5},
		}),
		redisErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shield_redis_errors_total", Help: "Lua calls whose Redis operation failed, by call.",
		}, []string{"operation"}),
		redisRoundTrip: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shield_redis_roundtrip_seconds", Help: "Redis round trips of the module's client, by command (pipeline and multi for batches).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .5, 1, 5},
		}, []string{"operation"}),
		queueHandler: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shield_queue_handler_duration_seconds", Help: "How long consumer handlers took per message, by queue.",
			Buckets: []float64{.0005, .001, .005, .01, .05, .1, .5, 1, 5, 30},
		}, queueLabels),
		TaskErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shield_task_errors_total", Help: "Tasks, callbacks and scheduled runs that ended with an uncaught error.",
		}),
		tasks:    newLabelCap(o.LabelCap),
		queues:   newLabelCap(o.LabelCap),
		ops:      newLabelCap(o.LabelCap),
		commands: newLabelCap(o.LabelCap),
		idle:     queueIdle{seen: map[string]*idleQueue{}},
	}
	r.MustRegister(m.LockWait, m.TriggerLateness, m.schedRuns, m.schedMissed, m.schedSkipped, m.schedDuration,
		m.LoopLag, m.redisErrors, m.redisRoundTrip, m.queueHandler, m.TaskErrors)
	m.process = prometheus.NewRegistry()
	m.process.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if state != nil {
		r.MustRegister(stateCollector{state, m})
	}
	return m
}

// Gatherer is what the endpoint's /metrics serves: Registry, the Go
// runtime's metrics (go_*) and the process's (process_*), with removed
// tasks' series dropped first.
func (m *Metrics) Gatherer() prometheus.Gatherer {
	return sweeping{m, prometheus.Gatherers{m.Registry, m.process}}
}

// Shield is Registry (the shield_* metrics only) with removed tasks'
// series dropped before each gather: what a host merges into its own
// /metrics.
func (m *Metrics) Shield() prometheus.Gatherer { return sweeping{m, m.Registry} }

// TaskRun counts a finished attempt of a scheduled run ("ok" or "failed")
// and observes its duration.
func (m *Metrics) TaskRun(task, result string, d time.Duration) {
	task = m.tasks.admit(task)
	m.schedRuns.WithLabelValues(task, result).Inc()
	m.schedDuration.WithLabelValues(task).Observe(d.Seconds())
}

// TaskMissed counts n firings of task that did not run.
func (m *Metrics) TaskMissed(task string, n int64) {
	m.schedMissed.WithLabelValues(m.tasks.admit(task)).Add(float64(n))
}

// TaskSkipped counts a firing of task skipped by overlap "skip".
func (m *Metrics) TaskSkipped(task string) {
	m.schedSkipped.WithLabelValues(m.tasks.admit(task)).Inc()
}

// RedisOpFailed counts a Lua call (e.g. "shield.global:get") whose Redis
// operation failed.
func (m *Metrics) RedisOpFailed(op string) {
	m.redisErrors.WithLabelValues(m.ops.admit(op)).Inc()
}

// RedisRoundTrip observes one round trip of operation (a command name,
// "pipeline" or "multi").
func (m *Metrics) RedisRoundTrip(operation string, d time.Duration) {
	m.redisRoundTrip.WithLabelValues(m.commands.admit(operation)).Observe(d.Seconds())
}

// QueueHandled observes how long a consumer's handler took for one
// message of queue.
func (m *Metrics) QueueHandled(queue, kind string, d time.Duration) {
	m.queueHandler.WithLabelValues(m.queues.admit(queue), kind).Observe(d.Seconds())
}

// sweep drops the series of tasks that no longer exist and frees their
// places under the cap.
func (m *Metrics) sweep() {
	if m.opts.Tasks == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	names, err := m.opts.Tasks(ctx)
	if err != nil {
		return // keep them: better stale series than a scrape that fails
	}
	live := make(map[string]bool, len(names))
	for _, n := range names {
		live[n] = true
	}
	for _, n := range m.tasks.list() {
		if !live[n] {
			m.tasks.forget(n)
			l := prometheus.Labels{"task": n}
			m.schedRuns.DeletePartialMatch(l)
			m.schedMissed.DeletePartialMatch(l)
			m.schedSkipped.DeletePartialMatch(l)
			m.schedDuration.DeletePartialMatch(l)
		}
	}
}

// sweeping sweeps before it gathers.
type sweeping struct {
	m *Metrics
	g prometheus.Gatherer
}

func (s sweeping) Gather() ([]*dto.MetricFamily, error) {
	s.m.sweep()
	return s.g.Gather()
}

// The metrics of State, one description each.
var (
	descCacheEntries  = desc("shield_cache_entries", "Entries in the local cache of shield.global().")
	descCacheHits     = desc("shield_cache_hits_total", "Local cache lookups that returned a value.")
	descCacheMisses   = desc("shield_cache_misses_total", "Local cache lookups that did not.")
	descCacheHitRatio = desc("shield_cache_hit_ratio", "Hits / (hits + misses) of the local cache since start.")

	descLocksHeld      = desc("shield_locks_held", "Lock holds held by this process (every kind).")
	descLocksWaiting   = desc("shield_locks_waiting", "Lock acquires waiting in this process.")
	descLocksLost      = desc("shield_lock_holds_lost_total", "Holds whose lease ran out or was taken over while held.")
	descLocksAbandoned = desc("shield_lock_holds_released_at_task_end_total", "Holds released because their task ended without releasing them.")

	descRankBoards  = desc("shield_rank_boards", "Leaderboards this process opened.")
	descRankMembers = desc("shield_rank_members", "Members of the leaderboards this process opened.")

	queueLabels          = []string{"queue", "kind"}
	descQueueLength      = desc("shield_queue_length", "Messages held by the queue (reliable: with those in flight and retrying; broadcast: entries retained).", queueLabels...)
	descQueuePending     = desc("shield_queue_pending", "Delay-queue messages not yet due.", queueLabels...)
	descQueueReady       = desc("shield_queue_ready", "Messages deliverable now.", queueLabels...)
	descQueueInFlight    = desc("shield_queue_in_flight", "Deliveries not yet acknowledged.", queueLabels...)
	descQueueRetrying    = desc("shield_queue_retrying", "Nacked messages waiting for their retry.", queueLabels...)
	descQueueConsumers   = desc("shield_queue_consumers", "Processes that consumed the queue within the last 10s.", queueLabels...)
	descQueueLocal       = desc("shield_queue_local_consumers", "Consumers (consume / subscribe handles) of this process.", queueLabels...)
	descQueueOldest      = desc("shield_queue_oldest_age_seconds", "How long the oldest ready message has waited (delay queues: since it was due; reliable: the oldest unacknowledged); absent when the queue is empty.", queueLabels...)
	descQueueDead        = desc("shield_queue_dead_letters", "Dead letters held.", queueLabels...)
	descQueueExpired     = desc("shield_queue_expired_total", "Messages dropped at delivery past their TTL.", queueLabels...)
	descQueueTrimmed     = desc("shield_queue_trimmed_total", "Broadcast entries dropped before every group acknowledged them.", queueLabels...)
	descQueueReclaimed   = desc("shield_queue_reclaims_total", "Deliveries given to another consumer after their visibility timeout.", queueLabels...)
	descQueueNacked      = desc("shield_queue_nacks_total", "Nacks.", queueLabels...)
	descQueueDeadLetterd = desc("shield_queue_dead_lettered_total", "Messages moved to the dead letters.", queueLabels...)
	descQueueDeadDropped = desc("shield_queue_dead_dropped_total", "Dead letters dropped (disabled, or past their limits).", queueLabels...)

	descLimiters         = desc("shield_rate_limiters", "Rate limiters of this process.")
	descLimiterKeys      = desc("shield_rate_limiter_active_keys", "Rate-limiter keys with local state.")
	descLimiterDecisions = desc("shield_rate_limiter_decisions_total", "Rate-limiter decisions, by result (allowed, rejected, unavailable).", "result")
	descLimiterDegraded  = desc("shield_rate_limiter_degraded_total", "Token-bucket decisions made without a valid global share (Redis unreachable).")
	descLimiterRejToday  = desc("shield_rate_limiter_rejected_today", "Requests refused (rejected or unavailable) since UTC midnight.")
	descLimiterSyncs     = desc("shield_rate_limiter_syncs_total", "Token-bucket report rounds to Redis, by result (ok, failed).", "result")
	descRuntimes         = desc("shield_runtimes", "Lua runtimes open.")
	descTasksRunning     = desc("shield_tasks_running", "Tasks alive (running or suspended) in every runtime.")
	// descState names the failure of a scrape's state read.
	descState = desc("shield_state", "The state read at a scrape (reported only when it failed).")
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// stateCollector reads State at each scrape.
type stateCollector struct {
	state func(ctx context.Context) (State, error)
	m     *Metrics
}

// Describe sends no description: the collector is unchecked, because the
// queues' labels are known only when it collects.
func (stateCollector) Describe(chan<- *prometheus.Desc) {}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	s, err := c.state(ctx)
	if err != nil {
		// The rest is still exposed; the error reaches the log through the
		// handler (ContinueOnError).
		ch <- prometheus.NewInvalidMetric(descState, err)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descCacheEntries, float64(s.Cache.Entries))
	counter(descCacheHits, float64(s.Cache.Hits))
	counter(descCacheMisses, float64(s.Cache.Misses))
	gauge(descCacheHitRatio, s.Cache.HitRate)

	gauge(descLocksHeld, float64(s.Locks.Held))
	gauge(descLocksWaiting, float64(s.Locks.Waiting))
	counter(descLocksLost, float64(s.Locks.Lost))
	counter(descLocksAbandoned, float64(s.Locks.Abandoned))

	gauge(descRankBoards, float64(s.Ranks.Boards))
	gauge(descRankMembers, float64(s.Ranks.Members))

	for _, q := range c.m.visibleQueues(s.Queues) {
		l := []string{q.Name, q.Kind}
		gauge(descQueueLength, float64(q.Length), l...)
		gauge(descQueuePending, float64(q.Pending), l...)
		gauge(descQueueReady, float64(q.Ready), l...)
		gauge(descQueueInFlight, float64(q.InFlight), l...)
		gauge(descQueueRetrying, float64(q.Retrying), l...)
		gauge(descQueueConsumers, float64(q.Consumers), l...)
		gauge(descQueueLocal, float64(q.LocalConsumers), l...)
		gauge(descQueueDead, float64(q.DeadLetters), l...)
		if q.OldestAgeMs != nil {
			gauge(descQueueOldest, float64(*q.OldestAgeMs)/1000, l...)
		}
		counter(descQueueExpired, float64(q.Expired), l...)
		counter(descQueueTrimmed, float64(q.Trimmed), l...)
		counter(descQueueReclaimed, float64(q.Reclaimed), l...)
		counter(descQueueNacked, float64(q.Nacked), l...)
		counter(descQueueDeadLetterd, float64(q.DeadLettered), l...)
		counter(descQueueDeadDropped, float64(q.DeadDropped), l...)
	}

	gauge(descLimiters, float64(s.Limiter.Limiters))
	gauge(descLimiterKeys, float64(s.Limiter.ActiveKeys))
	counter(descLimiterDecisions, float64(s.Limiter.Allowed), "allowed")
	counter(descLimiterDecisions, float64(s.Limiter.Rejected), "rejected")
	counter(descLimiterDecisions, float64(s.Limiter.Unavailable), "unavailable")
	counter(descLimiterDegraded, float64(s.Limiter.Degraded))
	gauge(descLimiterRejToday, float64(s.Limiter.RejectedToday))
	counter(descLimiterSyncs, float64(s.Limiter.Syncs), "ok")
	counter(descLimiterSyncs, float64(s.Limiter.SyncFailures), "failed")

	gauge(descRuntimes, float64(s.Runtimes))
	gauge(descTasksRunning, float64(s.Tasks))
}
