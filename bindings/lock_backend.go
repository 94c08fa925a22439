package bindings

import (
	"log/slog"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/lock/local"
	iclock "github.com/shieldrt/shieldglobal/internal/clock"
)

// Locks backs the lock capability of every runtime of a Module: the
// in-process locks (shield.mutex, rwlock, spinlock; also the local gates of
// distributed locks) and the distributed backend (shield.distributed_mutex,
// distributed_rwlock, lock()). The lock sessions themselves live in
// core/lock (one per runtime, on its loop).
type Locks struct {
	Local *local.Manager
	Dist  lock.Backend
	// Redlock is non-nil when lock.redlock is enabled: distributed mutexes use it.
	Redlock lock.Backend
	Config  config.Lock
	// OnWaited, when set, is told how long each acquire that had to wait
	// waited (the lock-wait metric).
	OnWaited func(time.Duration)
	// Clock is the time of leases, retries and timeouts (nil: real time).
	Clock iclock.Clock

	once sync.Once
	svc  *lock.Service
}

// service returns the process-wide lock service, made on first use (log is
// where its warnings go).
func (l *Locks) service(log *slog.Logger) *lock.Service {
	l.once.Do(func() {
		ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
		c := l.Config
		l.svc = lock.NewService(lock.ServiceConfig{
			Local: l.Local, Dist: l.Dist, Redlock: l.Redlock, Log: log, OnWaited: l.OnWaited, Clock: l.Clock,
			Defaults: lock.Defaults{
				TTL: ms(c.DefaultTTL), MaxTTL: ms(c.MaxTTL), Retry: ms(c.Retry), MaxRetries: c.MaxRetries,
				Reentrant: c.Reentrant, AutoExtend: c.AutoExtend.Enabled, ExtendInterval: ms(c.AutoExtend.Interval),
				Fair: c.Fair.Enabled, Wait: ms(c.Wait),
			},
		})
	})
	return l.svc
}

// Stats counts the holds and waiters of every runtime, and the holds that
// were lost or released because their task ended holding them (for metrics
// and /ops/global).
func (l *Locks) Stats() lock.Stats { return l.service(nil).Stats() }
