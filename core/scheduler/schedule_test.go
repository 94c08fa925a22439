package scheduler

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestParseFormats(t *testing.T) {
	for _, c := range []struct {
		expr string
		kind Kind
		text string
	}{
		{"every:60", KindInterval, "60000"},
		{"every:30s", KindInterval, "30000"},
		{"every:5m", KindInterval, "300000"},
		{"every:1h", KindInterval, "3600000"},
		{"every:250ms", KindInterval, "250"},
		{"daily:03:00", KindCron, "0 3 * * *"},
		{"daily:23:59", KindCron, "59 23 * * *"},
		{"hourly:30", KindCron, "30 * * * *"},
		{"cron:*/5 * * * *", KindCron, "*/5 * * * *"},
		{"cron: 0  0 * * 1 ", KindCron, "0 0 * * 1"},
		{"at:1719590400", KindOnce, "at:1719590400"},
		{"0 12 * * 1-5", KindCron, "0 12 * * 1-5"},
		{"@daily", KindCron, "@daily"},
		{"@every 90s", KindInterval, "90000"},
		{"0 0 1 jan,jul *", KindCron, "0 0 1 jan,jul *"},
		{"0 0 * * sun", KindCron, "0 0 * * sun"},
	} {
		s, err := Parse(c.expr)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.expr, err)
			continue
		}
		if s.Kind() != c.kind || s.String() != c.text {
			t.Errorf("Parse(%q) = %s %q; want %s %q", c.expr, s.Kind(), s.String(), c.kind, c.text)
		}
	}
}

func TestBadSchedules(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"0 25 * * *", `cron "0 25 * * *": hour field: 25 out of range 0-23`},
		{"61 * * * *", `minute field: 61 out of range 0-59`},
		{"* * 0 * *", `day-of-month field: 0 out of range 1-31`},
		{"* * * 13 *", `month field: 13 out of range 1-12`},
		{"* * * * 8", `day-of-week field: 8 out of range 0-7`},
		{"x * * * *", `minute field: bad token "x"`},
		{"*/0 * * * *", `minute field: step 0 in "*/0" must be > 0`},
		{"5-3 * * * *", `minute field: range "5-3" runs backwards`},
		{"* * * *", `want 5 fields (minute hour day-of-month month day-of-week), got 4`},
		{"0 0 30 2 *", `never fires`},
		{"@fortnightly", `unknown descriptor`},
		{"TZ=UTC 0 0 * * *", `timezone option`},
		{"", `empty expression`},
		{"every:0", `every: wants a positive count`},
		{"every:-5s", `every: wants a positive count`},
		{"every:5x", `every: wants a positive count`},
		{"daily:24:00", `daily: wants HH:MM`},
		{"daily:3", `daily: wants HH:MM`},
		{"hourly:60", `hourly: wants a minute 0-59`},
		{"at:soon", `at: wants a Unix time`},
		{"weekly:mon", `unknown format`},
	} {
		_, err := Parse(c.expr)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v; want ErrInvalid containing %q", c.expr, err, c.want)
		}
	}
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond, 1500 * time.Microsecond} {
		if _, err := Every(d); !errors.Is(err, ErrInvalid) {
			t.Errorf("Every(%v) = %v; want ErrInvalid", d, err)
		}
	}
	if _, err := After(-time.Millisecond); !errors.Is(err, ErrInvalid) {
		t.Errorf("After(-1ms) = %v", err)
	}
}

func TestPreview(t *testing.T) {
	from := time.Date(2026, 6, 10, 12, 0, 0, 0, time.UTC)
	// "* 0 * * *" is every minute of hour 0, not once a day.
	ts, err := Preview("* 0 * * *", 3, "", from)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{
		time.Date(2026, 6, 11, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 6, 11, 0, 1, 0, 0, time.UTC),
		time.Date(2026, 6, 11, 0, 2, 0, 0, time.UTC),
	}
	for i := range want {
		if !ts[i].Equal(want[i]) {
			t.Fatalf("Preview = %v; want %v", ts, want)
		}
	}
	ts, _ = Preview("daily:08:00", 1, "Asia/Shanghai", from)
	if want := time.Date(2026, 6, 11, 0, 0, 0, 0, time.UTC); !ts[0].Equal(want) || ts[0].Location().String() != "Asia/Shanghai" {
		t.Fatalf("Shanghai 08:00 = %v; want %v in Asia/Shanghai", ts[0], want)
	}
	ts, _ = Preview("every:5m", 2, "", from)
	if !ts[0].Equal(from.Add(5*time.Minute)) || !ts[1].Equal(from.Add(10*time.Minute)) {
		t.Fatalf("every:5m = %v", ts)
	}
	ts, _ = Preview("at:1", 5, "", from)
	if len(ts) != 0 {
		t.Fatalf("a past at: previews %v", ts)
	}
	// Daylight saving: New York's 02:30 does not exist on 2026-03-08.
	ts, _ = Preview("30 2 * * *", 2, "America/New_York", time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	if ts[0].Day() != 7+1 && ts[0].Day() != 9 {
		t.Fatalf("DST preview %v", ts)
	}
	for _, c := range []struct {
		n  int
		tz string
	}{{0, ""}, {10001, ""}, {1, "Mars/Olympus"}, {1, "Local"}} {
		if _, err := Preview("@daily", c.n, c.tz, from); !errors.Is(err, ErrInvalid) {
			t.Errorf("Preview(n=%d, tz=%q) = %v; want ErrInvalid", c.n, c.tz, err)
		}
	}
}

// count, lastBefore and latest agree with walking the fire times one by one.
func TestTimelineArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	scheds := []Schedule{mustCron(t, "*/7 * * * *"), mustCron(t, "0 9-17 * * 1-5"), every(t, 1700*time.Millisecond), every(t, time.Hour)}
	for _, s := range scheds {
		tl := s.timeline(time.UTC, base+123)
		for range 200 {
			a := base + rng.Int64N(3*24*3600*1000)
			b := a + rng.Int64N(24*3600*1000)
			var n, last int64
			for x := tl.next(a); x != 0 && x <= b; x = tl.next(x) {
				if x < b {
					n++
				}
				last = x
			}
			if got := tl.count(a, b); got != n {
				t.Fatalf("%s count(%d, %d) = %d; want %d", s, a, b, got, n)
			}
			if got := tl.lastBefore(a, b); got != last {
				t.Fatalf("%s lastBefore(%d, %d) = %d; want %d", s, a, b, got, last)
			}
		}
	}
}

func TestBadOptions(t *testing.T) {
	e, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeEngine(t, e)
	hourly := mustCron(t, "0 * * * *")
	for _, c := range []struct {
		name string
		mod  func(o *Options)
		want string
	}{
		{"tz", func(o *Options) { o.Timezone = "Mars/Olympus" }, `timezone "Mars/Olympus": unknown time zone`},
		{"overlap", func(o *Options) { o.Overlap = "queue" }, `overlap "queue": want "skip" or "allow"`},
		{"redis_down", func(o *Options) { o.OnRedisDown = "panic" }, `on_redis_down "panic"`},
		{"lock_ttl", func(o *Options) { o.LockTTL = 0 }, `lock_ttl 0s: must be > 0`},
		{"retries", func(o *Options) { o.MaxRetries = -1 }, `max_retries -1`},
		{"delay", func(o *Options) { o.RetryDelay = -time.Second }, `retry_delay -1s`},
		{"catch_up", func(o *Options) { o.CatchUp = -1 }, `catch_up`},
	} {
		o := e.DefaultOptions()
		c.mod(&o)
		_, err := e.Register(Task{Name: "x", Schedule: hourly, Options: o, Run: noop}).Do(t.Context())
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrInvalid with %q", c.name, err, c.want)
		}
	}
	o := e.DefaultOptions()
	for _, tk := range []Task{
		{Name: "", Schedule: hourly, Options: o, Run: noop},
		{Name: "}x", Schedule: hourly, Options: o, Run: noop},
		{Name: "x", Options: o, Run: noop},
		{Name: "x", Schedule: hourly, Options: o},
	} {
		if _, err := e.Register(tk).Do(t.Context()); !errors.Is(err, ErrInvalid) {
			t.Errorf("Register(%+v) = %v; want ErrInvalid", tk.Name, err)
		}
	}
	do(t, e.Register(Task{Name: "job", Schedule: hourly, Options: o, Run: noop}))
	if _, err := e.Register(Task{Name: "job", Schedule: every(t, time.Minute), Options: o, Run: noop}).Do(t.Context()); !errors.Is(err, ErrKindConflict) {
		t.Errorf("another kind: %v; want ErrKindConflict", err)
	}
	for _, op := range []func(string) error{
		func(n string) error { _, err := e.Pause(n).Do(t.Context()); return err },
		func(n string) error { _, err := e.Trigger(n).Do(t.Context()); return err },
		func(n string) error { _, err := e.Get(n).Do(t.Context()); return err },
	} {
		if err := op("nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("op on an unknown task: %v; want ErrNotFound", err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"every:60", "daily:03:00", "hourly:30", "cron:*/5 * * * *", "at:1719590400",
		"0 0 * * *", "@every 1h", "1-5/2,7 */3 1 jan-mar mon-fri", "@monthly"} {
		f.Add(s)
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := Parse(expr)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q): error %v does not wrap ErrInvalid", expr, err)
			}
			return
		}
		back, err := parseSpec(s.spec)
		if err != nil || back.spec != s.spec {
			t.Fatalf("Parse(%q): spec %q does not round-trip: %v", expr, s.spec, err)
		}
		tl := s.timeline(time.UTC, from.UnixMilli())
		if n := tl.next(from.UnixMilli()); n != 0 && n <= from.UnixMilli() {
			t.Fatalf("Parse(%q): next %d not after %d", expr, n, from.UnixMilli())
		}
	})
}
