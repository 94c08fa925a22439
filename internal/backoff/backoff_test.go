package backoff

import (
	"testing"
	"time"
)

func TestDelayStaysWithinTheJitteredSchedule(t *testing.T) {
	p := Policy{Min: 50 * time.Millisecond, Max: time.Second}
	want := []time.Duration{50, 100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		w *= time.Millisecond
		for range 200 {
			d := p.Delay(i + 1)
			if d < w/2 || d > w {
				t.Fatalf("Delay(%d) = %v, want within [%v, %v]", i+1, d, w/2, w)
			}
		}
	}
	if d := p.Delay(0); d < 25*time.Millisecond || d > 50*time.Millisecond {
		t.Fatalf("Delay(0) = %v, want retry 1's range", d)
	}
	if d := p.Delay(1 << 30); d < 500*time.Millisecond || d > time.Second {
		t.Fatalf("Delay(huge) = %v, want the cap's range", d)
	}
}

// Processes that failed together must not retry together: 100 draws of one
// retry's wait spread over its range instead of landing on one value.
func TestDelaysAreSpread(t *testing.T) {
	p := Policy{Min: time.Second, Max: time.Second}
	seen := map[time.Duration]bool{}
	lo, hi := time.Second, time.Duration(0)
	for range 100 {
		d := p.Delay(1)
		seen[d] = true
		lo, hi = min(lo, d), max(hi, d)
	}
	if len(seen) < 90 || hi-lo < 300*time.Millisecond {
		t.Fatalf("100 draws gave %d distinct waits over [%v, %v]: not jittered", len(seen), lo, hi)
	}
}

func TestBackoffCountsAndResets(t *testing.T) {
	b := New(10*time.Millisecond, 80*time.Millisecond)
	for i := 1; i <= 5; i++ {
		d := b.Next()
		if c := b.ceiling(i); d < c/2 || d > c {
			t.Fatalf("Next #%d = %v, want within [%v, %v]", i, d, c/2, c)
		}
	}
	if b.Failures() != 5 {
		t.Fatalf("Failures = %d, want 5", b.Failures())
	}
	b.Reset()
	if d := b.Next(); d > 10*time.Millisecond {
		t.Fatalf("Next after Reset = %v, want <= Min", d)
	}
}
