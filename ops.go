package shieldglobal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shieldrt/shieldglobal/bindings"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/ops"
)

// The Module's operations surface: the Prometheus metrics (always kept,
// cheap: events are observed when they happen, state is read at scrape
// time) and the HTTP endpoint that serves them with the spec's JSON reports
// (ops.enabled). docs/ops.md lists every field and metric.

// startMetrics builds the registry. Called before the capabilities start,
// so that each can be handed its observers.
func (m *Module) startMetrics() {
	m.metrics = ops.NewMetrics(m.opsState)
}

// Gatherer is the module's Prometheus registry (the shield_* metrics, not
// the Go runtime's), for a host that serves its own /metrics:
//
//	http.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{
//		prometheus.DefaultGatherer, mod.Gatherer()}, promhttp.HandlerOpts{}))
//
// nil when global.enabled is false.
func (m *Module) Gatherer() prometheus.Gatherer {
	if m.metrics == nil {
		return nil
	}
	return m.metrics.Registry
}

// observers are what a runtime tells the metrics.
func (m *Module) observers() bindings.Observers {
	if m.metrics == nil {
		return bindings.Observers{}
	}
	mt := m.metrics
	return bindings.Observers{
		OpFailed:   func(op string) { mt.RedisErrors.WithLabelValues(op).Inc() },
		TaskFailed: mt.TaskErrors.Inc,
		LoopLag:    func(d time.Duration) { mt.LoopLag.Observe(d.Seconds()) },
	}
}

// lockWaited observes an acquire that had to wait.
func (m *Module) lockWaited(d time.Duration) { m.metrics.LockWait.Observe(d.Seconds()) }

// schedEvent counts a scheduler event (on the Engine's goroutine).
func (m *Module) schedEvent(ev scheduler.Event) {
	mt := m.metrics
	if mt == nil {
		return
	}
	f := ev.Firing
	switch ev.Kind {
	case scheduler.EventBefore:
		if f.Attempt == 1 && !f.Manual && !f.Recovered {
			mt.TriggerLateness.Observe(max(time.Since(f.Scheduled), 0).Seconds())
		}
	case scheduler.EventAfter:
		mt.SchedulerRuns.WithLabelValues(f.Task, "ok").Inc()
	case scheduler.EventFailed:
		mt.SchedulerRuns.WithLabelValues(f.Task, "failed").Inc()
	case scheduler.EventMissed:
		mt.SchedulerMissed.WithLabelValues(f.Task).Add(float64(max(ev.Count, 1)))
	case scheduler.EventSkipped:
		mt.SchedulerSkipped.WithLabelValues(f.Task).Inc()
	}
}

// opsState reads the state of every capability: local counters, and on
// Redis one pipeline for the leaderboard sizes and one for the queues. A
// part that could not be read is left at zero and its error joined into
// err (naming the part).
func (m *Module) opsState(ctx context.Context) (ops.State, error) {
	var s ops.State
	var errs error
	c := m.CacheStats()
	s.Cache = ops.CacheState{Entries: c.Size, Hits: c.Hits, Misses: c.Misses, HitRate: c.HitRate}
	if m.locks != nil {
		l := m.locks.Stats()
		s.Locks = ops.LockState{Held: l.Holds, Waiting: l.Waiting, Lost: l.Lost, Abandoned: l.Abandoned}
	}
	if m.ranks != nil {
		r, err := m.ranks.Stats(ctx)
		if err != nil {
			errs = errors.Join(errs, fmt.Errorf("ranks: %w", err))
		}
		s.Ranks = ops.RankState{Boards: r.Boards, Members: r.Members}
	}
	qs, err := m.QueueStats(ctx)
	if err != nil {
		errs = errors.Join(errs, fmt.Errorf("queues: %w", err))
	}
	for _, q := range qs {
		s.Queues = append(s.Queues, ops.QueueState{Name: q.Name, Kind: q.Kind.String(),
			Length: q.Length, Pending: q.Pending, Ready: q.Ready, InFlight: q.InFlight, Retrying: q.Retrying,
			Consumers: q.Consumers, LocalConsumers: int64(q.LocalConsumers), DeadLetters: q.DeadLetters,
			Expired: q.Expired, Trimmed: q.Trimmed, Reclaimed: q.Reclaimed, Nacked: q.Nacked,
			DeadLettered: q.DeadLettered, DeadDropped: q.DeadDropped})
	}
	l := m.RateLimiterStats()
	s.Limiter = ops.LimiterState{Limiters: l.Limiters, ActiveKeys: l.ActiveKeys, Allowed: l.Allowed, Rejected: l.Rejected,
		Unavailable: l.Unavailable, Degraded: l.Degraded, RejectedToday: l.RejectedToday, Syncs: l.Syncs, SyncFailures: l.SyncFailures}
	m.hostMu.Lock()
	s.Runtimes = len(m.runtimes)
	for _, rt := range m.runtimes {
		s.Tasks += rt.Tasks()
	}
	m.hostMu.Unlock()
	return s, errs
}

// startOps starts the ops HTTP endpoint (ops.enabled).
func (m *Module) startOps() error {
	srv, err := ops.Listen(m.cfg.Ops, ops.Sources{State: m.opsState, Scheduler: m.opsScheduler, Gatherer: m.metrics.Gatherer(),
		Console: opsConsole{m}}, m.log)
	if err != nil {
		return fmt.Errorf("shield: %w", err)
	}
	m.ops = srv
	return nil
}

// OpsAddr is the address the ops endpoint listens on ("" when ops.enabled
// is false).
func (m *Module) OpsAddr() string {
	if m.ops == nil {
		return ""
	}
	return m.ops.Addr()
}

// opsScheduler is GET /ops/scheduler: every task registered in this
// process, with a distributed task's counters read from the store.
func (m *Module) opsScheduler(ctx context.Context) (ops.Scheduler, error) {
	rep := ops.Scheduler{Tasks: []ops.Task{}}
	if m.sched == nil {
		return rep, nil
	}
	infos, err := m.sched.List().Do(ctx)
	if err != nil {
		return rep, err
	}
	for _, i := range infos {
		t := ops.Task{Name: i.Name, Schedule: i.Schedule, Status: string(i.Status), RunCount: i.RunCount, Distributed: i.Distributed}
		if !i.NextRun.IsZero() {
			t.NextRun = ops.Timestamp(i.NextRun.UnixMilli())
		}
		if !i.LastRun.IsZero() {
			t.LastRun = ops.Timestamp(i.LastRun.UnixMilli())
		}
		rep.Tasks = append(rep.Tasks, t)
	}
	return rep, nil
}
