package scheduler

import (
	"testing"
	"time"
)

// The system clock's timer (a timerfd on Linux) fires once per arming,
// re-arms with Reset, stays quiet after Stop, and Close ends it.
func TestSystemTimer(t *testing.T) {
	fired := make(chan time.Time, 4)
	start := time.Now()
	tm := realClock{}.AfterFunc(20*time.Millisecond, func() { fired <- time.Now() })
	r, ok := tm.(resetter)
	if !ok {
		t.Fatalf("%T cannot be re-armed", tm)
	}
	select {
	case at := <-fired:
		if at.Sub(start) < 20*time.Millisecond {
			t.Fatalf("fired after %v, armed for 20ms", at.Sub(start))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("never fired")
	}
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reported it pending")
	}

	r.Reset(time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer reported it not pending")
	}
	r.Reset(10 * time.Millisecond)
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("a re-armed timer never fired")
	}

	r.Reset(30 * time.Millisecond)
	tm.Stop()
	select {
	case <-fired:
		t.Fatal("a stopped timer fired")
	case <-time.After(100 * time.Millisecond):
	}

	if c, ok := tm.(interface{ Close() error }); ok {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		r.Reset(time.Millisecond) // a closed timer ignores it
		select {
		case <-fired:
			t.Fatal("a closed timer fired")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
