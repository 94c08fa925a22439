package bindings

import (
	"context"
	"sync"

	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/store"
)

// lockLoop is the runtime's loop as core/lock sees it (lock.Loop): posts go
// to the loop, Redis operations join the loop turn's pipeline, work runs on
// the runtime's workers.
//
// A blocking lock call made outside any task (host code on the main thread)
// runs while the loop itself waits in it, so nothing posted would run: for
// the length of such a call the lock session's posts go to a queue that the
// waiting call works off itself, and its Redis operations are sent at once.
type lockLoop struct {
	rt *Runtime

	mu      sync.Mutex
	pumping bool
	queue   []func()
	signal  chan struct{}
}

var _ lock.Loop = (*lockLoop)(nil)

func newLockLoop(rt *Runtime) *lockLoop { return &lockLoop{rt: rt, signal: make(chan struct{}, 1)} }

func (l *lockLoop) Post(fn func()) {
	l.mu.Lock()
	if !l.pumping {
		l.mu.Unlock()
		l.rt.Post(fn)
		return
	}
	l.queue = append(l.queue, fn)
	l.mu.Unlock()
	select {
	case l.signal <- struct{}{}:
	default:
	}
}

func (l *lockLoop) Send(p store.Pending, done func()) {
	l.mu.Lock()
	pumping := l.pumping
	l.mu.Unlock()
	if !pumping {
		l.rt.enqueueFunc(p, done)
		return
	}
	var b store.Batch
	b.Add(p)
	b.Exec(l.rt.ctx)
	l.Post(done)
}

func (l *lockLoop) Go(fn func()) { l.rt.goWork(fn) }

func (l *lockLoop) Context() context.Context { return l.rt.ctx }

// pump runs start on the loop goroutine outside any task and works off the
// session's posts until start's completion has been called. Loop only.
func (l *lockLoop) pump(start func(complete func())) {
	l.mu.Lock()
	l.pumping = true
	l.mu.Unlock()
	finished := false
	start(func() { finished = true })
	for !finished {
		l.mu.Lock()
		fns := l.queue
		l.queue = nil
		l.mu.Unlock()
		if len(fns) == 0 {
			select {
			case <-l.signal:
			case <-l.rt.done:
				finished = true
			}
			continue
		}
		for _, fn := range fns {
			fn()
		}
	}
	l.mu.Lock()
	l.pumping = false
	rest := l.queue
	l.queue = nil
	l.mu.Unlock()
	for _, fn := range rest {
		l.rt.Post(fn)
	}
}
