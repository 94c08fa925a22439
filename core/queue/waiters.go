package queue

import (
	"sync"
	"time"
)

// waiter is one PopWait: linked into a waiters list until it is granted, its
// deadline passes or it is cancelled — exactly one of the three, decided
// under the list's mutex.
type waiter[T any] struct {
	done       func(T, error)
	stopTimer  func() bool
	prev, next *waiter[T]
	linked     bool
}

// waiters is a FIFO of PopWait callers. Its mutex is the owner's (the memory
// queue's, or the Redis notifier's), so granting a waiter and taking a
// message are one step.
type waiters[T any] struct {
	mu         *sync.Mutex
	clock      Clock
	head, tail *waiter[T]
	n          int
	// expired is called, without the mutex, to decide what a waiter whose
	// deadline passed is told: ErrTimeout, or the error that kept the
	// backend from popping.
	expired func() error
}

// add queues done with a deadline of timeout and returns its cancel. The
// caller holds w.mu and, after unlocking, must try to serve the new waiter.
func (w *waiters[T]) add(timeout time.Duration, done func(T, error)) (*waiter[T], func() bool) {
	wt := &waiter[T]{done: done}
	w.link(wt)
	wt.stopTimer = w.clock.AfterFunc(timeout, func() {
		w.mu.Lock()
		ok := wt.linked
		if ok {
			w.unlink(wt)
		}
		w.mu.Unlock()
		if ok {
			var zero T
			err := ErrTimeout
			if w.expired != nil {
				err = w.expired()
			}
			wt.done(zero, err)
		}
	}).Stop
	cancel := func() bool {
		w.mu.Lock()
		ok := wt.linked
		if ok {
			w.unlink(wt)
		}
		w.mu.Unlock()
		if ok {
			wt.stopTimer()
		}
		return ok
	}
	return wt, cancel
}

func (w *waiters[T]) link(wt *waiter[T]) {
	wt.linked = true
	wt.prev = w.tail
	if w.tail != nil {
		w.tail.next = wt
	} else {
		w.head = wt
	}
	w.tail = wt
	w.n++
}

func (w *waiters[T]) unlink(wt *waiter[T]) {
	if wt.prev != nil {
		wt.prev.next = wt.next
	} else {
		w.head = wt.next
	}
	if wt.next != nil {
		wt.next.prev = wt.prev
	} else {
		w.tail = wt.prev
	}
	wt.prev, wt.next, wt.linked = nil, nil, false
	w.n--
}

// take unlinks and returns the first waiter (nil if none); the caller holds
// w.mu and calls grant after unlocking.
func (w *waiters[T]) take() *waiter[T] {
	wt := w.head
	if wt != nil {
		w.unlink(wt)
	}
	return wt
}

// len is the number of queued waiters (caller holds w.mu).
func (w *waiters[T]) len() int { return w.n }

// grant is one waiter taken with its result, to call once the mutex is
// released.
type grant[T any] struct {
	w   *waiter[T]
	v   T
	err error
}

func (g grant[T]) call() {
	g.w.stopTimer()
	g.w.done(g.v, g.err)
}

func callAll[T any](gs []grant[T]) {
	for _, g := range gs {
		g.call()
	}
}

// failAll takes every waiter with err (caller holds w.mu).
func (w *waiters[T]) failAll(err error) []grant[T] {
	var gs []grant[T]
	for wt := w.take(); wt != nil; wt = w.take() {
		gs = append(gs, grant[T]{w: wt, err: err})
	}
	return gs
}
