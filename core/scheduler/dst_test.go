package scheduler

import (
	"testing"
	"time"
)

// Daylight saving. A local time of day that a fall-back repeats fires once,
// at its first occurrence; one that a spring-forward skips does not fire
// that day; a schedule that fires every hour keeps firing in real time
// through the repeated hour. robfig's Next alone fires the repeated time
// twice (01:30 EDT and 01:30 EST).

type dstCase struct {
	name, expr, tz string
	from, to       time.Time // UTC
	want           []string  // local fire times in (from, to], "2006-01-02 15:04 MST"
}

var dstCases = []dstCase{
	{"New York fall-back, cron", "30 1 * * *", "America/New_York",
		utc(2027, 11, 6, 0), utc(2027, 11, 9, 0),
		[]string{"2027-11-06 01:30 EDT", "2027-11-07 01:30 EDT", "2027-11-08 01:30 EST"}},
	{"New York fall-back, seed-001 daily", "daily:01:30", "America/New_York",
		utc(2027, 11, 6, 0), utc(2027, 11, 9, 0),
		[]string{"2027-11-06 01:30 EDT", "2027-11-07 01:30 EDT", "2027-11-08 01:30 EST"}},
	{"London fall-back", "30 1 * * *", "Europe/London",
		utc(2027, 10, 30, 0), utc(2027, 11, 2, 0),
		[]string{"2027-10-30 01:30 BST", "2027-10-31 01:30 BST", "2027-11-01 01:30 GMT"}},
	{"Sydney fall-back", "30 2 * * *", "Australia/Sydney",
		utc(2027, 4, 2, 12), utc(2027, 4, 5, 12),
		[]string{"2027-04-03 02:30 AEDT", "2027-04-04 02:30 AEDT", "2027-04-05 02:30 AEST"}},
	{"Lord Howe half-hour fall-back", "45 1 * * *", "Australia/Lord_Howe",
		utc(2027, 4, 2, 12), utc(2027, 4, 5, 12),
		[]string{"2027-04-03 01:45 +11", "2027-04-04 01:45 +11", "2027-04-05 01:45 +1030"}},
	{"New York spring-forward skips 02:30", "30 2 * * *", "America/New_York",
		utc(2027, 3, 13, 0), utc(2027, 3, 16, 0),
		[]string{"2027-03-13 02:30 EST", "2027-03-15 02:30 EDT"}},
	{"London spring-forward, seed-001 daily", "daily:01:30", "Europe/London",
		utc(2027, 3, 27, 0), utc(2027, 3, 30, 0),
		[]string{"2027-03-27 01:30 GMT", "2027-03-29 01:30 BST"}},
	{"every half hour runs through the repeated hour", "*/30 * * * *", "America/New_York",
		utc(2027, 11, 7, 4), utc(2027, 11, 7, 7),
		[]string{"2027-11-07 00:30 EDT", "2027-11-07 01:00 EDT", "2027-11-07 01:30 EDT",
			"2027-11-07 01:00 EST", "2027-11-07 01:30 EST", "2027-11-07 02:00 EST"}},
}

func utc(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }

func local(ts []time.Time, loc *time.Location) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.In(loc).Format("2006-01-02 15:04 MST"))
	}
	return out
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPreviewAcrossDaylightSaving(t *testing.T) {
	for _, c := range dstCases {
		t.Run(c.name, func(t *testing.T) {
			loc, err := time.LoadLocation(c.tz)
			if err != nil {
				t.Fatal(err)
			}
			ts, err := Preview(c.expr, 20, c.tz, c.from)
			if err != nil {
				t.Fatal(err)
			}
			var in []time.Time
			for _, x := range ts {
				if !x.After(c.to) {
					in = append(in, x)
				}
			}
			if got := local(in, loc); !sameStrings(got, c.want) {
				t.Fatalf("Preview(%q) in %s:\n got %q\nwant %q", c.expr, c.tz, got, c.want)
			}
		})
	}
}

// The engine fires what Preview shows: the tasks run on a fake clock
// stepped through each change.
func TestEngineAcrossDaylightSaving(t *testing.T) {
	for _, c := range dstCases {
		t.Run(c.name, func(t *testing.T) {
			e, clk, _ := newLocal(t)
			clk.Advance(c.from.Sub(clk.Now()))
			loc, err := time.LoadLocation(c.tz)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Parse(c.expr)
			if err != nil {
				t.Fatal(err)
			}
			var log runLog
			o := e.DefaultOptions()
			o.Timezone = c.tz
			do(t, e.Register(Task{Name: "t", Schedule: s, Options: o,
				Run: func(f Firing, done func(error)) { log.run(0, f, done) }}))
			tickLocal(t, e, clk, c.to.Sub(c.from), 5*time.Minute)
			var fired []time.Time
			for _, r := range log.all() {
				fired = append(fired, r.Scheduled)
			}
			if got := local(fired, loc); !sameStrings(got, c.want) {
				t.Fatalf("%q in %s fired:\n got %q\nwant %q", c.expr, c.tz, got, c.want)
			}
		})
	}
}

// Day-of-week 7 is Sunday, alone, in ranges and in stepped ranges.
func TestSundayAsSeven(t *testing.T) {
	from := time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC) // a Tuesday
	for _, c := range []struct{ seven, zero string }{
		{"0 9 * * 7", "0 9 * * 0"},
		{"0 9 * * 5-7", "0 9 * * 5,6,0"},
		{"0 9 * * 1-7/2", "0 9 * * 1,3,5,0"},
		{"0 9 * * mon,7", "0 9 * * 1,0"},
	} {
		got, err := Preview(c.seven, 10, "", from)
		if err != nil {
			t.Fatalf("Preview(%q): %v", c.seven, err)
		}
		want, err := Preview(c.zero, 10, "", from)
		if err != nil {
			t.Fatal(err)
		}
		if !sameStrings(local(got, time.UTC), local(want, time.UTC)) {
			t.Errorf("%q fires %v; want %q's %v", c.seven, local(got, time.UTC), c.zero, local(want, time.UTC))
		}
	}
	s, err := Cron("0 9 * * 7")
	if err != nil || s.String() != "0 9 * * 7" {
		t.Fatalf("Cron(7) = %q, %v; want the text kept", s.String(), err)
	}
}
