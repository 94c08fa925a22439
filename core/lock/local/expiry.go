package local

import "time"

// NextExpiry returns the earliest ExpiresAt among all current holds, and
// false if no hold has a ttl. The time may already be past (the hold is due
// but nothing touched it yet); the host should then call Expire at once.
// It never fails.
func (m *Manager) NextExpiry() (time.Time, bool) {
	var next time.Time
	found := false
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		if len(s.heap) > 0 {
			if t := s.heap[0].minExp; !found || t.Before(next) {
				next, found = t, true
			}
		}
		s.mu.Unlock()
	}
	return next, found
}

// Expire drops every hold whose ExpiresAt is at or before now (the
// Manager's clock), hands each freed lock on to its waiters (calling their
// grant callbacks on this goroutine, without any manager lock held) and
// returns how many holds expired. Hosts that own their own timer call it at
// NextExpiry; StartExpiry does that for them. It never fails.
func (m *Manager) Expire() int {
	n := m.expire()
	m.rearm()
	return n
}

func (m *Manager) expire() int {
	now := m.now()
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		if len(s.heap) == 0 || now.Before(s.heap[0].minExp) {
			s.mu.Unlock()
			continue
		}
		b := batch{clock: m.now, now: now, have: true}
		for len(s.heap) > 0 {
			e := s.heap[0]
			if now.Before(e.minExp) {
				break
			}
			// Every hold granted by dispatch expires after now (ttl > 0), so
			// e leaves the top (or the heap) and the loop makes progress.
			n += e.expireDue(now)
			s.dispatch(e, &b)
			s.finish(e)
		}
		s.mu.Unlock()
		b.run()
	}
	return n
}

// StartExpiry makes the Manager expire ttl holds by itself, with a single
// time.AfterFunc timer that it keeps armed at NextExpiry. No timer is armed
// (so no goroutine ever runs) while no hold has a ttl; when it fires, grant
// callbacks of the waiters that get the expired locks run on the timer's
// goroutine. Calling it again has no further effect. The timer measures
// durations against the Manager's clock, so with an injected clock it only
// makes sense if that clock follows real time. It never fails.
func (m *Manager) StartExpiry() {
	m.expiryOn.Store(true)
	m.rearm()
}

// UseClock makes StartExpiry's timer a timer of afterFunc (which calls f
// once d has passed on its clock and returns the timer's Stop), for a
// clock that does not follow real time (the spec runner's virtual time);
// it should be the clock NewManager reads. A function, not
// internal/clock's interface: this package imports nothing of the module.
// Call it before StartExpiry.
func (m *Manager) UseClock(afterFunc func(d time.Duration, f func()) (stop func() bool)) {
	m.tmu.Lock()
	m.clk = afterFunc
	m.tmu.Unlock()
}

// StopExpiry stops the timer started by StartExpiry. A firing already under
// way may still run Expire once. Expiry on touch (TryAcquire, Acquire,
// Release, Extend, Info) and explicit Expire calls keep working. It never
// fails.
func (m *Manager) StopExpiry() {
	m.expiryOn.Store(false)
	m.tmu.Lock()
	if m.timer != nil {
		m.timer.Stop()
	}
	if m.ctimer != nil {
		m.ctimer()
	}
	m.timerAt = time.Time{}
	m.armedAt.Store(0)
	m.tmu.Unlock()
}

// rearm arms the timer for the earliest expiry if the timer runs.
func (m *Manager) rearm() {
	if !m.expiryOn.Load() {
		return
	}
	if t, ok := m.NextExpiry(); ok {
		m.noteExpiry(t)
	}
}

// noteExpiry makes sure the timer fires no later than t. It may be called
// with a shard lock held (lock order: shard.mu before tmu).
func (m *Manager) noteExpiry(t time.Time) {
	if at := m.armedAt.Load(); at != 0 && t.UnixNano() >= at {
		return // already armed early enough
	}
	m.tmu.Lock()
	defer m.tmu.Unlock()
	if !m.expiryOn.Load() || (!m.timerAt.IsZero() && !t.Before(m.timerAt)) {
		return
	}
	d := t.Sub(m.now())
	if d < 0 {
		d = 0
	}
	if m.clk != nil { // an injected clock's timers cannot be reset
		if m.ctimer != nil {
			m.ctimer()
		}
		m.ctimer = m.clk(d, m.onTimer)
	} else if m.timer == nil {
		m.timer = time.AfterFunc(d, m.onTimer)
	} else {
		m.timer.Reset(d)
	}
	m.timerAt = t
	m.armedAt.Store(max(t.UnixNano(), 1))
}

// onTimer runs on the timer's goroutine. It always re-arms for the then
// earliest expiry, which covers expiries noted while it was running.
func (m *Manager) onTimer() {
	m.tmu.Lock()
	m.timerAt = time.Time{}
	m.armedAt.Store(0)
	m.tmu.Unlock()
	if !m.expiryOn.Load() {
		return
	}
	m.Expire()
}
