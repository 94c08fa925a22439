package scheduler

// Quiet reports whether the engine has no work of its own under way:
// nothing posted to its loop, nothing due on its heaps, no store operation
// queued or in flight. Firings it started are not counted (their runs
// belong to whoever runs them). A closed engine is quiet. The spec runner's
// virtual time moves the clock only when the engine is quiet, so a firing
// its last jump made due has been handed to its runner first.
func (e *Engine) Quiet() bool {
	// The first call's turn may be the one that took a timer's wake-up and
	// has yet to run what is due (runDue comes after the inbox); the second
	// call runs in the turn after it.
	if e.call(func() {}) != nil {
		return true
	}
	quiet := true
	_ = e.call(func() {
		e.mu.Lock()
		posted := len(e.inbox)
		e.mu.Unlock()
		h, at := e.next()
		due := h != nil && at <= e.nowNs()
		quiet = posted == 0 && !due && e.inflight == 0 && len(e.io) == 0
	})
	return quiet
}
