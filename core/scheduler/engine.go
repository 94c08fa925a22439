package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Config configures an Engine.
type Config struct {
	// Store holds distributed tasks: a *Redis shared by every process, or
	// a *Memory (one process). nil: a private NewMemory on Clock.
	Store Store
	// Clock is the engine's time source; nil: the system clock.
	Clock Clock
	// Virtual is true when Clock moves only by jumps (the spec runner's
	// virtual time): timers are then armed for the next item however far
	// off, not re-checked every second for wall-clock steps.
	Virtual bool
	// Defaults are what DefaultOptions returns (internal/edge builds them
	// from the config's scheduler section: edge.SchedulerOptions). Zero:
	// the defaults Options documents (those of the default config).
	Defaults Options
	// LocalOnly runs distributed tasks as local ones: the config's
	// scheduler.distributed.enabled = false.
	LocalOnly bool
	// Events receives lifecycle events, on the loop goroutine; it must not
	// block nor run Engine operations synchronously. nil: none.
	Events func(Event)
	// Log gets warnings (lost leases, an unreachable Store). nil: discard.
	Log *slog.Logger
	// Instance prefixes the owner ids of this engine's claims (the binding
	// passes node_id:service_id); a random suffix is always added.
	Instance string
	// ClaimAhead is how long before a fire time a distributed firing is
	// claimed, so the claim's round trip is off the run's start (the run
	// still starts at the fire time). 0: 20ms.
	ClaimAhead time.Duration
	// Workers is the number of concurrent Store round trips. 0: 4.
	Workers int
}

// skewTolerance is how much earlier than the claim-ahead time a claim may
// reach the Store (an estimate of the Store's clock off by that much) before
// the Store sends it back to wait.
const skewTolerance = 50 * time.Millisecond

// Engine schedules the tasks of one process. Create it with New; it runs
// one loop goroutine and Config.Workers I/O goroutines until Close.
type Engine struct {
	clock     Clock
	virtual   bool // Config.Virtual
	st        Store
	defaults  Options
	localOnly bool
	events    func(Event)
	log       *slog.Logger
	instance  string
	ahead     time.Duration
	unsub     func()

	mu      sync.Mutex
	inbox   []message
	stopped bool // the loop is gone: posts are dropped
	refuse  bool // Close began: new registrations and controls fail

	// names mirrors the loop's task table for the API's routing decisions
	// (is a name a local task, a distributed one, or unknown here). A plain
	// map: a sync.Map keeps a node or two per entry, i.e. per task.
	namesMu sync.RWMutex
	names   map[string]bool // name -> distributed

	wake     chan struct{}
	quit     chan struct{}
	loopDone chan struct{}
	batches  chan *ioBatch
	workers  sync.WaitGroup

	// Owned by the loop goroutine.
	tasks       map[string]*task
	opts        map[resolved]*resolved // interned task options (intern)
	solo        map[string][]string    // the Owners of a task with one owner, by owner (listOwners)
	free        []*run                 // ended local runs, for reuse (newRun)
	heap        timerHeap              // local-time items
	sheap       timerHeap              // Store-time items
	timer       Timer
	timerAt     int64            // when timer fires (local ns); 0 when it is not armed
	wakeFn      func()           // e.signal, made once: a method value allocates
	storeClock  func() time.Time // the Store's clock if it is in reach, else nil
	offset      int64            // Store clock minus local clock, ns (estimated)
	rttSet      bool             // offset came from a timed round trip
	calibrating bool             // a timed round trip for it is in flight
	minRTT      int64
	io          []ioOp
	inflight    int
	seq         uint64
	runs        int // runs in progress (attempts, retries, finishing)
	closing     bool
	idleCh      chan struct{}
}

// New starts an engine. It subscribes to the Store's control messages
// (on Redis this opens the Store's pub/sub connection; an error is
// returned if that fails).
func New(cfg Config) (*Engine, error) {
	e := &Engine{
		clock:     cfg.Clock,
		virtual:   cfg.Virtual,
		st:        cfg.Store,
		defaults:  cfg.Defaults,
		localOnly: cfg.LocalOnly,
		events:    cfg.Events,
		log:       cfg.Log,
		ahead:     cfg.ClaimAhead,
		wake:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		loopDone:  make(chan struct{}),
		tasks:     make(map[string]*task),
		names:     make(map[string]bool),
		opts:      make(map[resolved]*resolved),
		solo:      make(map[string][]string),
	}
	e.wakeFn = e.signal
	if e.clock == nil {
		e.clock = realClock{}
	}
	if e.st == nil {
		e.st = NewMemory(e.clock.Now)
	}
	if e.defaults == (Options{}) {
		e.defaults = builtinDefaults
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.ahead <= 0 {
		e.ahead = 20 * time.Millisecond
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	e.instance = hex.EncodeToString(b[:])
	if cfg.Instance != "" {
		e.instance = cfg.Instance + ":" + e.instance
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = 4
	}
	e.storeClock = e.st.clock()
	e.batches = make(chan *ioBatch, workers)
	unsub, err := e.st.subscribe(func(c controlMsg) { e.post(func() { e.onControl(c) }) })
	if err != nil {
		return nil, fmt.Errorf("scheduler: subscribe to control messages: %w", err)
	}
	e.unsub = unsub
	for range workers {
		e.workers.Add(1)
		go e.ioWorker()
	}
	go e.loop()
	return e, nil
}

// builtinDefaults are the defaults Options documents: DefaultOptions of
// the default config (a test in internal/edge checks they agree).
var builtinDefaults = Options{
	Timezone: "UTC", LockTTL: 30 * time.Second, MaxRetries: 3, RetryDelay: time.Minute,
	Overlap: OverlapSkip, CatchUp: DefaultCatchUp, OnRedisDown: RedisDownWait,
}

// DefaultOptions returns the options a task gets unless the caller changes
// them (Config.Defaults).
func (e *Engine) DefaultOptions() Options { return e.defaults }

// Instance returns the engine's owner-id prefix (unique per engine).
func (e *Engine) Instance() string { return e.instance }

// lookupName reports whether name is registered here and whether it is
// distributed.
func (e *Engine) lookupName(name string) (dist, ok bool) {
	e.namesMu.RLock()
	defer e.namesMu.RUnlock()
	dist, ok = e.names[name]
	return dist, ok
}

func (e *Engine) setName(name string, dist bool) {
	e.namesMu.Lock()
	e.names[name] = dist
	e.namesMu.Unlock()
}

func (e *Engine) deleteName(name string) {
	e.namesMu.Lock()
	delete(e.names, name)
	e.namesMu.Unlock()
}

func (e *Engine) refusing() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.refuse || e.stopped
}

// checkName validates a task name.
func checkName(name string) error {
	if name == "" || name[0] == '}' {
		return fmt.Errorf("%w: task name %q: must be non-empty and must not start with '}'", ErrInvalid, name)
	}
	return nil
}

// Register adds t, or updates the task of that name: the same schedule
// (and zone) is a no-op apart from adding t.Owner's RunFunc and taking
// t's options; another schedule of the same kind replaces the schedule
// (for a distributed task, in the Store too, so every process follows it).
// The Op returns the task's Info.
//
// A local task is registered in memory (a local Op). A distributed one
// is registered in the Store (one round trip on Redis), which returns its
// shared state: status, cursor, counters, and the anchor of an interval.
// Firings missed while no process ran the task are settled by the
// catch-up rule at once.
//
// Errors: ErrInvalid (bad name, zero Schedule, nil Run, bad options),
// ErrKindConflict, ErrClosed, or the Store's error.
func (e *Engine) Register(t Task) *store.Op[Info] {
	if err := checkName(t.Name); err != nil {
		return store.Failed[Info](err)
	}
	if t.Schedule.IsZero() {
		return store.Failed[Info](fmt.Errorf("%w: task %q: no schedule", ErrInvalid, t.Name))
	}
	if t.Run == nil {
		return store.Failed[Info](fmt.Errorf("%w: task %q: nil Run", ErrInvalid, t.Name))
	}
	opts, err := t.Options.resolve(t.Name)
	if err != nil {
		return store.Failed[Info](err)
	}
	if e.refusing() {
		return store.Failed[Info](ErrClosed)
	}
	if !opts.Distributed || e.localOnly {
		opts.Distributed = false
		return store.Local(func() (Info, error) {
			var info Info
			var ierr error
			if err := e.call(func() { info, ierr = e.install(t, opts, nil) }); err != nil {
				return Info{}, err
			}
			return info, ierr
		})
	}
	return thenOp(e.st.register(e.def(t.Name, t.Schedule, opts)), func(reg registered, err error) (Info, error) {
		if err != nil {
			return Info{}, fmt.Errorf("scheduler: register %q: %w", t.Name, err)
		}
		var info Info
		var ierr error
		if err := e.call(func() { info, ierr = e.install(t, opts, &reg) }); err != nil {
			return Info{}, err
		}
		return info, ierr
	})
}

// oncePadding keeps an unfinished one-shot record this long past its fire
// time before Redis expires it.
const oncePadding = 24 * time.Hour

// def describes a distributed task to the Store.
func (e *Engine) def(name string, s Schedule, o resolved) def {
	d := def{Name: name, Kind: s.kind, Spec: s.spec, Text: s.text}
	if s.kind == KindCron {
		d.Timezone = o.loc.String()
	}
	if s.kind == KindOnce {
		if s.abs {
			d.At = s.at
		}
		d.Expire = time.Duration(s.after)*time.Millisecond + o.CatchUp + o.LockTTL + oncePadding
	}
	return d
}

// Get returns the task's Info. A distributed task's counters and status
// are read from the Store (one round trip on Redis), also when another
// process registered it (Info.Registered is false then). Errors:
// ErrNotFound, ErrClosed, the Store's error.
func (e *Engine) Get(name string) *store.Op[Info] {
	if err := checkName(name); err != nil {
		return store.Failed[Info](err)
	}
	if dist, ok := e.lookupName(name); ok && !dist {
		return store.Local(func() (Info, error) { return e.localInfo(name) })
	}
	return thenOp(e.st.get(name), func(f found, err error) (Info, error) {
		if err != nil {
			return Info{}, fmt.Errorf("scheduler: get %q: %w", name, err)
		}
		return e.merge(name, f)
	})
}

// localInfo returns the Info of a task registered here.
func (e *Engine) localInfo(name string) (Info, error) {
	var info Info
	ok := false
	if err := e.call(func() {
		if t := e.tasks[name]; t != nil {
			info, ok = t.info(), true
		}
	}); err != nil {
		return Info{}, err
	}
	if !ok {
		return Info{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return info, nil
}

// merge combines a Store record with what this process knows of the task.
func (e *Engine) merge(name string, f found) (Info, error) {
	var info Info
	local := false
	if err := e.call(func() {
		if t := e.tasks[name]; t != nil {
			info, local = t.info(), true
			if f.Found {
				t.cache(f.record)
				info = t.info()
			}
		}
	}); err != nil {
		return Info{}, err
	}
	if local && (f.Found || !info.Distributed) {
		return info, nil
	}
	if !f.Found {
		return Info{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return remoteInfo(f.record), nil
}

// remoteInfo describes a distributed task this process did not register.
func remoteInfo(r record) Info {
	info := Info{Name: r.Name, Kind: r.Kind, Schedule: r.Text, Timezone: r.Timezone, Distributed: true}
	info.Status = StatusActive
	if r.Errored {
		info.Status = StatusError
	}
	if r.Paused {
		info.Status = StatusPaused
	}
	if r.Disabled {
		info.Status = StatusDisabled
	}
	if s, err := parseSpec(r.Spec); err == nil && !r.Paused && !r.Disabled {
		loc, lerr := loadLocation(r.Timezone)
		if lerr != nil {
			loc = time.UTC
		}
		if n := s.timeline(loc, r.Anchor).next(max(r.Cursor, r.Now)); n != 0 {
			info.NextRun = time.UnixMilli(n).UTC()
		}
	}
	stats := counters{lastRun: r.LastRun, runCount: r.RunCount, missed: r.Missed, skipped: r.Skipped,
		late: r.Late, failed: r.Failed, lastErr: r.LastError, errored: r.Errored}
	stats.fill(&info)
	return info
}

// List returns the Info of every task registered in this process, sorted
// by name, with distributed tasks' counters read from the Store (one
// round trip). Errors: ErrClosed, the Store's error.
func (e *Engine) List() *store.Op[[]Info] {
	var dist []string
	e.namesMu.RLock()
	for name, d := range e.names {
		if d {
			dist = append(dist, name)
		}
	}
	e.namesMu.RUnlock()
	steps := make([]step[found], len(dist))
	for i, n := range dist {
		steps[i] = e.st.get(n)
	}
	return thenOp(joinSteps(steps), func(fs []found, err error) ([]Info, error) {
		if err != nil {
			return nil, fmt.Errorf("scheduler: list: %w", err)
		}
		var out []Info
		if err := e.call(func() {
			for _, f := range fs {
				if t := e.tasks[f.Name]; t != nil && f.Found {
					t.cache(f.record)
				}
			}
			out = e.infos()
		}); err != nil {
			return nil, err
		}
		return out, nil
	})
}

// Pause stops the task's firings (runs in progress finish). For a
// distributed task it is recorded in the Store and applies in every
// process within a pub/sub delivery. Errors: ErrNotFound, ErrClosed, the
// Store's error.
func (e *Engine) Pause(name string) *store.Op[struct{}] { return e.control(name, ctlPause) }

// Resume restarts a paused task from now: firings while it was paused are
// not run nor counted. Errors as Pause.
func (e *Engine) Resume(name string) *store.Op[struct{}] { return e.control(name, ctlResume) }

// Disable takes the task off the schedule until Enable: it stays
// registered (get, list, ops), keeps its counters, never fires, and shows
// StatusDisabled. For a distributed task the state is recorded in the
// Store, so it applies in every process, and to a process that registers
// the task later (a restarted node). Runs in progress finish. A paused
// task can be disabled (and stays paused when enabled). Errors as Pause.
func (e *Engine) Disable(name string) *store.Op[struct{}] { return e.control(name, ctlDisable) }

// Enable puts a disabled task back on its schedule from its next fire
// time: firings while it was disabled are neither run nor counted (no
// catch-up). A task that is not disabled is left as it is. Errors as
// Pause.
func (e *Engine) Enable(name string) *store.Op[struct{}] { return e.control(name, ctlEnable) }

// Remove deletes the task (runs in progress finish; pending retries are
// dropped) and calls its registrants' Task.Gone. A distributed task is
// removed from the Store and from every process (each calls the Gone of
// its registrations); one that has no record any more but is still
// registered here is dropped here. Errors as Pause.
func (e *Engine) Remove(name string) *store.Op[struct{}] { return e.control(name, ctlRemove) }

func (e *Engine) control(name string, op controlOp) *store.Op[struct{}] {
	if err := checkName(name); err != nil {
		return store.Failed[struct{}](err)
	}
	if e.refusing() {
		return store.Failed[struct{}](ErrClosed)
	}
	if dist, ok := e.lookupName(name); ok && !dist {
		return store.Local(func() (struct{}, error) {
			found := false
			if err := e.call(func() { found = e.applyControl(controlMsg{Op: op, Name: name}, true) }); err != nil {
				return struct{}{}, err
			}
			if !found {
				return struct{}{}, fmt.Errorf("%w: %q", ErrNotFound, name)
			}
			return struct{}{}, nil
		})
	}
	return thenOp(e.st.control(name, op), func(res controlled, err error) (struct{}, error) {
		ok := res.Found
		if err != nil {
			return struct{}{}, fmt.Errorf("scheduler: %s %q: %w", op, name, err)
		}
		if !ok && op == ctlRemove {
			// No record, but the task may still be registered here (its
			// removal by another process did not reach this one): drop it.
			here := false
			if err := e.call(func() {
				if t := e.tasks[name]; t != nil && t.distributed() {
					e.drop(t)
					here = true
				}
			}); err != nil {
				return struct{}{}, err
			}
			ok = here
		}
		if !ok {
			return struct{}{}, fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		// Apply here before the call returns (a status or next run read
		// right after it sees the change); the control message will find
		// it done.
		c := controlMsg{Op: op, Name: name, Version: res.Version, issued: true}
		if err := e.call(func() { e.applyControl(c, false) }); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, nil
	})
}

// Trigger runs the task now in this process, once, outside its schedule
// (Firing.Manual; counted in RunCount; overlap does not apply). Errors:
// ErrNotFound (not registered in this process), ErrClosed.
func (e *Engine) Trigger(name string) *store.Op[struct{}] {
	if err := checkName(name); err != nil {
		return store.Failed[struct{}](err)
	}
	return store.Local(func() (struct{}, error) {
		ok := false
		if err := e.call(func() { ok = e.trigger(name) }); err != nil {
			return struct{}{}, err
		}
		if !ok {
			return struct{}{}, fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		return struct{}{}, nil
	})
}

// Detach drops owner's RunFuncs (a Lua runtime closing). A task left with
// none stops firing in this process (a distributed task stays in the Store
// and keeps running in other processes); its runs in progress finish.
func (e *Engine) Detach(owner string) {
	e.post(func() { e.detach(owner) })
}

// Close stops the engine: no new firings start, registrations and
// controls fail with ErrClosed, runs in progress may finish (their done
// is awaited, and a pending retry is given up and counted as failed) until
// ctx ends, their results are written to the Store, then the goroutines
// stop. A distributed run still going when ctx ends is abandoned: its
// lease lapses and another process re-runs the firing. Close returns
// ctx's error in that case, else nil; it is idempotent.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.refuse {
		e.mu.Unlock()
		<-e.loopDone
		return nil
	}
	e.refuse = true
	e.mu.Unlock()
	idle := make(chan struct{})
	e.post(func() { e.beginClose(idle) })
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = ctx.Err()
	}
	e.stop()
	return err
}

// stop ends the loop and the workers (no cleanup: Close did it).
func (e *Engine) stop() {
	e.mu.Lock()
	already := e.stopped
	e.stopped = true
	e.mu.Unlock()
	if already {
		<-e.loopDone
		return
	}
	e.unsub()
	close(e.quit)
	<-e.loopDone
	if e.timer != nil {
		e.timer.Stop()
		if c, ok := e.timer.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	}
	close(e.batches)
	e.workers.Wait()
}

// kill stops the engine as a crash would: no run is finished, no lease
// renewed, nothing written. Tests use it to play a process killed mid-run.
func (e *Engine) kill() {
	e.mu.Lock()
	e.refuse = true
	e.mu.Unlock()
	e.stop()
}

// joinSteps runs steps of one Store as one step (one round trip).
func joinSteps[T any](steps []step[T]) step[[]T] {
	if len(steps) == 0 || steps[0].local != nil {
		return step[[]T]{local: func() ([]T, error) {
			out := make([]T, len(steps))
			for i, s := range steps {
				v, err := s.local()
				if err != nil {
					return nil, err
				}
				out[i] = v
			}
			return out, nil
		}}
	}
	j := step[[]T]{c: steps[0].c}
	for _, s := range steps {
		j.cmds = append(j.cmds, s.cmds...)
	}
	j.decode = func() ([]T, error) {
		out := make([]T, len(steps))
		for i, s := range steps {
			v, err := s.decode()
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return j
}
