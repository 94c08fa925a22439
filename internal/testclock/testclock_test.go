package testclock

import (
	"reflect"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/clock"
)

// AdvanceStepwise runs each timer at its own deadline, in deadline order,
// fires timers that callbacks arm within the step, leaves later and
// stopped ones pending, and ends at now + d; Advance jumps first.
func TestAdvanceStepwise(t *testing.T) {
	c := New()
	start := c.Now()
	var got []time.Duration
	at := func() { got = append(got, c.Now().Sub(start)) }
	var tick func()
	tick = func() { // re-arms itself every 300 ms
		at()
		c.AfterFunc(300*time.Millisecond, tick)
	}
	c.AfterFunc(300*time.Millisecond, tick)
	c.AfterFunc(100*time.Millisecond, at)
	c.AfterFunc(1500*time.Millisecond, func() { t.Error("a timer due after the step fired") })
	c.AfterFunc(200*time.Millisecond, func() { t.Error("a stopped timer fired") }).Stop()

	c.AdvanceStepwise(time.Second)
	if want := []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond}; !reflect.DeepEqual(got, want) {
		t.Fatalf("timers ran at %v, want %v", got, want)
	}
	if d := c.Now().Sub(start); d != time.Second {
		t.Fatalf("clock at +%v after the step, want +1s", d)
	}
	if n := c.Pending(); n != 2 { // tick (at 1.2 s) and the one at 1.5 s
		t.Fatalf("%d timers pending, want 2", n)
	}

	// Advance: the timer due at 1.2 s sees the end (1.3 s) and the one it
	// re-arms (1.6 s) waits, as does the one at 1.5 s.
	got = nil
	c.Advance(300 * time.Millisecond)
	if want := []time.Duration{1300 * time.Millisecond}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Advance ran timers at %v, want %v", got, want)
	}
}

// Jump moves the time and leaves a timer that came due pending, for the
// next Advance to fire.
func TestJump(t *testing.T) {
	c := New()
	start := c.Now()
	fired := 0
	c.AfterFunc(time.Second, func() { fired++ })
	c.Jump(2 * time.Second)
	if fired != 0 || c.Pending() != 1 || c.Now().Sub(start) != 2*time.Second {
		t.Fatalf("after Jump: fired %d, pending %d, at +%v", fired, c.Pending(), c.Now().Sub(start))
	}
	c.AdvanceStepwise(0)
	if fired != 1 || c.Now().Sub(start) != 2*time.Second {
		t.Fatalf("after AdvanceStepwise(0): fired %d, at +%v", fired, c.Now().Sub(start))
	}
}

// Offset skews Now and keeps the timers of the clock beneath.
func TestOffset(t *testing.T) {
	c := New()
	o := Offset(c, -2*time.Second)
	if d := c.Now().Sub(o.Now()); d != 2*time.Second {
		t.Fatalf("offset clock %v behind, want 2s", d)
	}
	fired := false
	o.AfterFunc(time.Second, func() { fired = true })
	c.Advance(time.Second)
	if !fired {
		t.Fatal("the offset clock's timer did not fire on its clock's Advance")
	}
	if d := time.Until(Offset(clock.Real, time.Hour).Now()); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("Offset(clock.Real, 1h) is %v ahead", d)
	}
}
