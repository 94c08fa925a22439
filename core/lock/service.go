package lock

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shieldrt/shieldglobal/core/lock/local"
	"github.com/shieldrt/shieldglobal/internal/clock"
)

// Service is the process-wide part of the locks, shared by every Session
// (every Lua state) of the process: the in-process locks, which are also
// the local gate in front of distributed locks, the distributed backend,
// the option defaults and the counters. It is safe for concurrent use.
type Service struct {
	local    *local.Manager
	dist     Backend
	redlock  Backend
	defaults Defaults
	clock    Clock
	log      *slog.Logger
	wakes    wakes
	onWaited func(time.Duration)

	holds, waiting, abandoned, lost atomic.Int64
}

// ServiceConfig is what NewService needs.
type ServiceConfig struct {
	// Local holds the in-process locks and the gates; required.
	Local *local.Manager
	// Dist backs distributed locks; nil: NewLock refuses Distributed specs.
	Dist Backend
	// Redlock, when set, backs distributed exclusive locks (both sides of
	// read-write locks keep Dist: Redlock has no shared mode; see
	// Spec.ReadWrite).
	Redlock Backend
	// Defaults are the configured option defaults.
	Defaults Defaults
	// Clock is the time of leases, retries and timeouts (nil: real time).
	// The Manager's own clock should read the same time.
	Clock Clock
	// Log receives the warnings: lost holds, holds released because their
	// task ended (nil: slog.Default()).
	Log *slog.Logger
	// OnWaited, when set, is told how long each acquire that had to wait
	// waited before it got the lock (the lock-wait metric).
	OnWaited func(time.Duration)
}

// NewService returns a Service; it starts nothing.
func NewService(c ServiceConfig) *Service {
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Local == nil {
		c.Local = local.NewManager(c.Clock.Now)
	}
	return &Service{local: c.Local, dist: c.Dist, redlock: c.Redlock, defaults: c.Defaults, clock: c.Clock, log: c.Log,
		wakes: wakes{m: map[string]map[*wakeFn]struct{}{}}, onWaited: c.OnWaited}
}

// Stats counts the holds and waiters of every Session of a Service.
type Stats struct {
	// Holds is the number of holds held now (in-process and distributed).
	Holds int64
	// Waiting is the number of acquires waiting now.
	Waiting int64
	// Abandoned counts the holds released because the task that held them
	// ended (returned, raised or was interrupted) without releasing them.
	Abandoned int64
	// Lost counts the holds whose lease ran out or was taken over while
	// held.
	Lost int64
}

// Stats returns the counters.
func (svc *Service) Stats() Stats {
	return Stats{Holds: svc.holds.Load(), Waiting: svc.waiting.Load(), Abandoned: svc.abandoned.Load(), Lost: svc.lost.Load()}
}

// wakes tells waiters of in-process locks (and gates) that a holder of the
// name let go, so that with MaxRetries a wake-up counts as an attempt the
// way a release announced by Redis does. Only waiters with MaxRetries
// listen; releases check an atomic count first.
type wakes struct {
	n  atomic.Int64
	mu sync.Mutex
	m  map[string]map[*wakeFn]struct{}
}

type wakeFn struct{ fn func() }

func (w *wakes) watch(name string, fn func()) (cancel func()) {
	f := &wakeFn{fn: fn}
	w.mu.Lock()
	set := w.m[name]
	if set == nil {
		set = map[*wakeFn]struct{}{}
		w.m[name] = set
	}
	set[f] = struct{}{}
	w.mu.Unlock()
	w.n.Add(1)
	return func() {
		w.mu.Lock()
		if set := w.m[name]; set != nil {
			if _, ok := set[f]; ok {
				delete(set, f)
				w.n.Add(-1)
			}
			if len(set) == 0 {
				delete(w.m, name)
			}
		}
		w.mu.Unlock()
	}
}

func (w *wakes) notify(name string) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	fns := make([]func(), 0, len(w.m[name]))
	for f := range w.m[name] {
		fns = append(fns, f.fn)
	}
	w.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}
