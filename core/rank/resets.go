package rank

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/core/store"
)

// Periodic leaderboard resets: shield.rank(name, {reset = "daily" |
// "weekly" | "monthly", reset_time = "HH:MM", archive = bool,
// distributed = bool}) registers one scheduler task per board and process
// (Resets.Register) before it returns; each firing archives the board's top
// max_members and clears it in one atomic step (Board.ArchiveAndClear),
// dated by the period the firing closes (ResetSchedule.Closes).

// ResetPlan is one board's reset, as the options gave it.
type ResetPlan struct {
	ResetSchedule
	Archive     bool
	Distributed bool
	Top         int // entries archived: the handle's max_members
}

// resetTimeout bounds one reset's round trip.
const resetTimeout = 30 * time.Second

func (p ResetPlan) String() string {
	return fmt.Sprintf("%s (cron %q, archive %v, distributed %v, top %d)",
		p.ResetSchedule, p.Cron(), p.Archive, p.Distributed, p.Top)
}

// ResetScheduler is what periodic resets need from the scheduler.
//
// Register returns the operation that adds the task name
// ("rank:<board>:reset") firing on cronExpr (five fields, minute hour
// day-of-month month day-of-week, in UTC: "M H * * *", "M H * * 1" or
// "M H 1 * *"). With distributed true each firing runs in exactly one of the
// processes that registered the task; otherwise in each. Once the operation
// succeeded the task is visible to the scheduler's Get and List. run starts
// one firing without blocking (f.Scheduled names the firing, f.Manual a run
// outside the schedule) and calls done exactly once, from any goroutine,
// when it is over (a non-nil error says what failed; the scheduler counts
// and logs it). A run must not start while the previous one of the same
// task is in progress.
type ResetScheduler interface {
	Register(name, cronExpr string, distributed bool, run func(f scheduler.Firing, done func(error))) *store.Op[scheduler.Info]
}

// EngineResets is the ResetScheduler on a scheduler Engine: a cron task in
// UTC owned by "module", whose firings do not overlap (overlap "skip") and
// each run on a goroutine of its own. Register's operation is the Engine's:
// one round trip on Redis for a distributed task.
type EngineResets struct {
	Engine *scheduler.Engine
	// Busy, when set, is called before a run's goroutine starts and the
	// function it returns once the run is done, so a virtual clock (the
	// spec runner's) knows a reset is under way and waits for it.
	Busy func() (done func())
}

// Register implements ResetScheduler. Errors: those of scheduler.Cron and
// scheduler.Engine.Register.
func (s EngineResets) Register(name, cronExpr string, distributed bool, run func(f scheduler.Firing, done func(error))) *store.Op[scheduler.Info] {
	sch, err := scheduler.Cron(cronExpr)
	if err != nil {
		return store.Failed[scheduler.Info](err)
	}
	o := s.Engine.DefaultOptions()
	o.Timezone, o.Distributed, o.Overlap = "UTC", distributed, scheduler.OverlapSkip
	return s.Engine.Register(scheduler.Task{Name: name, Schedule: sch, Options: o, Owner: "module",
		Run: func(f scheduler.Firing, done func(error)) {
			if s.Busy != nil {
				idle, finish := sync.OnceFunc(s.Busy()), done
				done = func(err error) { finish(err); idle() }
			}
			go run(f, done)
		}})
}

// ErrNoScheduler is returned by Resets.Begin when there is no scheduler to
// run resets (the scheduler capability is switched off).
var ErrNoScheduler = errors.New("reset needs the scheduler (scheduler.enabled: false?)")

// Resets are the periodic resets of one process: at most one plan per
// board, registered once with the scheduler however many times (and from
// however many runtimes) the board is declared. Goroutine-safe; the zero
// value with Scheduler set is ready.
type Resets struct {
	// Scheduler registers the reset tasks; nil makes Begin fail with
	// ErrNoScheduler.
	Scheduler ResetScheduler
	// ArchiveTTL is how long a reset's archive is kept.
	ArchiveTTL time.Duration
	// Log gets one line per reset run (slog.Default when nil).
	Log *slog.Logger

	mu     sync.Mutex
	claims map[string]*resetClaim // the reset of each board that has one, by name
}

// resetClaim is the reset a board has in this process: claimed by the
// first declaration, registered once one registration of it succeeded.
type resetClaim struct {
	plan       ResetPlan
	registered bool
	pending    int // registrations in flight
}

// Begin checks board's reset against the one this process claimed and
// returns the operation that registers it, or nil when it is registered
// already. The caller runs the operation and reports its outcome to End.
// Errors: ErrNoScheduler; another plan for the board (a plain error naming
// both). A registration that fails (Redis unreachable) leaves nothing
// behind: the next declaration of the board registers it.
func (r *Resets) Begin(board Board, p ResetPlan) (*store.Op[scheduler.Info], error) {
	if r.Scheduler == nil {
		return nil, ErrNoScheduler
	}
	name := board.Name()
	r.mu.Lock()
	c, ok := r.claims[name]
	switch {
	case !ok:
		if r.claims == nil {
			r.claims = map[string]*resetClaim{}
		}
		c = &resetClaim{plan: p}
		r.claims[name] = c
	case c.plan != p:
		r.mu.Unlock()
		return nil, fmt.Errorf("board %q already resets %s in this process, not %s: give every shield.rank(%q) with a reset the same reset options and max_members",
			name, c.plan, p, name)
	case c.registered:
		r.mu.Unlock()
		return nil, nil
	}
	c.pending++
	r.mu.Unlock()
	return r.Scheduler.Register("rank:"+name+":reset", p.Cron(), p.Distributed, r.task(board, p)), nil
}

// End records the outcome of a registration Begin started.
func (r *Resets) End(name string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.claims[name]
	c.pending--
	c.registered = c.registered || ok
	if !c.registered && c.pending == 0 {
		delete(r.claims, name)
	}
}

func (r *Resets) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default()
}

// task is the run function of board's reset task: a firing archives the
// top p.Top entries (none without Archive) and clears the board, in one
// atomic and idempotent step (a repeated run of the same firing changes
// nothing). A manual run (the scheduler's trigger) changes nothing and
// fails with ErrManualReset. A Redis reset runs on a goroutine of its own,
// so run never blocks.
func (r *Resets) task(board Board, p ResetPlan) func(f scheduler.Firing, done func(error)) {
	return func(f scheduler.Firing, done func(error)) {
		date, err := p.Closes(f.Scheduled, f.Manual)
		if err != nil {
			done(fmt.Errorf("shield.rank: reset of %q: %w", board.Name(), err))
			return
		}
		top := 0
		if p.Archive {
			top = p.Top
		}
		op := board.ArchiveAndClear(date, top, r.ArchiveTTL)
		do := func() {
			ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
			defer cancel()
			res, err := op.Do(ctx)
			if err != nil {
				done(fmt.Errorf("shield.rank: reset of %q for %s: %w", board.Name(), date, err))
				return
			}
			r.log().Info("shield.rank: board reset", "board", board.Name(), "period", date, "done", res.Done,
				"archived", res.Archived, "cleared", res.Cleared, "version", res.Version)
			done(nil)
		}
		if op.Kind() == store.KindLocal {
			do()
		} else {
			go do()
		}
	}
}
