package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Wait calls done once n requests of key were admitted (Allowed), or once
// the wait is over without them: the Timeout decision when the window
// cannot admit them before timeout ends, the Unavailable decision when
// Redis cannot be reached (a sliding window cannot count without it), or
// the error of a try. Each try is one AllowOp(key, n) run by try, which
// calls back with its Outcome (the Lua runtime runs it in its loop's
// pipeline); a nil try runs Allow on the timer's goroutine. Between tries
// Wait sleeps on the Set's clock (Config.AfterFunc) for the decision's
// RetryAfter (at least 1 ms); when RetryAfter is past the deadline it
// sleeps out the timeout and gives up without another try, and a negative
// RetryAfter (n can never fit) gives up at once. The deadline is measured
// on the Set's clock (Config.Now).
//
// done is called exactly once, from try's callback or a timer's goroutine
// (possibly before Wait returns), unless cancel stopped the wait first:
// cancel returns true if it did (done will not be called), false if the wait
// had already finished. It is idempotent.
func (w *SlidingWindow) Wait(key string, n int, timeout time.Duration, try func(done func(Decision, error)), done func(Decision, error)) (cancel func() bool) {
	if try == nil {
		try = func(cb func(Decision, error)) { cb(w.Allow(context.Background(), key, n)) }
	}
	ww := &windowWait{w: w, try: try, done: done, deadline: w.set.clock() + int64(max(timeout, 0))}
	ww.attempt()
	return ww.cancel
}

type windowWait struct {
	w        *SlidingWindow
	try      func(func(Decision, error))
	done     func(Decision, error)
	deadline int64 // on the Set's clock

	mu       sync.Mutex
	stop     func() bool // the pending sleep's timer
	finished bool
}

// attempt makes one try and acts on its outcome.
func (ww *windowWait) attempt() {
	ww.try(func(d Decision, err error) {
		if err != nil || d.Allowed || d.Reason == Unavailable {
			ww.finish(d, err)
			return
		}
		sleep, again := ww.next(d)
		ww.mu.Lock()
		defer ww.mu.Unlock()
		if ww.finished {
			return
		}
		ww.stop = ww.w.set.afterFunc(sleep, func() {
			if again {
				ww.attempt()
			} else {
				ww.finish(Decision{Reason: Timeout}, nil)
			}
		})
	})
}

// next is how long to sleep before the next try, or false when the wait is
// over (for want of time) once the sleep ends.
func (ww *windowWait) next(d Decision) (time.Duration, bool) {
	left := time.Duration(ww.deadline - ww.w.set.clock())
	if left <= 0 || d.RetryAfter < 0 {
		return 0, false
	}
	if d.RetryAfter > left {
		return left, false // sleep out the timeout: the window cannot open in time
	}
	return max(d.RetryAfter, time.Millisecond), true
}

func (ww *windowWait) finish(d Decision, err error) {
	ww.mu.Lock()
	if ww.finished {
		ww.mu.Unlock()
		return
	}
	ww.finished = true
	ww.mu.Unlock()
	ww.done(d, err)
}

func (ww *windowWait) cancel() bool {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	if ww.finished {
		return false
	}
	ww.finished = true
	if ww.stop != nil {
		ww.stop()
	}
	return true
}
