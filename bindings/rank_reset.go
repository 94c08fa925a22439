package bindings

import (
	"context"
	"fmt"
	"time"

	"github.com/shieldrt/shieldglobal/core/rank"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/core/store"
)

// Periodic leaderboard resets: shield.rank(name, {reset = "daily" |
// "weekly" | "monthly", reset_time = "HH:MM", archive = bool,
// distributed = bool}) registers one scheduler task per board and process
// (RankScheduler) before it returns; each firing archives the board's top
// max_members and clears it in one atomic step (rank.Board.ArchiveAndClear),
// dated by the period the firing closes (rank.ResetSchedule.Closes).

// resetPlan is one board's reset, as the options gave it.
type resetPlan struct {
	rank.ResetSchedule
	archive     bool
	distributed bool
	top         int // entries archived: the handle's max_members
}

// resetTimeout bounds one reset's round trip.
const resetTimeout = 30 * time.Second

func (p resetPlan) String() string {
	return fmt.Sprintf("%s (cron %q, archive %v, distributed %v, top %d)",
		p.ResetSchedule, p.Cron(), p.archive, p.distributed, p.top)
}

// RankScheduler is what periodic resets need from the scheduler.
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
type RankScheduler interface {
	Register(name, cronExpr string, distributed bool, run func(f scheduler.Firing, done func(error))) *store.Op[scheduler.Info]
}

// EngineResets is the RankScheduler on a scheduler Engine: a cron task in
// UTC owned by "module", whose firings do not overlap (overlap "skip") and
// each run on a goroutine of its own. Register's operation is the Engine's:
// one round trip on Redis for a distributed task.
type EngineResets struct{ Engine *scheduler.Engine }

// Register implements RankScheduler. Errors: those of scheduler.Cron and
// scheduler.Engine.Register.
func (s EngineResets) Register(name, cronExpr string, distributed bool, run func(f scheduler.Firing, done func(error))) *store.Op[scheduler.Info] {
	sch, err := scheduler.Cron(cronExpr)
	if err != nil {
		return store.Failed[scheduler.Info](err)
	}
	o := s.Engine.DefaultOptions()
	o.Timezone, o.Distributed, o.Overlap = "UTC", distributed, scheduler.OverlapSkip
	return s.Engine.Register(scheduler.Task{Name: name, Schedule: sch, Options: o, Owner: "module",
		Run: func(f scheduler.Firing, done func(error)) { go run(f, done) }})
}

// resetClaim is the reset a board has in this process: claimed by the
// first declaration, registered once one registration of it succeeded.
type resetClaim struct {
	plan       resetPlan
	registered bool
	pending    int // registrations in flight
}

// beginRegister checks board's reset against the one this process claimed
// and returns the operation that registers it, or nil when it is registered
// already. Another plan for the board is an error. A registration that fails
// (Redis unreachable) leaves nothing behind (endRegister): the next
// declaration of the board registers it.
func (r *Ranks) beginRegister(board rank.Board, p resetPlan) (*store.Op[scheduler.Info], error) {
	if r.Scheduler == nil {
		return nil, errNoScheduler
	}
	name := board.Name()
	r.mu.Lock()
	c, ok := r.resets[name]
	switch {
	case !ok:
		if r.resets == nil {
			r.resets = map[string]*resetClaim{}
		}
		c = &resetClaim{plan: p}
		r.resets[name] = c
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
	return r.Scheduler.Register("rank:"+name+":reset", p.Cron(), p.distributed, r.resetTask(board, p)), nil
}

// endRegister records the outcome of a registration beginRegister started.
func (r *Ranks) endRegister(name string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.resets[name]
	c.pending--
	c.registered = c.registered || ok
	if !c.registered && c.pending == 0 {
		delete(r.resets, name)
	}
}

// resetTask is the run function of board's reset task: a firing archives
// the top p.top entries (none without archive) and clears the board, in one
// atomic and idempotent step (a repeated run of the same firing changes
// nothing). A manual run (the scheduler's trigger) changes nothing and
// fails with rank.ErrManualReset. A Redis reset runs on a goroutine of its
// own, so run never blocks.
func (r *Ranks) resetTask(board rank.Board, p resetPlan) func(f scheduler.Firing, done func(error)) {
	return func(f scheduler.Firing, done func(error)) {
		date, err := p.Closes(f.Scheduled, f.Manual)
		if err != nil {
			done(fmt.Errorf("%s: reset of %q: %w", rankType, board.Name(), err))
			return
		}
		top := 0
		if p.archive {
			top = p.top
		}
		op := board.ArchiveAndClear(date, top, r.ArchiveTTL)
		do := func() {
			ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
			defer cancel()
			res, err := op.Do(ctx)
			if err != nil {
				done(fmt.Errorf("%s: reset of %q for %s: %w", rankType, board.Name(), date, err))
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
