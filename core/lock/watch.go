package lock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/core/pubsub"
)

// watcher shares one subscription per lock release channel among every
// Watch of the process. A subscription lingers a while after its last
// watcher leaves, so a contended lock does not pay a SUBSCRIBE (and its
// confirmation) on every acquire. Subscribing waits for the server's
// confirmation, so it runs on a goroutine of its own (one per channel,
// while it subscribes); Watch never blocks.
type watcher struct {
	bus pubsub.Bus

	mu      sync.Mutex
	chans   map[string]*channelWatch
	nextID  uint64
	linger  time.Duration
	timeout time.Duration
}

// channelWatch is the subscription of one channel and its watchers.
type channelWatch struct {
	sub     pubsub.Subscription
	fns     map[uint64]func()
	pending map[uint64]func(error) // ready callbacks waiting for the subscription
	ready   bool
	idle    *time.Timer
}

const (
	// watchLinger is how long an unwatched release channel stays subscribed.
	watchLinger = 5 * time.Second
	// watchTimeout bounds a subscription's setup.
	watchTimeout = 5 * time.Second
)

func newWatcher(bus pubsub.Bus) *watcher {
	return &watcher{bus: bus, chans: map[string]*channelWatch{}, linger: watchLinger, timeout: watchTimeout}
}

var errNoBus = errors.New("no pub/sub bus")

// add registers fn for channel (the wake-ups of lock name).
func (w *watcher) add(name, channel string, fn func(), ready func(error)) (cancel func()) {
	if w.bus == nil {
		ready(opErr("watch", name, errNoBus))
		return func() {}
	}
	w.mu.Lock()
	c := w.chans[channel]
	if c == nil {
		c = &channelWatch{fns: map[uint64]func(){}, pending: map[uint64]func(error){}}
		w.chans[channel] = c
		go w.subscribe(name, channel, c)
	}
	if c.idle != nil {
		c.idle.Stop()
		c.idle = nil
	}
	w.nextID++
	id := w.nextID
	c.fns[id] = fn
	active := c.ready
	if !active {
		c.pending[id] = ready
	}
	w.mu.Unlock()
	if active {
		ready(nil)
	}
	var once sync.Once
	return func() { once.Do(func() { w.remove(channel, c, id) }) }
}

func (w *watcher) subscribe(name, channel string, c *channelWatch) {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	sub, err := w.bus.Subscribe(ctx, channel, func(pubsub.Message) { w.fire(c) })
	cancel()
	w.mu.Lock()
	pending := c.pending
	c.pending = nil
	if err != nil {
		// Nobody may use this subscription: the next Watch starts over.
		if w.chans[channel] == c {
			delete(w.chans, channel)
		}
		for id := range pending {
			delete(c.fns, id)
		}
		w.mu.Unlock()
		for _, ready := range pending {
			ready(opErr("watch", name, err))
		}
		return
	}
	c.sub, c.ready = sub, true
	if len(c.fns) == 0 {
		w.lingerLocked(channel, c)
	}
	w.mu.Unlock()
	for _, ready := range pending {
		ready(nil)
	}
}

func (w *watcher) fire(c *channelWatch) {
	w.mu.Lock()
	fns := make([]func(), 0, len(c.fns))
	for _, fn := range c.fns {
		fns = append(fns, fn)
	}
	w.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

func (w *watcher) remove(channel string, c *channelWatch, id uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(c.fns, id)
	delete(c.pending, id)
	if len(c.fns) > 0 || c.idle != nil || !c.ready {
		return
	}
	w.lingerLocked(channel, c)
}

// lingerLocked unsubscribes c after the linger time unless a watcher comes.
func (w *watcher) lingerLocked(channel string, c *channelWatch) {
	c.idle = time.AfterFunc(w.linger, func() {
		w.mu.Lock()
		if len(c.fns) > 0 || w.chans[channel] != c {
			w.mu.Unlock()
			return
		}
		delete(w.chans, channel)
		w.mu.Unlock()
		c.sub.Unsubscribe()
	})
}

// subscriptions is the number of channels subscribed or subscribing (tests).
func (w *watcher) subscriptions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.chans)
}
