package lock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

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
