package rank

import (
	"errors"
	"testing"
	"time"
)

func TestResetScheduleClosesThePeriodThatEnded(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		s    ResetSchedule
		at   string // the firing's scheduled time
		want string
	}{
		{ResetSchedule{Period: Daily}, "2024-05-02T00:00:00Z", "20240501"},
		{ResetSchedule{Period: Daily}, "2024-05-02T00:00:00.3Z", "20240501"},
		{ResetSchedule{Period: Daily}, "2024-05-01T23:59:58Z", "20240501"}, // a little off: the firing of 05-02 00:00
		{ResetSchedule{Period: Daily}, "2024-03-01T00:00:00Z", "20240229"}, // leap day
		{ResetSchedule{Period: Daily}, "2025-01-01T00:00:00Z", "20241231"},
		{ResetSchedule{Period: Daily, Hour: 5, Minute: 30}, "2024-05-02T05:30:00Z", "20240501"},
		{ResetSchedule{Period: Daily, Hour: 23, Minute: 59}, "2024-05-02T23:59:00Z", "20240501"},
		{ResetSchedule{Period: Weekly}, "2024-05-13T00:00:00Z", "20240506"}, // Monday 13th closes the week of Monday 6th
		{ResetSchedule{Period: Weekly}, "2024-05-12T23:59:59Z", "20240506"},
		{ResetSchedule{Period: Weekly, Hour: 12}, "2024-01-01T12:00:00Z", "20231225"},
		{ResetSchedule{Period: Monthly}, "2024-06-01T00:00:00Z", "20240501"},
		{ResetSchedule{Period: Monthly}, "2024-01-01T00:00:00Z", "20231201"},
		{ResetSchedule{Period: Monthly}, "2024-03-31T23:59:59Z", "20240301"}, // a little off: April 1st
		{ResetSchedule{Period: Monthly, Hour: 6}, "2024-03-01T06:00:00Z", "20240201"},
	}
	for _, c := range cases {
		if got, err := c.s.Closes(at(c.at), false); err != nil || got != c.want {
			t.Errorf("%s fired at %s: %s %v, want %s", c.s, c.at, got, err, c.want)
		}
		if got, err := c.s.Closes(at(c.at), true); !errors.Is(err, ErrManualReset) || got != "" {
			t.Errorf("%s, a manual run at %s: %q %v, want ErrManualReset", c.s, c.at, got, err)
		}
	}
	for _, c := range []struct {
		s    ResetSchedule
		want string
	}{
		{ResetSchedule{Period: Daily, Hour: 3, Minute: 7}, "7 3 * * *"},
		{ResetSchedule{Period: Weekly}, "0 0 * * 1"},
		{ResetSchedule{Period: Monthly, Hour: 23, Minute: 59}, "59 23 1 * *"},
	} {
		if got := c.s.Cron(); got != c.want {
			t.Errorf("%+v: cron %q, want %q", c.s, got, c.want)
		}
	}
}

func TestParseResetOptions(t *testing.T) {
	for _, s := range []string{"daily", "weekly", "monthly"} {
		if p, ok := ParsePeriod(s); !ok || string(p) != s {
			t.Errorf("ParsePeriod(%q) = %q %v", s, p, ok)
		}
	}
	for _, s := range []string{"", "hourly", "Daily"} {
		if _, ok := ParsePeriod(s); ok {
			t.Errorf("ParsePeriod(%q) accepted", s)
		}
	}
	for s, want := range map[string][2]int{"00:00": {0, 0}, "05:15": {5, 15}, "23:59": {23, 59}} {
		if h, m, ok := ParseResetTime(s); !ok || h != want[0] || m != want[1] {
			t.Errorf("ParseResetTime(%q) = %d %d %v", s, h, m, ok)
		}
	}
	for _, s := range []string{"24:00", "5:00", "05:60", "0500", "05:00:00"} {
		if _, _, ok := ParseResetTime(s); ok {
			t.Errorf("ParseResetTime(%q) accepted", s)
		}
	}
}
