package bindings

import (
	"context"
	"fmt"
	"time"

	"github.com/shieldrt/shieldglobal/core/rank"
	"github.com/shieldrt/shieldglobal/core/store"
)

// Periodic leaderboard resets: shield.rank(name, {reset = "daily" |
// "weekly" | "monthly", reset_time = "HH:MM", archive = bool,
// distributed = bool}) registers one scheduler task per board and process
// (RankScheduler); each run archives the board's top max_members and
// clears it in one atomic step (rank.Board.ArchiveAndClear), dated by the
// period that ended.

// resetPlan is one board's reset, as the options gave it.
type resetPlan struct {
	period       string // "daily", "weekly" (Mondays) or "monthly" (the 1st)
	hour, minute int    // UTC
	archive      bool
	distributed  bool
	top          int // entries archived: the handle's max_members
}

// resetTimeout bounds one reset's round trip.
const resetTimeout = 30 * time.Second

func validPeriod(s string) bool { return s == "daily" || s == "weekly" || s == "monthly" }

// parseClock reads "HH:MM" (00:00 to 23:59).
func parseClock(s string) (hour, minute int, ok bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, 0, false
	}
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, 0, false
	}
	return t.Hour(), t.Minute(), true
}

// cron is the plan's five-field cron expression (UTC).
func (p resetPlan) cron() string {
	switch p.period {
	case "daily":
		return fmt.Sprintf("%d %d * * *", p.minute, p.hour)
	case "weekly":
		return fmt.Sprintf("%d %d * * 1", p.minute, p.hour)
	}
	return fmt.Sprintf("%d %d 1 * *", p.minute, p.hour)
}

func (p resetPlan) String() string {
	return fmt.Sprintf("%s at %02d:%02d UTC (cron %q, archive %v, distributed %v, top %d)",
		p.period, p.hour, p.minute, p.cron(), p.archive, p.distributed, p.top)
}

// latest returns the last scheduled reset at or before t.
func (p resetPlan) latest(t time.Time) time.Time {
	t = t.UTC()
	y, m, d := t.Date()
	var f time.Time
	switch p.period {
	case "daily":
		f = time.Date(y, m, d, p.hour, p.minute, 0, 0, time.UTC)
	case "weekly":
		monday := d - (int(t.Weekday())+6)%7
		f = time.Date(y, m, monday, p.hour, p.minute, 0, 0, time.UTC)
	default:
		f = time.Date(y, m, 1, p.hour, p.minute, 0, 0, time.UTC)
	}
	if f.After(t) {
		f = p.step(f, -1)
	}
	return f
}

// step moves a scheduled reset k periods on (back when k < 0).
func (p resetPlan) step(f time.Time, k int) time.Time {
	switch p.period {
	case "daily":
		return f.AddDate(0, 0, k)
	case "weekly":
		return f.AddDate(0, 0, 7*k)
	}
	return f.AddDate(0, k, 0) // f is on the 1st: no month-end overflow
}

// endedPeriod names the period a reset running at now closes: the UTC date
// (YYYYMMDD) on which it began. The reset it belongs to is the scheduled one
// nearest to now, so a run a little late or a little early (a scheduler on
// another process's clock) still closes the period that just ended. Daily at
// 00:00: the run of 2024-05-02 00:00 archives "20240501"; weekly: the Monday
// the week began; monthly: the 1st of the month that ended.
func (p resetPlan) endedPeriod(now time.Time) string {
	f := p.latest(now)
	if next := p.step(f, 1); next.Sub(now) < now.Sub(f) {
		f = next
	}
	return p.step(f, -1).Format("20060102")
}

// register adds board's reset task to the scheduler, once per board name in
// this process: a second handle with the same plan is a no-op, one with
// another plan an error.
func (r *Ranks) register(board rank.Board, p resetPlan) error {
	if r.Scheduler == nil {
		return errNoScheduler
	}
	name := board.Name()
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.resets[name]; ok {
		if prev == p {
			return nil
		}
		return fmt.Errorf("board %q already resets %s in this process, not %s: give every shield.rank(%q) with a reset the same reset options and max_members",
			name, prev, p, name)
	}
	if err := r.Scheduler.Register("rank:"+name+":reset", p.cron(), p.distributed, r.resetTask(board, p)); err != nil {
		return fmt.Errorf("registering the reset of %q: %w", name, err)
	}
	if r.resets == nil {
		r.resets = map[string]resetPlan{}
	}
	r.resets[name] = p
	return nil
}

// resetTask is the run function of board's reset task: it archives the top
// p.top entries (none without archive) and clears the board, in one atomic
// and idempotent step (a repeated run for the same period changes nothing).
// A Redis reset runs on a goroutine of its own, so run never blocks.
func (r *Ranks) resetTask(board rank.Board, p resetPlan) func(done func(error)) {
	return func(done func(error)) {
		date := p.endedPeriod(r.now())
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
