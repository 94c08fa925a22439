package shieldglobal

import (
	"context"
	"errors"
	"fmt"

	"github.com/shieldrt/shieldglobal/bindings"
	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/internal/edge"
	"github.com/shieldrt/shieldglobal/ops"
)

// The Module's scheduler: one Engine per process, shared by every runtime
// (shield.scheduler()) and by the Module's own Go code (scheduleGo).

// openScheduler starts the Engine. Distributed tasks are kept in Redis
// under the module's prefix when the module runs on Redis with
// scheduler.persistence on and storage "redis"; otherwise in process memory
// (each firing then runs once across this process's runtimes only).
func (m *Module) openScheduler() error {
	c := m.cfg.Scheduler
	var st scheduler.Store
	if m.backend == BackendRedis && c.Persistence.Enabled && c.Persistence.Storage == config.StorageRedis {
		m.schedStore = scheduler.NewRedis(m.client, m.cfg.Global.Redis.Prefix, scheduler.RedisOptions{})
		st = m.schedStore
	} else {
		st = scheduler.NewMemory(m.clock.Now)
	}
	b := bindings.NewScheduler()
	b.Now = m.clock.Now // scheduler:preview
	e, err := scheduler.New(scheduler.Config{
		Store:     st,
		Defaults:  edge.SchedulerOptions(c),
		LocalOnly: !c.Distributed.Enabled,
		Events:    func(ev scheduler.Event) { b.Event(ev); m.schedEvent(ev) },
		Log:       m.log,
		Instance:  m.owner.Node(),
		Clock:     m.schedClock(),
		Virtual:   m.virtual,
	})
	if err != nil {
		return fmt.Errorf("shield: scheduler: %w", err)
	}
	b.Engine = e
	m.sched, m.schedBinding = e, b
	m.schedCtx, m.schedCancel = context.WithCancel(context.Background())
	return nil
}

// errNoScheduler is returned by scheduleGo when scheduler.enabled is false.
var errNoScheduler = errors.New("shield: the scheduler is disabled (scheduler.enabled: false)")

// schedOptions returns the options a task gets from the scheduler config
// (change what the caller needs, then pass them to scheduleGo).
func (m *Module) schedOptions() scheduler.Options {
	if m.sched == nil {
		return edge.SchedulerOptions(m.cfg.Scheduler)
	}
	return m.sched.DefaultOptions()
}

// scheduleGo registers (or updates: same name, same kind) a task run by Go
// code of the Module, such as a leaderboard's periodic reset:
//
//	s, _ := scheduler.Cron("0 0 * * *")
//	o := m.schedOptions()
//	o.Distributed, o.Timezone = true, "Asia/Shanghai"
//	info, err := m.scheduleGo("rank:daily:reset", s, o, func(ctx context.Context, f scheduler.Firing) error { ... })
//
// Each attempt of a firing calls run on a goroutine of its own with a
// context cancelled when the Module closes; an error is counted and
// retried per the options (a retry is the same firing: f.Scheduled stays).
// With o.Distributed each firing runs once across every process sharing
// the store. It waits for the registration (one round trip on Redis); do
// not call it from a RunFunc. Errors: errNoScheduler, and those of
// scheduler.Engine.Register (ErrInvalid, ErrKindConflict, ErrClosed, the
// store's).
func (m *Module) scheduleGo(name string, s scheduler.Schedule, o scheduler.Options, run func(ctx context.Context, f scheduler.Firing) error) (scheduler.Info, error) {
	if m.sched == nil {
		return scheduler.Info{}, errNoScheduler
	}
	ctx := m.schedCtx
	return m.sched.Register(scheduler.Task{Name: name, Schedule: s, Options: o, Owner: "module",
		Run: func(f scheduler.Firing, done func(error)) {
			go func() {
				defer func() {
					if p := recover(); p != nil {
						done(fmt.Errorf("shield: task %q panicked: %v", f.Task, p))
					}
				}()
				err := run(ctx, f)
				if err != nil && ctx.Err() == nil && m.metrics != nil {
					m.metrics.TaskErrors.Inc() // a failed scheduled run, as the Lua ones count
				}
				done(err)
			}()
		}}).Do(ctx)
}

// unscheduleGo removes a task (in every process, for a distributed one);
// runtimes that registered the same name hear it from the Engine.
// Errors: errNoScheduler, scheduler.ErrNotFound, the store's.
func (m *Module) unscheduleGo(name string) error {
	if m.sched == nil {
		return errNoScheduler
	}
	_, err := m.sched.Remove(name).Do(m.schedCtx)
	return err
}

// closeScheduler stops the Engine: runs in progress get the shutdown grace
// to finish (Go runs see their context cancelled after it), then the
// store's control connection closes.
func (m *Module) closeScheduler() error {
	if m.sched == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), config.Millis(m.cfg.Global.Runtime.ShutdownGrace))
	defer cancel()
	err := m.sched.Close(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		m.log.Warn("shield: scheduler runs still going after the shutdown grace period were abandoned")
		err = nil
	}
	m.schedCancel()
	if m.schedStore != nil {
		err = errors.Join(err, m.schedStore.Close())
	}
	return err
}

// SchedulerReport is what GET /ops/scheduler answers, whether or not the
// ops endpoint is on: every task registered in this process, a distributed
// task's figures read from the store. `shield scheduler status` gets it
// from a node through the node's own control endpoint. Errors: the
// store's, ctx's.
func (m *Module) SchedulerReport(ctx context.Context) (ops.Scheduler, error) {
	return m.opsScheduler(ctx)
}
