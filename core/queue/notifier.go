package queue

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/backoff"
	"github.com/shieldrt/shieldglobal/internal/clock"
)

// popResult is what one pop round trip brought back.
type popResult[T any] struct {
	items []T
	// serverNow is the server's time of the pop (ms), next the server time
	// (ms) at which more may become deliverable (a delay queue's next due
	// time, a reliable group's next retry), 0 = at once, -1 = unknown.
	serverNow, next int64
}

// notifier pops on behalf of every waiter of one queue (or broadcast group)
// in this process: one goroutine, started by the first waiter and ended
// after linger without waiters or by close. It pops as many messages as
// there are waiters, hands them out FIFO, and sleeps until a wake-up on the
// queue's channel, the next due time the pop reported, or the safety
// re-check — so neither a lost notification nor a Redis restart stalls a
// waiter for longer than the re-check.
type notifier[T any] struct {
	label   string // queue (or queue/group) name in errors
	bus     pubsub.Bus
	channel string // bus-relative notify channel
	t       timing
	recheck time.Duration
	pop     func(ctx context.Context, n int, wait bool) (popResult[T], error)
	unpop   func(ctx context.Context, items []T) error
	wg      *sync.WaitGroup

	mu      sync.Mutex
	waits   waiters[T]
	running bool
	closed  bool
	lastErr error
	popSent time.Time // when the pop in flight was sent; zero: none in flight
	stash   []T       // popped, not handed out, not put back yet
	wakeAt  time.Time // local time of the next due message a notification announced
	offset  int64     // server ms - local ms at the last pop
	kick    chan struct{}
}

func newNotifier[T any](label string, bus pubsub.Bus, channel string, t timing, recheck time.Duration, wg *sync.WaitGroup,
	pop func(ctx context.Context, n int, wait bool) (popResult[T], error), unpop func(ctx context.Context, items []T) error) *notifier[T] {
	n := &notifier[T]{label: label, bus: bus, channel: channel, t: t, recheck: recheck, pop: pop, unpop: unpop, wg: wg,
		kick: make(chan struct{}, 1)}
	n.waits = waiters[T]{mu: &n.mu, clock: clock.Real, expired: n.expiredErr}
	return n
}

// NoAnswerAfter is how long a pop may go unanswered before a wait whose
// deadline passes meanwhile ends with store.ErrNoAnswer instead of
// ErrTimeout. A healthy Redis answers in a millisecond; the margin is for
// a loaded machine, so that an empty queue is never reported as an outage.
// A shorter wait cannot tell a slow answer from none and ends with
// ErrTimeout.
const NoAnswerAfter = time.Second

// Unanswered is what a wait on queue name whose deadline passed while its
// pop had gone unanswered for waited is told: ErrTimeout under
// NoAnswerAfter, else an error wrapping store.ErrNoAnswer.
func Unanswered(name string, waited time.Duration) error {
	if waited < NoAnswerAfter {
		return ErrTimeout
	}
	return opErr("pop", name, fmt.Errorf("%w for %v", store.ErrNoAnswer, waited.Round(time.Millisecond)))
}

// expiredErr is what a waiter whose deadline passed is told: the error of
// the last pop if it failed, Unanswered's if a pop is in flight (a frozen
// or blackholed Redis: the queue may not be empty), else ErrTimeout.
func (n *notifier[T]) expiredErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lastErr != nil {
		return n.lastErr // the pop's error names the queue already
	}
	if !n.popSent.IsZero() {
		return Unanswered(n.label, time.Since(n.popSent))
	}
	return ErrTimeout
}

func (n *notifier[T]) signal() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// PopWait queues a waiter and makes sure the goroutine runs.
func (n *notifier[T]) PopWait(timeout time.Duration, done func(T, error)) func() bool {
	var zero T
	if err := checkTimeout("pop", n.label, timeout); err != nil {
		done(zero, err)
		return func() bool { return false }
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		done(zero, opErr("pop", n.label, ErrClosed))
		return func() bool { return false }
	}
	_, cancel := n.waits.add(timeout, done)
	if !n.running {
		n.running = true
		n.wg.Add(1)
		go n.run()
	}
	n.mu.Unlock()
	n.signal()
	return cancel
}

// notified handles a message on the queue's channel: "" = pop now, a
// number = a message due at that server time (ms).
func (n *notifier[T]) notified(m pubsub.Message) {
	if len(m.Payload) > 0 {
		if due, err := strconv.ParseInt(string(m.Payload), 10, 64); err == nil {
			n.mu.Lock()
			at := time.UnixMilli(due - n.offset)
			if n.wakeAt.IsZero() || at.Before(n.wakeAt) {
				n.wakeAt = at
			}
			n.mu.Unlock()
		}
	}
	n.signal()
}

func (n *notifier[T]) run() {
	defer n.wg.Done()
	var sub pubsub.Subscription
	var subTried time.Time
	defer func() {
		if sub != nil {
			sub.Unsubscribe()
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	sleep := func(d time.Duration) {
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(max(d, 0))
		select {
		case <-n.kick:
		case <-timer.C:
		}
	}
	idleSince := time.Now()
	retry := backoff.New(minBackoff, maxBackoff)
	for {
		if sub == nil && n.bus != nil && time.Since(subTried) >= n.recheck {
			subTried = time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), n.t.popTimeout)
			s, err := n.bus.Subscribe(ctx, n.channel, n.notified)
			cancel()
			if err == nil {
				sub = s
			}
		}

		n.mu.Lock()
		if n.closed {
			n.running = false
			n.mu.Unlock()
			n.giveBack()
			return
		}
		gs := n.handOutLocked()
		want := n.waits.len()
		if want == 0 {
			stashed := len(n.stash) > 0
			if !stashed && time.Since(idleSince) >= n.t.linger {
				n.running = false
				n.mu.Unlock()
				callAll(gs)
				return
			}
			n.mu.Unlock()
			callAll(gs)
			if stashed {
				n.giveBack()
				sleep(n.recheck)
			} else {
				sleep(n.t.linger)
			}
			continue
		}
		n.wakeAt = time.Time{}
		n.mu.Unlock()
		callAll(gs)
		idleSince = time.Now()

		req := min(want, n.t.maxBatch)
		n.mu.Lock()
		n.popSent = time.Now()
		n.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), n.t.popTimeout)
		res, err := n.pop(ctx, req, true)
		cancel()
		n.mu.Lock()
		n.popSent = time.Time{}
		n.mu.Unlock()
		if err != nil {
			n.mu.Lock()
			n.lastErr = err
			n.mu.Unlock()
			sleep(retry.Next())
			continue
		}
		retry.Reset()
		n.mu.Lock()
		n.lastErr = nil
		n.offset = res.serverNow - time.Now().UnixMilli()
		n.stash = append(n.stash, res.items...)
		gs = n.handOutLocked()
		left := len(n.stash) > 0
		n.mu.Unlock()
		callAll(gs)
		if left {
			n.giveBack()
		}
		if len(res.items) >= req || res.next == 0 {
			continue // there may be more right now
		}
		d := n.recheck
		if res.next > 0 {
			d = min(d, time.Duration(res.next-res.serverNow)*time.Millisecond)
		}
		n.mu.Lock()
		if !n.wakeAt.IsZero() {
			d = min(d, time.Until(n.wakeAt))
		}
		n.mu.Unlock()
		sleep(d)
	}
}

// handOutLocked gives stashed messages to waiters, FIFO (caller holds mu).
func (n *notifier[T]) handOutLocked() []grant[T] {
	var gs []grant[T]
	for len(n.stash) > 0 && n.waits.len() > 0 {
		gs = append(gs, grant[T]{w: n.waits.take(), v: n.stash[0]})
		var zero T
		n.stash[0] = zero
		n.stash = n.stash[1:]
	}
	if len(n.stash) == 0 {
		n.stash = nil
	}
	return gs
}

// giveBack puts stashed messages back in the queue; on failure they stay
// stashed for the next waiter or attempt.
func (n *notifier[T]) giveBack() {
	n.mu.Lock()
	items := n.stash
	n.stash = nil
	n.mu.Unlock()
	if len(items) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.t.popTimeout)
	err := n.unpop(ctx, items)
	cancel()
	if err != nil {
		n.mu.Lock()
		n.stash = append(items, n.stash...)
		n.mu.Unlock()
	}
}

// close fails the waiters with ErrClosed and stops the goroutine.
func (n *notifier[T]) close() {
	n.mu.Lock()
	n.closed = true
	gs := n.waits.failAll(opErr("pop", n.label, ErrClosed))
	n.mu.Unlock()
	callAll(gs)
	n.signal()
}
