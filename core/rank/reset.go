package rank

import (
	"errors"
	"fmt"
	"time"
)

// Periodic resets (shield.rank's reset option, docs/rank.md): when a
// board's reset fires and which period a firing closes. The scheduler runs
// the firings; each calls ArchiveAndClear with the date ResetSchedule.Closes
// gives.

// Period is how often a periodic reset fires.
type Period string

const (
	Daily   Period = "daily"   // every day
	Weekly  Period = "weekly"  // every Monday
	Monthly Period = "monthly" // on the 1st of every month
)

// ParsePeriod reads "daily", "weekly" or "monthly".
func ParsePeriod(s string) (Period, bool) {
	switch p := Period(s); p {
	case Daily, Weekly, Monthly:
		return p, true
	}
	return "", false
}

// ParseResetTime reads "HH:MM" (00:00 to 23:59).
func ParseResetTime(s string) (hour, minute int, ok bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, 0, false
	}
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, 0, false
	}
	return t.Hour(), t.Minute(), true
}

// ResetSchedule is when a board's periodic reset fires: at Hour:Minute UTC
// every day, every Monday or on the 1st of every month.
type ResetSchedule struct {
	Period       Period
	Hour, Minute int
}

// ErrManualReset is returned by Closes for a run outside the schedule: a
// periodic reset closes the period that ends at its firing, and a run at
// any other time would close the period under way early, making the next
// firing find that period closed and keep the scores made in between.
// Board.Clear is the manual reset.
var ErrManualReset = errors.New("a periodic reset runs only at its scheduled firings (a manual run would close the period under way, and the next reset would skip it); clear the board to reset it by hand")

// Cron is the schedule as a five-field cron expression in UTC.
func (s ResetSchedule) Cron() string {
	switch s.Period {
	case Daily:
		return fmt.Sprintf("%d %d * * *", s.Minute, s.Hour)
	case Weekly:
		return fmt.Sprintf("%d %d * * 1", s.Minute, s.Hour)
	}
	return fmt.Sprintf("%d %d 1 * *", s.Minute, s.Hour)
}

func (s ResetSchedule) String() string {
	return fmt.Sprintf("%s at %02d:%02d UTC", s.Period, s.Hour, s.Minute)
}

// Latest returns the last firing at or before t.
func (s ResetSchedule) Latest(t time.Time) time.Time {
	t = t.UTC()
	y, m, d := t.Date()
	var f time.Time
	switch s.Period {
	case Daily:
		f = time.Date(y, m, d, s.Hour, s.Minute, 0, 0, time.UTC)
	case Weekly:
		monday := d - (int(t.Weekday())+6)%7
		f = time.Date(y, m, monday, s.Hour, s.Minute, 0, 0, time.UTC)
	default:
		f = time.Date(y, m, 1, s.Hour, s.Minute, 0, 0, time.UTC)
	}
	if f.After(t) {
		f = s.step(f, -1)
	}
	return f
}

// step moves a firing k periods on (back when k < 0).
func (s ResetSchedule) step(f time.Time, k int) time.Time {
	switch s.Period {
	case Daily:
		return f.AddDate(0, 0, k)
	case Weekly:
		return f.AddDate(0, 0, 7*k)
	}
	return f.AddDate(0, k, 0) // f is on the 1st: no month-end overflow
}

// Closes names the period that the firing scheduled at scheduled closes:
// the UTC date (YYYYMMDD) on which that period began. The firing is the one
// nearest to scheduled, so a scheduled time a little off still names its
// own firing; a run late or retried carries its firing's scheduled time and
// so closes the same period however late it runs. Daily at 00:00: the
// firing of 2024-05-02 00:00 closes "20240501"; weekly: the Monday the week
// began; monthly: the 1st of the month that ended.
//
// manual is true for a run outside the schedule (a scheduler's trigger):
// it gets ErrManualReset, since only a firing of the schedule may close a
// period.
func (s ResetSchedule) Closes(scheduled time.Time, manual bool) (string, error) {
	if manual {
		return "", ErrManualReset
	}
	f := s.Latest(scheduled)
	if next := s.step(f, 1); next.Sub(scheduled) < scheduled.Sub(f) {
		f = next
	}
	return s.step(f, -1).Format("20060102"), nil
}
