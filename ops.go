package shieldglobal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/internal/edge"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	"github.com/shieldrt/shieldglobal/ops"
)

// The Module's operations surface: the Prometheus metrics (always kept,
// cheap: events are observed when they happen, state is read at scrape
// time) and the HTTP endpoint that serves them with the spec's JSON reports
// (ops.enabled). docs/ops.md lists every field and metric.

// startMetrics builds the registry. Called before the capabilities start,
// so that each can be handed its observers. The module's own Redis client
// reports its round trips (a host's client handed in with WithRedisClient
// is left alone: its other commands are not the module's).
func (m *Module) startMetrics() {
	c := m.cfg.Ops.Metrics
	m.metrics = ops.NewMetrics(m.opsState, ops.MetricsOptions{
		LabelCap: c.LabelCap, IdleAfter: config.Millis(c.IdleAfter), Now: metricsNow, Tasks: m.taskNames})
	if m.ownsClient && m.client != nil {
		m.client.AddHook(m.metrics.RedisHook())
	}
}

// metricsNow is the clock of ops.metrics.idle_after; tests move it.
var metricsNow = time.Now

// taskNames lists the scheduler's tasks, so that /metrics drops the series
// of removed ones.
func (m *Module) taskNames(ctx context.Context) ([]string, error) {
	if m.sched == nil {
		return nil, nil
	}
	infos, err := m.sched.List().Do(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(infos))
	for i, info := range infos {
		names[i] = info.Name
	}
	return names, nil
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
	return m.metrics.Shield()
}

// observers are what a runtime tells the metrics.
func (m *Module) observers() runtime.Observers {
	if m.metrics == nil {
		return runtime.Observers{}
	}
	mt := m.metrics
	return runtime.Observers{
		OpFailed:     mt.RedisOpFailed,
		TaskFailed:   mt.TaskErrors.Inc,
		LoopLag:      func(d time.Duration) { mt.LoopLag.Observe(d.Seconds()) },
		QueueHandled: mt.QueueHandled,
	}
}

// lockWaited observes an acquire that had to wait.
func (m *Module) lockWaited(d time.Duration) { m.metrics.LockWait.Observe(d.Seconds()) }

// schedEvent counts a scheduler event (on the Engine's goroutine), and
// remembers whether each task's latest attempt failed (opsScheduler).
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
		mt.TaskRun(f.Task, "ok", ev.Duration)
		m.failing.Delete(f.Task)
	case scheduler.EventFailed:
		mt.TaskRun(f.Task, "failed", ev.Duration)
		m.failing.Store(f.Task, true)
	case scheduler.EventMissed:
		mt.TaskMissed(f.Task, max(ev.Count, 1))
	case scheduler.EventSkipped:
		mt.TaskSkipped(f.Task)
	}
}

// opsState reads the state of every capability: local counters, and on
// Redis one pipeline for the leaderboard sizes and one for the queues. A
// part that could not be read is left at zero and its error joined into
// err (naming the part).
func (m *Module) opsState(ctx context.Context) (ops.State, error) {
	var s ops.State
	errs := m.capabilityStats(ctx, &s)
	m.hostMu.Lock()
	s.Runtimes = len(m.runtimes)
	for _, rt := range m.runtimes {
		s.Tasks += rt.Tasks()
	}
	m.hostMu.Unlock()
	return s, errs
}

// openOps starts the ops HTTP endpoint (ops.enabled).
func (m *Module) openOps() error {
	srv, err := ops.Listen(m.cfg.Ops, ops.Sources{State: m.opsState, Scheduler: m.opsScheduler, Gatherer: m.metrics.Gatherer(),
		Live: m.live, Ready: m.ready, Console: opsConsole{m}}, m.log)
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
	listed := make(map[string]bool, len(infos))
	for _, i := range infos {
		listed[i.Name] = true
		_, failing := m.failing.Load(i.Name)
		rep.Tasks = append(rep.Tasks, ops.SchedulerTaskOf(i, failing))
	}
	m.failing.Range(func(k, _ any) bool { // forget removed tasks
		if !listed[k.(string)] {
			m.failing.Delete(k)
		}
		return true
	})
	return rep, nil
}

// wedgedAfter is how long a runtime's loop may stay inside one resume (a
// task that does not yield, a Go function that does not return) before
// GET /healthz reports the process as failing. Tests shorten it.
var wedgedAfter = 10 * time.Second

// live is GET /healthz: the module is open and no runtime's loop is
// wedged (see wedgedAfter). It reads flags only, no I/O.
func (m *Module) live(context.Context) error {
	if m.closed.Load() {
		return ErrModuleClosed
	}
	m.hostMu.Lock()
	n, wedged := len(m.runtimes), 0
	for _, rt := range m.runtimes {
		if !rt.rt.Responsive(wedgedAfter) {
			wedged++
		}
	}
	m.hostMu.Unlock()
	if wedged > 0 {
		return fmt.Errorf("%d of %d runtime loops have been inside one task for more than %v (a task that does not yield, or a Go function that does not return)", wedged, n, wedgedAfter)
	}
	return nil
}

// ready is GET /readyz: the backend answers a PING (on a Cluster, every
// master does) within ctx. The memory backend is always ready.
func (m *Module) ready(ctx context.Context) error {
	if m.closed.Load() {
		return ErrModuleClosed
	}
	if m.client == nil {
		return nil
	}
	var err error
	if cc, ok := m.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			if err := c.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("master %s: %w", c.Options().Addr, err)
			}
			return nil
		})
	} else {
		err = m.client.Ping(ctx).Err()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		// go-redis retries a refused dial until the deadline: down,
		// frozen and cut off all end here.
		return fmt.Errorf("redis at %s did not answer in time (down, frozen or unreachable): %w", edge.DescribeRedis(m.cfg.Global.Redis), err)
	}
	return fmt.Errorf("redis at %s: %w", edge.DescribeRedis(m.cfg.Global.Redis), err)
}
