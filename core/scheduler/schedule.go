package scheduler

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule says when a task fires. Build one with Parse, Cron, Every, After
// or At; the zero Schedule is invalid. Its text and spec share one string
// where they can (a task keeps its Schedule: one object less per task).
type Schedule struct {
	kind Kind
	// text is what Info.Schedule shows.
	text string
	// spec is the canonical form, compared to tell "same schedule" and kept
	// in the Store: "cron:<expr>", "every:<ms>", "after:<ms>", "at:<ms>".
	spec  string
	cron  *cron.SpecSchedule // KindCron (Location set per task)
	every int64              // KindInterval: ms
	after int64              // KindOnce relative: delay ms
	at    int64              // KindOnce absolute: Unix ms (abs)
	abs   bool
}

// Kind returns the schedule's kind.
func (s Schedule) Kind() Kind { return s.kind }

// String returns the schedule as Info.Schedule shows it.
func (s Schedule) String() string { return s.text }

// IsZero reports the zero Schedule.
func (s Schedule) IsZero() bool { return s.kind == "" }

// cronParser reads the standard five fields and the descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Cron parses a standard five-field cron expression (minute hour
// day-of-month month day-of-week, with names, ranges, lists and steps) or a
// descriptor (@yearly, @annually, @monthly, @weekly, @daily, @midnight,
// @hourly; "@every <duration>" gives an interval schedule). Errors wrap
// ErrInvalid and name the field and token:
// `cron "0 25 * * *": hour field: 25 out of range 0-23`.
func Cron(expr string) (Schedule, error) {
	if s, ok := parsedCron.Load(expr); ok {
		return s.(Schedule), nil
	}
	s, err := parseCron(expr)
	if err == nil && parsedCronN.Add(1) <= parsedCronMax {
		parsedCron.Store(expr, s)
	}
	return s, err
}

// parsedCron caches Cron's schedules by expression. A server registers
// thousands of tasks with a few distinct expressions, and parsing (robfig's
// parser, our field check, the fires search) was a third of a cron
// registration from Lua. A Schedule is immutable (timeline copies the
// spec), so one value serves every task. Past parsedCronMax expressions
// new ones are parsed each time, so the cache stays small.
var (
	parsedCron  sync.Map // expression -> Schedule
	parsedCronN atomic.Int32
)

const parsedCronMax = 1024

func parseCron(expr string) (Schedule, error) {
	e := strings.Join(strings.Fields(expr), " ")
	bad := func(format string, args ...any) (Schedule, error) {
		return Schedule{}, fmt.Errorf("%w: cron %q: %s", ErrInvalid, expr, fmt.Sprintf(format, args...))
	}
	switch {
	case e == "":
		return bad("empty expression")
	case strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ="):
		return bad("give the time zone with the timezone option, not in the expression")
	case strings.HasPrefix(e, "@every"):
		d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(e, "@every")))
		if err != nil || d < time.Millisecond {
			return bad("@every wants a duration of at least 1ms, like \"@every 5m\"")
		}
		return Every(d)
	case strings.HasPrefix(e, "@"):
		if _, ok := descriptors[e]; !ok {
			return bad("unknown descriptor %q (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>)", e)
		}
	default:
		if err := checkCronFields(e); err != nil {
			return bad("%s", err)
		}
	}
	parsed, err := cronParser.Parse(sundayAsZero(e))
	if err != nil {
		return bad("%s", err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return bad("not a calendar schedule")
	}
	full := "cron:" + e
	s := Schedule{kind: KindCron, text: full[len("cron:"):], spec: full, cron: spec}
	if !s.fires() {
		return bad("never fires (no such date)")
	}
	return s, nil
}

// descriptors are robfig's predefined schedules.
var descriptors = map[string]struct{}{
	"@yearly": {}, "@annually": {}, "@monthly": {}, "@weekly": {},
	"@daily": {}, "@midnight": {}, "@hourly": {},
}

// fires reports whether a cron schedule has any fire time (robfig returns
// the zero time for "0 0 30 2 *" after five years of search).
func (s Schedule) fires() bool {
	return !s.cron.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero()
}

// Every returns an interval schedule: fires every d from an anchor (for a
// distributed task the anchor is kept in the Store, so every process
// computes the same fire times). d is in whole milliseconds and must be
// >= 1ms (ErrInvalid).
func Every(d time.Duration) (Schedule, error) {
	ms := d.Milliseconds()
	if d <= 0 || ms < 1 || d%time.Millisecond != 0 {
		return Schedule{}, fmt.Errorf("%w: interval %v: must be a positive whole number of milliseconds", ErrInvalid, d)
	}
	spec := "every:" + strconv.FormatInt(ms, 10)
	return Schedule{kind: KindInterval, text: spec[len("every:"):], spec: spec, every: ms}, nil
}

// After returns a one-shot schedule that fires once, delay after it is
// first registered (in the Store, for a distributed task). delay is in
// whole milliseconds and must be >= 0 (ErrInvalid). The task is removed
// after it runs.
func After(delay time.Duration) (Schedule, error) {
	if delay < 0 || delay%time.Millisecond != 0 {
		return Schedule{}, fmt.Errorf("%w: delay %v: must be a whole number of milliseconds >= 0", ErrInvalid, delay)
	}
	ms := delay.Milliseconds()
	spec := "after:" + strconv.FormatInt(ms, 10)
	return Schedule{kind: KindOnce, text: spec[len("after:"):], spec: spec, after: ms}, nil
}

// At returns a one-shot schedule that fires once at t (whole milliseconds).
// A time already past runs at registration if within the task's CatchUp,
// else counts as missed and the task is removed.
func At(t time.Time) Schedule {
	ms := t.UnixMilli()
	text := "at:" + strconv.FormatInt(t.Unix(), 10)
	if ms%1000 != 0 {
		text = "at:" + strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)
	}
	both := "at:" + strconv.FormatInt(ms, 10) + text
	n := len(both) - len(text)
	return Schedule{kind: KindOnce, text: both[n:], spec: both[:n], at: ms, abs: true}
}

// Parse reads a schedule expression in the formats of seed 001, or a bare
// cron expression:
//
//	every:60        every 60 seconds     every:30s, every:5m, every:1h, every:500ms
//	daily:03:00     every day at 03:00   (hours 00-23, minutes 00-59)
//	hourly:30       every hour at minute 30
//	cron:*/5 * * * *  a cron expression (see Cron)
//	at:1719590400   once, at that Unix time (seconds)
//	0 3 * * *       a bare cron expression or descriptor
//
// Errors wrap ErrInvalid and quote the expression.
func Parse(expr string) (Schedule, error) {
	e := strings.TrimSpace(expr)
	bad := func(msg string) (Schedule, error) {
		return Schedule{}, fmt.Errorf("%w: schedule %q: %s", ErrInvalid, expr, msg)
	}
	prefix, rest, ok := strings.Cut(e, ":")
	if !ok || strings.ContainsAny(prefix, " *@") {
		return Cron(e)
	}
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(prefix) {
	case "cron":
		return Cron(rest)
	case "every":
		d, ok := parseEvery(rest)
		if !ok {
			return bad("every: wants a positive count of seconds, or of ms, s, m or h (every:60, every:30s, every:5m, every:1h)")
		}
		return Every(d)
	case "daily":
		h, m, ok := strings.Cut(rest, ":")
		hh, okh := twoDigits(h, 23)
		mm, okm := twoDigits(m, 59)
		if !ok || !okh || !okm {
			return bad("daily: wants HH:MM with HH 00-23 and MM 00-59 (daily:03:00)")
		}
		return Cron(fmt.Sprintf("%d %d * * *", mm, hh))
	case "hourly":
		mm, ok := twoDigits(rest, 59)
		if !ok {
			return bad("hourly: wants a minute 0-59 (hourly:30)")
		}
		return Cron(fmt.Sprintf("%d * * * *", mm))
	case "at":
		sec, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || sec < 0 || sec > 1<<40 {
			return bad("at: wants a Unix time in seconds (at:1719590400)")
		}
		return At(time.Unix(sec, 0)), nil
	}
	return bad(`unknown format (want every:, daily:, hourly:, cron:, at: or a cron expression)`)
}

// parseEvery reads "60", "30s", "5m", "1h", "500ms".
func parseEvery(s string) (time.Duration, bool) {
	unit := time.Second
	for _, u := range []struct {
		suffix string
		d      time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}} {
		if strings.HasSuffix(s, u.suffix) {
			s, unit = strings.TrimSuffix(s, u.suffix), u.d
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > int64(100*365*24*time.Hour/unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// twoDigits reads a number of one or two digits in 0..max.
func twoDigits(s string, max int) (int, bool) {
	if len(s) < 1 || len(s) > 2 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > max || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	return n, true
}

// parseSpec reads a canonical spec (Schedule.spec) back, for a schedule
// another process stored.
func parseSpec(spec string) (Schedule, error) {
	kind, rest, _ := strings.Cut(spec, ":")
	ms := func() (int64, error) { return strconv.ParseInt(rest, 10, 64) }
	switch kind {
	case "cron":
		return Cron(rest)
	case "every":
		n, err := ms()
		if err == nil {
			return Every(time.Duration(n) * time.Millisecond)
		}
	case "after":
		n, err := ms()
		if err == nil {
			return After(time.Duration(n) * time.Millisecond)
		}
	case "at":
		n, err := ms()
		if err == nil {
			return At(time.UnixMilli(n)), nil
		}
	}
	return Schedule{}, fmt.Errorf("%w: stored schedule %q", ErrInvalid, spec)
}

// Preview returns the next n fire times of expr (Parse's formats) after
// from, in zone tz ("" = UTC): what a task registered at from would do. An
// interval is anchored at from; a one-shot schedule gives at most one time.
// n must be in 1..10000. Errors wrap ErrInvalid.
func Preview(expr string, n int, tz string, from time.Time) ([]time.Time, error) {
	if n < 1 || n > 10000 {
		return nil, fmt.Errorf("%w: preview count %d: must be in 1..10000", ErrInvalid, n)
	}
	s, err := Parse(expr)
	if err != nil {
		return nil, err
	}
	loc, err := loadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	tl := s.timeline(loc, from.UnixMilli())
	out := make([]time.Time, 0, n)
	for t := from.UnixMilli(); len(out) < n; {
		t = tl.next(t)
		if t == 0 {
			break
		}
		out = append(out, time.UnixMilli(t).In(loc))
	}
	return out, nil
}

// timeline is a schedule resolved for one task: its zone and anchor, with
// fire times in Unix milliseconds.
type timeline struct {
	s      Schedule
	cron   *cron.SpecSchedule // s.cron with the task's zone
	anchor int64              // interval: fire times anchor + k·every (k >= 1); once: registration time
}

func (s Schedule) timeline(loc *time.Location, anchor int64) timeline {
	tl := timeline{s: s, anchor: anchor}
	if s.kind == KindCron {
		c := *s.cron
		c.Location = loc
		tl.cron = &c
	}
	return tl
}

// once returns a one-shot schedule's fire time.
func (tl timeline) once() int64 {
	if tl.s.abs {
		return tl.s.at
	}
	return tl.anchor + tl.s.after
}

// next returns the first fire time strictly after t, or 0 when none.
func (tl timeline) next(t int64) int64 {
	switch tl.s.kind {
	case KindCron:
		n := tl.cron.Next(time.UnixMilli(t).In(tl.cron.Location))
		for !n.IsZero() && tl.repeatsWallTime(n) {
			n = tl.cron.Next(n)
		}
		if n.IsZero() {
			return 0
		}
		return n.UnixMilli()
	case KindInterval:
		if t < tl.anchor {
			return tl.anchor + tl.s.every
		}
		return tl.anchor + ((t-tl.anchor)/tl.s.every+1)*tl.s.every
	case KindOnce:
		if at := tl.once(); at > t {
			return at
		}
	}
	return 0
}

// allHours is a cron hour field that matches every hour.
const allHours = 1<<24 - 1

// repeatsWallTime reports whether fire time n is the second occurrence of
// its local wall-clock time, in the hour a fall-back repeats (01:30 EDT,
// then 01:30 EST in New York): a time of day fires once, at its first
// occurrence (robfig's Next matches both). A schedule that fires every hour
// keeps firing in real time through the repeated hour, as Vixie cron runs
// its wildcard jobs, so an "every 5 minutes" cron does not go quiet.
func (tl timeline) repeatsWallTime(n time.Time) bool {
	if tl.cron.Hour&allHours == allHours {
		return false
	}
	start, _ := n.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, now := n.Zone()
	_, before := start.Add(-time.Second).Zone()
	back := time.Duration(before-now) * time.Second // how far the clocks went back at start
	return back > 0 && n.Sub(start) < back
}

// countCap bounds the iterations count spends on a cron schedule; beyond
// it the count is extrapolated from the mean period seen so far.
const countCap = 10000

// count returns the number of fire times in the open interval (a, b).
func (tl timeline) count(a, b int64) int64 {
	if b <= a+1 {
		return 0
	}
	switch tl.s.kind {
	case KindInterval:
		first := tl.next(a)
		if first >= b {
			return 0
		}
		return (b-1-first)/tl.s.every + 1
	case KindOnce:
		if at := tl.once(); at > a && at < b {
			return 1
		}
		return 0
	}
	var n int64
	for t := tl.next(a); t != 0 && t < b; t = tl.next(t) {
		n++
		if n == countCap {
			return n * (b - a) / (t - a)
		}
	}
	return n
}

// lastBefore returns the last fire time in (a, b], or 0. On a cron
// schedule it searches windows that grow from an hour back from b, so its
// cost is about the fire times in the first window holding one (cron
// fires at most once a minute), not in (a, b].
func (tl timeline) lastBefore(a, b int64) int64 {
	if b <= a {
		return 0
	}
	switch tl.s.kind {
	case KindInterval:
		if b < tl.anchor+tl.s.every {
			return 0
		}
		if t := tl.anchor + (b-tl.anchor)/tl.s.every*tl.s.every; t > a {
			return t
		}
		return 0
	case KindOnce:
		if at := tl.once(); at > a && at <= b {
			return at
		}
		return 0
	}
	for w := int64(time.Hour / time.Millisecond); ; w *= 24 {
		from := max(a, b-w)
		var last int64
		for t := tl.next(from); t != 0 && t <= b; t = tl.next(t) {
			last = t
		}
		if last != 0 || from == a {
			return last
		}
	}
}

// latest returns the last fire time in (a, b] that is at least b-window,
// or 0 when there is none, and how many fire times in (a, b] come before
// it (or all of them, when it is 0): the firing a catch-up runs and the
// ones it counts as missed.
func (tl timeline) latest(a, b, window int64) (last, before int64) {
	last = tl.lastBefore(a, b)
	if last == 0 || last < b-window {
		return 0, tl.count(a, b+1)
	}
	return last, tl.count(a, last)
}
