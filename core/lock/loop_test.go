package lock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// testLoop is a Loop on a goroutine of its own, like a Lua runtime's: posted
// functions run in order, and the Redis operations sent during a turn go
// out as one batch at its end, whose completions come back as one post.
type testLoop struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	queue []func()
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}

	batch []loopItem // loop only

	sends, gos atomic.Int64 // operations sent in batches, functions run by Go
}

type loopItem struct {
	p    store.Pending
	done func()
}

func newTestLoop(t *testing.T) *testLoop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &testLoop{ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	t.Cleanup(l.close)
	return l
}

func (l *testLoop) close() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
	l.cancel()
}

func (l *testLoop) Post(fn func()) {
	l.mu.Lock()
	l.queue = append(l.queue, fn)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *testLoop) Send(p store.Pending, done func()) {
	l.sends.Add(1)
	l.batch = append(l.batch, loopItem{p, done})
}

func (l *testLoop) Go(fn func()) {
	l.gos.Add(1)
	go fn()
}

func (l *testLoop) Context() context.Context { return l.ctx }

func (l *testLoop) run() {
	defer close(l.done)
	for {
		l.mu.Lock()
		fns := l.queue
		l.queue = nil
		l.mu.Unlock()
		if len(fns) == 0 {
			select {
			case <-l.wake:
				continue
			case <-l.stop:
				return
			}
		}
		for _, fn := range fns {
			fn()
		}
		l.flush()
	}
}

func (l *testLoop) flush() {
	if len(l.batch) == 0 {
		return
	}
	items := l.batch
	l.batch = nil
	go func() {
		var b store.Batch
		for _, it := range items {
			b.Add(it.p)
		}
		b.Exec(l.ctx)
		l.Post(func() {
			for _, it := range items {
				it.done()
			}
		})
	}()
}

// do runs fn on the loop and waits for it.
func (l *testLoop) do(fn func()) {
	ch := make(chan struct{})
	l.Post(func() { fn(); close(ch) })
	<-ch
}

// wedge blocks the loop (as a task that never yields does) until the
// returned function is called.
func (l *testLoop) wedge() (unwedge func()) {
	ch := make(chan struct{})
	in := make(chan struct{})
	l.Post(func() { close(in); <-ch })
	<-in
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// fakeClock is a Clock whose time moves only with Advance; timers fire
// inside Advance, in order of their due time.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c   *fakeClock
	at  time.Time
	f   func()
	off bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.off
	t.off = true
	return was
}

// Advance moves the time by d, firing the timers that fall due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.off && !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			break
		}
		next.off = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
	c.now = end
	live := c.timers[:0]
	for _, t := range c.timers {
		if !t.off {
			live = append(live, t)
		}
	}
	c.timers = live
	c.mu.Unlock()
}

// pending is the number of armed timers.
func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.off {
			n++
		}
	}
	return n
}
