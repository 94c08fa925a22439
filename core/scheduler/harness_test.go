package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// offsetClock is the real clock seen through an offset (redis_test.go's
// processes with skewed clocks): testclock.Offset(clock.Real, offset) as a
// struct literal.
type offsetClock struct{ offset time.Duration }

func (o offsetClock) Now() time.Time { return time.Now().Add(o.offset) }

func (offsetClock) AfterFunc(d time.Duration, fn func()) Timer { return time.AfterFunc(d, fn) }

// settle waits until the engine has nothing left to do now: no queued
// message, no Store operation in flight, no due item. Replies from Redis
// are awaited for up to 10 s.
func settle(t testing.TB, e *Engine) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		idle := false
		err := e.call(func() {
			e.runDue()
			e.flushIO()
			e.mu.Lock()
			idle = len(e.inbox) == 0 && e.inflight == 0 && len(e.io) == 0
			e.mu.Unlock()
		})
		if errors.Is(err, ErrClosed) {
			return
		}
		if idle {
			return
		}
		if time.Now().After(deadline) {
			var state string
			_ = e.call(func() {
				e.mu.Lock()
				state = fmt.Sprintf("inbox %d, inflight %d, queued %d, heap %d", len(e.inbox), e.inflight, len(e.io), e.heap.Len())
				e.mu.Unlock()
			})
			t.Fatalf("engine did not settle within 10s: %s", state)
		}
		if e.inflightNow() {
			time.Sleep(time.Millisecond)
		}
	}
}

func (e *Engine) inflightNow() bool {
	busy := false
	_ = e.call(func() { busy = e.inflight > 0 || len(e.io) > 0 })
	return busy
}

// recorder is a RunFunc that records firings and finishes them as told.
type recorder struct {
	mu     sync.Mutex
	fires  []Firing
	dones  []func(error)
	result func(f Firing) (err error, hold bool) // nil: succeed at once
	ch     chan Firing
}

func newRecorder() *recorder { return &recorder{ch: make(chan Firing, 10000)} }

func (r *recorder) run(f Firing, done func(error)) {
	r.mu.Lock()
	r.fires = append(r.fires, f)
	res := r.result
	r.mu.Unlock()
	r.ch <- f
	var err error
	hold := false
	if res != nil {
		err, hold = res(f)
	}
	if hold {
		r.mu.Lock()
		r.dones = append(r.dones, done)
		r.mu.Unlock()
		return
	}
	done(err)
}

func (r *recorder) got() []Firing {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Firing(nil), r.fires...)
}

// release finishes every held run with err.
func (r *recorder) release(err error) {
	r.mu.Lock()
	ds := r.dones
	r.dones = nil
	r.mu.Unlock()
	for _, d := range ds {
		d(err)
	}
}

// do runs an Op and fails the test on error.
func do[T any](t testing.TB, op *store.Op[T]) T {
	t.Helper()
	v, err := op.Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustSchedule(t testing.TB, s Schedule, err error) Schedule {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// events collects lifecycle events.
type events struct {
	mu  sync.Mutex
	all []Event
}

func (ev *events) add(e Event) {
	ev.mu.Lock()
	ev.all = append(ev.all, e)
	ev.mu.Unlock()
}

func (ev *events) kinds() []EventKind {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var k []EventKind
	for _, e := range ev.all {
		k = append(k, e.Kind)
	}
	return k
}

func closeEngine(t testing.TB, e *Engine) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}
