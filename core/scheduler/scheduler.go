// Package scheduler is the task scheduler behind shield.scheduler(): cron,
// interval and one-shot tasks run by one Engine per process, with a Store
// that makes distributed tasks run once per firing across every process
// sharing it — Redis (standalone, Sentinel or Cluster, see NewRedis) — or
// across the runtimes of one process (Memory, see NewMemory).
//
// # Tasks and firings
//
// A task has a name, a Schedule (Parse, Cron, Every, After, At) and Options.
// Each scheduled fire time of a task is a firing. The Engine calls the
// task's RunFunc with the Firing and a done callback the run calls when it
// ends; an error is counted, retried per Options.MaxRetries and RetryDelay
// (a retry belongs to the same firing) and never ends the schedule.
//
// A task without Options.Distributed belongs to the process that registered
// it: every process runs each of its firings, and its counters, status and
// controls (Pause, Resume, Remove) are this process's own. A distributed
// task is shared: its record (schedule, cursor, counters, status) lives in
// the Store, each firing starts exactly once across every Engine on the
// Store, and a control issued by any process applies in all of them.
//
// # Exactly once per firing
//
// Every firing of a distributed task has its own identity, (task, scheduled
// fire time), as Temporal's workflow ids and Quartz's fire-instance ids do.
// A process claims a firing in one atomic Store operation that checks the
// task's cursor (the latest fire time settled by anyone) and records the run
// under a key that includes the fire time. There is no leader: each process
// claims for itself, so a dead process costs no failover time. Fire times
// are computed from the schedule alone (interval tasks share one anchor kept
// in the Store), and due times follow the Store's clock (Redis TIME), which
// each Engine tracks from the replies it gets, so skewed process clocks do
// not change which firings exist nor when they start.
//
// The runner renews its claim (a lease of Options.LockTTL) while the run
// lasts, retries included. If the runner dies, another process re-runs the
// firing once the lease has passed without renewal. So a run interrupted by
// a crash (or cut off from the Store for longer than its lease) may run
// twice — at least once — and every other firing runs exactly once.
//
// # Misfires and overlap
//
// A firing that comes while an earlier run of the task is still going is
// skipped and counted (Overlap "skip", the default) or runs alongside it
// ("allow"). When firings were missed (every process down, a stalled
// process, the Store unreachable), the latest missed firing runs once if it
// is at most Options.CatchUp old and the others are counted as missed.
// With the Store unreachable at a firing, a distributed task waits for it
// and runs late (counted as late) while within CatchUp, else counts the
// firing missed; OnRedisDown "run_local" runs it locally instead, which may
// run it twice if other processes still reach the Store.
package scheduler

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned (wrapped) by the package. Match them with errors.Is.
var (
	// ErrInvalid is wrapped by every error about a bad argument: an empty
	// name, a bad cron expression, a non-positive interval, an unknown
	// time zone or option value. The message names the argument and value.
	ErrInvalid = errors.New("scheduler: invalid argument")
	// ErrKindConflict is returned by Register when the name is already a
	// task of another kind (cron, interval or once), in this process or in
	// the Store. Remove the task first to change its kind.
	ErrKindConflict = errors.New("scheduler: task exists with another kind")
	// ErrNotFound is returned by Get, Pause, Resume, Disable, Enable, Remove, Trigger and
	// TriggerAny for a task that does not exist (Trigger: that is not
	// registered in this process, since it needs the task's RunFunc;
	// TriggerAny: that has no record in the Store).
	ErrNotFound = errors.New("scheduler: task not found")
	// ErrClosed is returned by every Engine operation after Close.
	ErrClosed = errors.New("scheduler: engine closed")
)

// Kind is the kind of a schedule.
type Kind string

// The kinds of schedule.
const (
	KindCron     Kind = "cron"
	KindInterval Kind = "interval"
	KindOnce     Kind = "once"
)

// Status is what Info.Status reports, as the spec's task:status() does.
type Status string

// The task statuses.
const (
	// StatusActive: the task fires on schedule.
	StatusActive Status = "active"
	// StatusPaused: Pause stopped it; Resume starts it again.
	StatusPaused Status = "paused"
	// StatusDisabled: Disable took it off the schedule (it stays
	// registered, keeps its counters and never fires); Enable puts it back
	// from the next fire time. It outranks paused: a task both paused and
	// disabled shows disabled.
	StatusDisabled Status = "disabled"
	// StatusError: the task is active but its latest firing failed (after
	// its retries); the next successful run makes it active again.
	StatusError Status = "error"
)

// Overlap says what a firing does while an earlier run of the task is
// still going (retries included).
type Overlap string

// The overlap policies.
const (
	// OverlapSkip skips the firing and counts it (Info.Skipped).
	OverlapSkip Overlap = "skip"
	// OverlapAllow runs it alongside.
	OverlapAllow Overlap = "allow"
)

// RedisDown says what a distributed firing does when the Store cannot be
// reached to claim it.
type RedisDown string

// The Store-unreachable policies.
const (
	// RedisDownWait retries the claim until the Store answers; the firing
	// runs then (counted late) if it is still within CatchUp, else it is
	// counted missed.
	RedisDownWait RedisDown = "wait"
	// RedisDownRunLocal runs the firing in this process at once, without a
	// claim. Other processes that reach the Store may run it too.
	RedisDownRunLocal RedisDown = "run_local"
)

// Options of one task. Start from Engine.DefaultOptions (Config.Defaults:
// the config's scheduler section, which internal/edge turns into Options)
// and change what the caller set; Register rejects invalid values with
// ErrInvalid. The defaults named below are Engine.DefaultOptions when
// Config.Defaults is zero (those of the default config); the zero Options
// itself is invalid (LockTTL, Overlap and OnRedisDown unset).
type Options struct {
	// Timezone is the IANA zone cron schedules are read in ("" = UTC).
	// Interval and one-shot schedules ignore it. Default "UTC".
	Timezone string
	// Distributed shares the task across every process on the Store: each
	// firing runs once in one of them (see the package doc). Default false.
	Distributed bool
	// LockTTL is the lease of a distributed run's claim, renewed every
	// LockTTL/3 while it runs; > 0. A run whose lease passes without
	// renewal is re-run elsewhere. Default 30 s.
	LockTTL time.Duration
	// MaxRetries is how many times a failed firing is run again; >= 0.
	// Default 3.
	MaxRetries int
	// RetryDelay is the wait before each retry; >= 0. Default 1 min.
	RetryDelay time.Duration
	// Overlap is OverlapSkip or OverlapAllow. Default OverlapSkip.
	Overlap Overlap
	// CatchUp is how old a missed firing may be and still run; >= 0.
	// Default DefaultCatchUp (60 s).
	CatchUp time.Duration
	// OnRedisDown is RedisDownWait or RedisDownRunLocal. Default
	// RedisDownWait.
	OnRedisDown RedisDown
}

// DefaultCatchUp is the default Options.CatchUp.
const DefaultCatchUp = 60 * time.Second

// resolved is a task's validated options.
type resolved struct {
	Options
	loc *time.Location
}

// resolve validates o for task name.
func (o Options) resolve(name string) (resolved, error) {
	bad := func(what string, v any, want string) error {
		return fmt.Errorf("%w: task %q: %s %v: %s", ErrInvalid, name, what, v, want)
	}
	loc, err := loadLocation(o.Timezone)
	if err != nil {
		return resolved{}, fmt.Errorf("%w: task %q: %w", ErrInvalid, name, err)
	}
	switch {
	case o.LockTTL <= 0:
		return resolved{}, bad("lock_ttl", o.LockTTL, "must be > 0")
	case o.MaxRetries < 0:
		return resolved{}, bad("max_retries", o.MaxRetries, "must be >= 0")
	case o.RetryDelay < 0:
		return resolved{}, bad("retry_delay", o.RetryDelay, "must be >= 0")
	case o.CatchUp < 0:
		return resolved{}, bad("catch_up", o.CatchUp, "must be >= 0")
	case o.Overlap != OverlapSkip && o.Overlap != OverlapAllow:
		return resolved{}, bad("overlap", fmt.Sprintf("%q", o.Overlap), `want "skip" or "allow"`)
	case o.OnRedisDown != RedisDownWait && o.OnRedisDown != RedisDownRunLocal:
		return resolved{}, bad("on_redis_down", fmt.Sprintf("%q", o.OnRedisDown), `want "wait" or "run_local"`)
	}
	return resolved{Options: o, loc: loc}, nil
}

// loadLocation loads an IANA zone; "" is UTC. The module embeds time/tzdata
// (package config imports it), so this works without system zoneinfo.
func loadLocation(tz string) (*time.Location, error) {
	if tz == "" || tz == "UTC" {
		return time.UTC, nil
	}
	if tz == "Local" {
		return nil, fmt.Errorf("timezone %q: name an IANA zone (the process's local zone differs between hosts)", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("timezone %q: unknown time zone", tz)
	}
	return loc, nil
}

// Firing is one run of a task the Engine hands to its RunFunc.
type Firing struct {
	// Task is the task's name.
	Task string
	// Scheduled is the firing's scheduled time (for a manual Trigger, the
	// time of the call; for a TriggerAny, the Store's time of the claim). It is the firing's identity: retries and re-runs
	// of the firing carry the same Scheduled.
	Scheduled time.Time
	// Attempt is 1 for the first run of the firing, 2 for the first retry…
	Attempt int
	// Manual is true for a run started by Trigger or TriggerAny.
	Manual bool
	// Recovered is true when this process re-runs a firing whose runner
	// stopped renewing its claim (it may have run partly or wholly).
	Recovered bool
	// Late is true when the firing's first attempt in this process started
	// more than LateAfter after Scheduled (on the Store's clock for a
	// distributed task), whatever delayed it: the Store unreachable at the
	// claim, a claim whose round trip waited out an outage (a client
	// retrying rather than failing), a stalled process catching up, a
	// re-run of a firing whose runner died. A firing whose claim failed
	// and was retried until the Store answered is Late however short the
	// wait. Retries of the firing carry its first attempt's Late.
	Late bool
	// Local is true for a distributed firing run without a claim because
	// the Store was unreachable (OnRedisDown "run_local").
	Local bool
}

// LateAfter is how long after its scheduled time a firing may start and
// still be on time (Firing.Late). Runs normally start within milliseconds
// of their fire time (see docs/performance.md); a second is far beyond
// that and beyond the claim-ahead window, so only a real delay counts.
const LateAfter = time.Second

// RunFunc runs a firing. It is called on the Engine's loop goroutine and
// must not block, nor run an Engine operation synchronously (an Op's Do
// waits for the loop, which is busy calling the RunFunc): start the work
// elsewhere (the Lua binding posts a task to its runtime) and call done
// when it ends, from any goroutine, with nil or the run's error. done may
// be called once; later calls are ignored. A panic is caught and counts as
// the attempt's error.
type RunFunc func(f Firing, done func(err error))

// Task is what Register takes.
type Task struct {
	// Name identifies the task; non-empty, not starting with '}' (it is the
	// Redis Cluster hash tag of the task's keys).
	Name string
	// Schedule says when it fires.
	Schedule Schedule
	// Options (start from Engine.DefaultOptions).
	Options Options
	// Run is called for each firing; required.
	Run RunFunc
	// Owner identifies the registrant (the Lua runtime). Several owners may
	// register the same task: each firing runs in one of them (in turn),
	// and Detach(owner) drops an owner's registrations. "" is an owner too.
	Owner string
	// Gone, if set, is called once when the task leaves this engine for
	// good while this registration's Run is in it: removed (by Remove in
	// this process or, for a distributed task, in any process), a one-shot
	// task whose firing ran or was missed (here or in another process), a
	// task dropped because the Store holds another kind under its name.
	// It is not called after Detach(Owner) or Close, nor for a
	// registration that a later Register of the same name and Owner
	// replaced (that one's Gone is called instead); it may be called
	// before the Register op returns. It runs on the loop goroutine: it
	// must not block nor run Engine operations synchronously.
	Gone func()
}

// Info describes a task.
type Info struct {
	Name string
	Kind Kind
	// Schedule is the schedule as the ops JSON shows it: the cron text, or
	// the interval (or one-shot delay) in ms as a string, or "at:<unix s>".
	Schedule string
	// Timezone of a cron schedule ("UTC" when none was given).
	Timezone string
	Status   Status
	// NextRun is the next scheduled fire time (zero when none: paused,
	// disabled, or
	// a one-shot task that has run).
	NextRun time.Time
	// LastRun is when the latest run started (zero before the first).
	LastRun time.Time
	// RunCount counts finished runs of firings (a retried firing counts
	// once) and manual triggers.
	RunCount int64
	// Missed counts firings that did not run (see the package doc).
	Missed int64
	// Skipped counts firings skipped by Overlap "skip".
	Skipped int64
	// Late counts firings that started late (Firing.Late).
	Late int64
	// Failed counts firings whose last attempt failed.
	Failed int64
	// LastError is the error of the latest failed firing ("" if none).
	LastError string
	// Distributed tells a shared task (see Options.Distributed).
	Distributed bool
	// Running counts this process's runs of the task in progress.
	Running int
	// Registered is false for a distributed task known only from the
	// Store (registered by another process).
	Registered bool
}

// EventKind names a lifecycle event.
type EventKind string

// The lifecycle events (seed 001's before/after/failed, plus skipped and
// missed for logs and metrics).
const (
	EventBefore  EventKind = "before"
	EventAfter   EventKind = "after"
	EventFailed  EventKind = "failed"
	EventSkipped EventKind = "skipped"
	EventMissed  EventKind = "missed"
)

// Event is one lifecycle event of a task.
type Event struct {
	Kind EventKind
	// Firing is the run (for skipped, the firing that did not run; for
	// missed, the earliest of the firings that did not run; Attempt 0).
	Firing Firing
	// Last is, on a missed event, the latest fire time it stands for: the
	// missed firings are the schedule's fire times from Firing.Scheduled
	// to Last, Count of them (Last equals Firing.Scheduled when Count is 1).
	Last time.Time
	// Started is when the attempt started (after and failed events).
	Started time.Time
	// Duration of the attempt (after and failed events).
	Duration time.Duration
	// Err is the attempt's error (failed events).
	Err error
	// Final is true on a failed event when no retry follows.
	Final bool
	// Owners are the Task.Owner of every registration of the task in this
	// process when the event happened (route events to registrants by it:
	// it stays right for events that come after the task left the engine,
	// such as the missed firings its last claim settled). Shared: do not
	// modify it.
	Owners []string
	// Count is the number of firings a missed event stands for (>= 1).
	// The process that settles missed firings tells them: the one whose
	// catch-up (or claim) counted them.
	Count int64
}
