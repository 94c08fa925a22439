package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testclock"
)

// waitResult collects a Wait's done calls.
type waitResult struct {
	mu    sync.Mutex
	calls []Decision
}

func (r *waitResult) done(d Decision, err error) {
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, d)
}

func (r *waitResult) get() []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Decision(nil), r.calls...)
}

// SlidingWindow.Wait sleeps on the Set's clock until the window admits the
// request, gives up at its deadline without a try past it, and stops on
// cancel: all on an injected clock (it used to be the binding's loop on the
// wall clock).
func TestSlidingWindowWait(t *testing.T) {
	clk := testclock.New()
	s := NewMemory(Config{Now: clk.Now, AfterFunc: afterFunc(clk), Logger: quietLogger()})
	w, err := s.SlidingWindow("sw_wait", Options{Window: time.Second, MaxRequests: 2})
	if err != nil {
		t.Fatal(err)
	}
	tries := 0
	try := func(done func(Decision, error)) {
		tries++
		done(w.Allow(context.Background(), "k", 1))
	}
	for range 2 {
		if d, _ := w.Allow(t.Context(), "k", 1); !d.Allowed {
			t.Fatal("the window refused a request under its limit")
		}
	}

	// Admitted once the first request leaves the window.
	var granted waitResult
	w.Wait("k", 1, 5*time.Second, try, granted.done)
	clk.AdvanceStepwise(990 * time.Millisecond)
	if c := granted.get(); len(c) != 0 {
		t.Fatalf("done %+v before the window opened", c)
	}
	clk.AdvanceStepwise(20 * time.Millisecond)
	if c := granted.get(); len(c) != 1 || !c[0].Allowed {
		t.Fatalf("done %+v, want one allowed decision once the window opened", c)
	}

	// A deadline before the window opens: one try, then the timeout.
	if d, _ := w.Allow(t.Context(), "k", 1); !d.Allowed {
		t.Fatal("the window refused a request under its limit")
	}
	var late waitResult
	tries = 0
	w.Wait("k", 1, 300*time.Millisecond, try, late.done)
	clk.AdvanceStepwise(299 * time.Millisecond)
	if c := late.get(); len(c) != 0 {
		t.Fatalf("done %+v before the deadline", c)
	}
	clk.AdvanceStepwise(2 * time.Millisecond)
	if c := late.get(); len(c) != 1 || c[0].Allowed || c[0].Reason != Timeout {
		t.Fatalf("done %+v, want one timeout", c)
	}
	if tries != 1 {
		t.Fatalf("%d tries, want 1 (the window could not open before the deadline)", tries)
	}

	// Cancelled: done is never called.
	var cancelled waitResult
	cancel := w.Wait("k", 1, 5*time.Second, try, cancelled.done)
	if !cancel() || cancel() {
		t.Fatal("cancel did not report true once, then false")
	}
	clk.AdvanceStepwise(3 * time.Second)
	if c := cancelled.get(); len(c) != 0 {
		t.Fatalf("a cancelled wait called done: %+v", c)
	}
}
