package pubsub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/backoff"
)

// Timing of the Redis bus (tests shorten some of it).
const (
	// defaultReceiveTimeout is how long the delivery goroutine waits for
	// traffic before it pings the server, and then for the ping's answer
	// before it declares the connection dead.
	defaultReceiveTimeout = 5 * time.Second
	defaultMinBackoff     = 50 * time.Millisecond
	defaultMaxBackoff     = 2 * time.Second
	// defaultCleanupTimeout bounds the UNSUBSCRIBE that Unsubscribe (which
	// has no context) sends.
	defaultCleanupTimeout = 2 * time.Second
)

// kinds of subscription, indexes of Redis.topics.
const (
	kindChannel = 0
	kindPattern = 1
)

// Redis is a Bus over Redis pub/sub.
//
// The whole bus uses one *redis.PubSub connection, created on the first
// subscription, and two goroutines, started then and stopped by Close (a
// bus that never subscribes starts none): the receive goroutine reads the
// connection and never runs user code; the dispatch goroutine calls the
// handlers and Events callbacks in arrival order. So a handler may
// subscribe (the confirmation it waits for is read by the other goroutine)
// and Close never waits on a handler. Server channel names are
// prefix+channel and server patterns store.GlobEscape(prefix)+pattern, so
// buses with different prefixes never see each other.
//
// The first handler of a channel (pattern) sends SUBSCRIBE (PSUBSCRIBE),
// the last Unsubscribe sends UNSUBSCRIBE (PUNSUBSCRIBE). Every Subscribe
// then sends PING <token> on the subscription connection and waits for the
// answer: the server answers in order, so the PONG proves the SUBSCRIBE was
// processed — also when the connection was replaced in between, since a new
// connection re-subscribes everything before it carries the PING.
//
// Robustness: go-redis re-dials and re-subscribes everything on the next
// use after a connection error; the delivery goroutine keeps receiving,
// backing off from 50ms to 2s between attempts, reports Events.Down once per
// outage and Events.Up once a PONG proves every subscription is back. An
// idle connection is pinged after 5s, and one that does not answer within
// another 5s is dropped and replaced (a half-dead TCP connection cannot
// hang the bus).
//
// On Redis Cluster, PUBLISH reaches subscribers on every node, but its
// reply counts only the subscribers of the node that ran it. So that
// receivers means the same as on one server, the bus pins both its
// subscription connection and its PUBLISHes to the master that owns the
// slot of the prefix (every process using the prefix agrees on it), and
// re-pins after an outage if the slot moved. Delivery does not depend on
// the pinning, only the count does. A *redis.Ring is not supported (its
// shards are independent servers).
type Redis struct {
	client  redis.UniversalClient
	cluster *redis.ClusterClient // client, when it is a cluster
	prefix  string
	pprefix string // GlobEscape(prefix)
	ev      Events

	receiveTimeout time.Duration
	minBackoff     time.Duration
	maxBackoff     time.Duration
	cleanupTimeout time.Duration

	// sem (capacity 1) serializes the commands written on the subscription
	// connection together with the registry changes and tokens they go
	// with, and the replacement of ps.
	sem chan struct{}

	mu         sync.Mutex
	closed     bool
	ps         *redis.PubSub // written holding sem and mu
	psNode     *redis.Client // cluster: the node ps is pinned to
	started    bool
	topics     [2]map[string][]*subscriber // by kind, by server name
	waiters    []*waiter                   // by increasing token
	lastTok    uint64
	down       bool
	recoverTok uint64 // while down: the token whose PONG means Up
	cmdErr     error  // a Redis error reply seen since the last PONG
	writeErr   error  // a failed write by another goroutine
	cancel     context.CancelFunc
	done       chan struct{} // closed when the receive goroutine exits

	// The dispatch queue: calls the receive goroutine hands to the
	// dispatch goroutine.
	queue []func()
	qwake chan struct{}
}

// waiter is a Subscribe waiting for the PONG of its token.
type waiter struct {
	tok  uint64
	s    *subscriber
	done chan error // buffered; nil: confirmed
}

// NewRedis returns a bus on c (a *redis.Client, a failover client or a
// *redis.ClusterClient) whose channels and patterns live under prefix. ev's
// callbacks may be nil. prefix should not be empty (store.Keys.PubSubPrefix
// is not): Memory behaves like a prefixed bus, and only the empty channel
// would tell the difference. NewRedis does no I/O and never fails; c stays
// owned by the caller and must outlive the bus.
func NewRedis(c redis.UniversalClient, prefix string, ev Events) *Redis {
	b := &Redis{
		client:         c,
		prefix:         prefix,
		pprefix:        store.GlobEscape(prefix),
		ev:             ev,
		receiveTimeout: defaultReceiveTimeout,
		minBackoff:     defaultMinBackoff,
		maxBackoff:     defaultMaxBackoff,
		cleanupTimeout: defaultCleanupTimeout,
		sem:            make(chan struct{}, 1),
		topics:         [2]map[string][]*subscriber{{}, {}},
	}
	b.cluster, _ = c.(*redis.ClusterClient)
	return b
}

var _ Bus = (*Redis)(nil)

// Subscribe registers h for channel and returns once the server has
// confirmed the subscription. Errors (wrapped as
// `pubsub: subscribe "channel": ...`): ErrClosed, ErrNilHandler,
// ErrInHandler, ctx's error if ctx ends first (for instance while Redis is
// unreachable; nothing stays subscribed then), a cluster-topology error, or
// the server's error reply.
func (b *Redis) Subscribe(ctx context.Context, channel string, h Handler) (Subscription, error) {
	s, err := b.subscribe(ctx, kindChannel, b.prefix+channel, h)
	if err != nil {
		return nil, fmt.Errorf("pubsub: subscribe %q: %w", channel, err)
	}
	return s, nil
}

// PSubscribe registers h for the Redis glob pattern; see Subscribe. Errors
// as Subscribe, wrapped as `pubsub: psubscribe "pattern": ...`.
func (b *Redis) PSubscribe(ctx context.Context, pattern string, h Handler) (Subscription, error) {
	s, err := b.subscribe(ctx, kindPattern, b.pprefix+pattern, h)
	if err != nil {
		return nil, fmt.Errorf("pubsub: psubscribe %q: %w", pattern, err)
	}
	return s, nil
}

func (b *Redis) subscribe(ctx context.Context, kind int, key string, h Handler) (*redisSubscription, error) {
	if h == nil {
		return nil, ErrNilHandler
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.acquire(ctx); err != nil {
		return nil, err
	}
	w, ps, first, err := b.register(ctx, kind, key, h)
	if err != nil {
		b.release()
		return nil, err
	}
	// A failed write is not final: go-redis keeps the name and subscribes
	// it on the next connection, whose PONG will confirm w.
	if first {
		if err := subscribeCmd(ctx, ps, kind, key); err != nil {
			b.noteWriteErr(err)
		}
	}
	if err := ps.Ping(ctx, strconv.FormatUint(w.tok, 10)); err != nil {
		b.noteWriteErr(err)
	}
	b.release()

	sub := &redisSubscription{b: b, kind: kind, key: key, s: w.s}
	select {
	case err = <-w.done:
	case <-ctx.Done():
		b.dropWaiter(w)
		select {
		case err = <-w.done: // confirmed just before: keep it
		default:
			err = ctx.Err()
		}
	}
	if err != nil {
		// The subscriber was never activated, so h was never called.
		sub.Unsubscribe()
		return nil, err
	}
	return sub, nil
}

// register adds a pending subscriber for key and its waiter, creating the
// subscription connection and starting the delivery goroutine on first use.
// The caller holds sem.
func (b *Redis) register(ctx context.Context, kind int, key string, h Handler) (w *waiter, ps *redis.PubSub, first bool, err error) {
	b.mu.Lock()
	ps, closed := b.ps, b.closed
	b.mu.Unlock()
	if closed {
		return nil, nil, false, ErrClosed
	}
	var node *redis.Client
	if ps == nil {
		if ps, node, err = b.newPubSub(ctx); err != nil {
			return nil, nil, false, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		if b.ps == nil {
			ps.Close()
		}
		return nil, nil, false, ErrClosed
	}
	if b.ps == nil {
		b.ps, b.psNode = ps, node
	}
	subs := b.topics[kind][key]
	first = len(subs) == 0
	s := newSubscriber(h, subPending)
	b.topics[kind][key] = append(subs, s)
	b.lastTok++
	w = &waiter{tok: b.lastTok, s: s, done: make(chan error, 1)}
	b.waiters = append(b.waiters, w)
	if !b.started {
		b.started = true
		var loopCtx context.Context
		loopCtx, b.cancel = context.WithCancel(context.Background())
		b.done = make(chan struct{})
		b.qwake = make(chan struct{}, 1)
		go b.run(loopCtx)
		go b.dispatchLoop(b.qwake)
	}
	return w, ps, first, nil
}

// newPubSub makes a subscription connection (not dialled yet); on a
// cluster it is pinned to the master of the prefix's slot.
func (b *Redis) newPubSub(ctx context.Context) (*redis.PubSub, *redis.Client, error) {
	if b.cluster == nil {
		return b.client.Subscribe(ctx), nil, nil
	}
	node, err := b.cluster.MasterForKey(ctx, b.prefix)
	if err != nil {
		return nil, nil, err
	}
	return node.Subscribe(ctx), node, nil
}

func subscribeCmd(ctx context.Context, ps *redis.PubSub, kind int, key string) error {
	if kind == kindPattern {
		return ps.PSubscribe(ctx, key)
	}
	return ps.Subscribe(ctx, key)
}

func unsubscribeCmd(ctx context.Context, ps *redis.PubSub, kind int, key string) error {
	if kind == kindPattern {
		return ps.PUnsubscribe(ctx, key)
	}
	return ps.Unsubscribe(ctx, key)
}

func (b *Redis) acquire(ctx context.Context) error {
	select {
	case b.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Redis) release() { <-b.sem }

func (b *Redis) dropWaiter(w *waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.waiters, w); i >= 0 {
		b.waiters = slices.Delete(b.waiters, i, i+1)
	}
}

func (b *Redis) noteWriteErr(err error) {
	b.mu.Lock()
	if !b.closed && b.writeErr == nil {
		b.writeErr = err
	}
	b.mu.Unlock()
}

// remove takes s off the registry and, if it was key's last subscriber,
// unsubscribes key on the server.
func (b *Redis) remove(kind int, key string, s *subscriber) {
	b.sem <- struct{}{} // holders only write or dial, within bounded time
	defer b.release()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	subs := slices.DeleteFunc(b.topics[kind][key], func(x *subscriber) bool { return x == s })
	last := len(subs) == 0
	if last {
		delete(b.topics[kind], key)
	} else {
		b.topics[kind][key] = subs
	}
	ps := b.ps
	b.mu.Unlock()
	if !last || ps == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cleanupTimeout)
	defer cancel()
	// go-redis forgets key even if the write fails, so a reconnect will not
	// subscribe it again.
	if err := unsubscribeCmd(ctx, ps, kind, key); err != nil {
		b.noteWriteErr(err)
		// Wake the delivery goroutine so that it notices promptly.
		_ = ps.Ping(ctx, "wake")
	}
}

// Publish sends PUBLISH prefix+channel payload and returns the server's
// receiver count (see Redis for Cluster). Errors (wrapped as
// `pubsub: publish "channel": ...`): ErrClosed, ctx's error, a
// cluster-topology error or the Redis error.
func (b *Redis) Publish(ctx context.Context, channel string, payload []byte) (int64, error) {
	return b.PublishOp(channel, payload).Do(ctx)
}

// PublishOp is Publish as an operation: one command, which the Lua runtime
// sends with its other tasks' commands (on Cluster, a work op: it is pinned
// to the prefix's master, found through the cluster state).
func (b *Redis) PublishOp(channel string, payload []byte) *store.Op[int64] {
	if b.isClosed() {
		return store.Failed[int64](fmt.Errorf("pubsub: publish %q: %w", channel, ErrClosed))
	}
	name := b.prefix + channel
	wrap := func(n int64, err error) (int64, error) {
		if err != nil {
			return 0, fmt.Errorf("pubsub: publish %q: %w", channel, err)
		}
		return n, nil
	}
	if b.cluster != nil {
		return store.Work(func(ctx context.Context) (int64, error) {
			node, err := b.cluster.MasterForKey(ctx, b.prefix)
			if err != nil {
				return wrap(0, err)
			}
			return wrap(node.Publish(ctx, name, payload).Result())
		})
	}
	cmd := redis.NewIntCmd(context.Background(), "publish", name, payload)
	return store.Commands(b.client, func() (int64, error) { return wrap(cmd.Result()) }, cmd)
}

// Close stops the receive goroutine and waits for it, closes the
// subscription connection (the server drops its subscriptions), fails
// pending Subscribes with ErrClosed and stops the dispatch goroutine (queued
// messages are dropped): no handler call starts after it returns. It does
// not close the Redis client. It is idempotent and returns nil.
func (b *Redis) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	waiters := b.waiters
	b.waiters = nil
	var subs []*subscriber
	for _, m := range b.topics {
		for _, ss := range m {
			subs = append(subs, ss...)
		}
	}
	b.topics = [2]map[string][]*subscriber{{}, {}}
	ps, cancel, done := b.ps, b.cancel, b.done
	b.queue = nil
	b.mu.Unlock()
	b.wakeDispatch()

	for _, w := range waiters {
		w.done <- ErrClosed
	}
	if cancel != nil {
		cancel()
	}
	if ps != nil {
		_ = ps.Close()
	}
	if done != nil {
		<-done
	}
	for _, s := range subs {
		s.stop()
	}
	return nil
}

type redisSubscription struct {
	b    *Redis
	kind int
	key  string
	s    *subscriber
}

// Unsubscribe implements Subscription.
func (u *redisSubscription) Unsubscribe() {
	if u.s.stop() {
		u.b.remove(u.kind, u.key, u.s)
	}
}

// ---- the goroutines ----

// deliver queues fn for the dispatch goroutine.
func (b *Redis) deliver(fn func()) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.queue = append(b.queue, fn)
	b.mu.Unlock()
	b.wakeDispatch()
}

func (b *Redis) wakeDispatch() {
	select {
	case b.qwake <- struct{}{}:
	default:
	}
}

// dispatchLoop is the dispatch goroutine: it runs queued calls in order
// until the bus is closed.
func (b *Redis) dispatchLoop(wake <-chan struct{}) {
	var batch []func()
	for range wake {
		for {
			b.mu.Lock()
			closed := b.closed
			batch, b.queue = b.queue, batch[:0]
			b.mu.Unlock()
			if closed {
				return
			}
			if len(batch) == 0 {
				break
			}
			for i, fn := range batch {
				if b.isClosed() {
					return
				}
				fn()
				batch[i] = nil
			}
		}
	}
}

func (b *Redis) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// run is the receive goroutine: it reads the subscription connection until
// Close cancels ctx.
func (b *Redis) run(ctx context.Context) {
	defer close(b.done)
	retry := backoff.New(b.minBackoff, b.maxBackoff)
	awaiting := false // a PING is unanswered and nothing arrived since
	for {
		b.mu.Lock()
		ps := b.ps
		b.mu.Unlock()
		msg, err := ps.ReceiveTimeout(ctx, b.receiveTimeout)
		if ctx.Err() != nil {
			return
		}
		var rerr redis.Error
		switch {
		case err == nil:
			awaiting = false
			switch m := msg.(type) {
			case *redis.Message:
				b.dispatch(m)
			case *redis.Pong:
				if b.pong(m.Payload) {
					retry.Reset()
				}
			}
		case errors.As(err, &rerr):
			// The server refused a command; the connection is fine.
			awaiting = false
			b.mu.Lock()
			if b.cmdErr == nil {
				b.cmdErr = err
			}
			b.mu.Unlock()
		case isReadTimeout(err) && !awaiting:
			// Idle: ask the server whether the connection still works.
			_, perr := b.ping(ctx)
			if perr == nil {
				awaiting = true
				break
			}
			if !b.outage(ctx, fmt.Errorf("ping: %w", perr), &retry, false) {
				return
			}
			awaiting = true
			continue
		default:
			// A read timeout here means a PING went unanswered: the
			// connection may be half-dead (no RST ever comes), so it is
			// dropped rather than waited on forever.
			drop := isReadTimeout(err)
			if drop {
				err = fmt.Errorf("no answer to a ping within %v", b.receiveTimeout)
			}
			if !b.outage(ctx, err, &retry, drop) {
				return
			}
			awaiting = true
			continue
		}
		b.mu.Lock()
		werr := b.writeErr
		b.writeErr = nil
		b.mu.Unlock()
		if werr != nil {
			// Another goroutine's write failed, and go-redis may have
			// replaced the connection under us: messages may be lost.
			if !b.outage(ctx, werr, &retry, false) {
				return
			}
			awaiting = true
		}
	}
}

func isReadTimeout(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "read" && oe.Timeout()
}

// dispatch calls the handlers of m's channel or pattern.
func (b *Redis) dispatch(m *redis.Message) {
	kind, key := kindChannel, m.Channel
	if m.Pattern != "" {
		kind, key = kindPattern, m.Pattern
	}
	b.mu.Lock()
	subs := slices.Clone(b.topics[kind][key])
	b.mu.Unlock()
	if len(subs) == 0 {
		return
	}
	msg := Message{Channel: strings.TrimPrefix(m.Channel, b.prefix), Payload: []byte(m.Payload)}
	if kind == kindPattern {
		msg.Pattern = strings.TrimPrefix(m.Pattern, b.pprefix)
	}
	b.deliver(func() {
		for _, s := range subs {
			callHandler(s, msg)
		}
	})
}

// pong handles the answer to PING <token>: every waiter up to the token is
// confirmed (or fails with the error reply seen since the previous PONG),
// and while down, the answer to the recovery PING means Up. It reports Up.
func (b *Redis) pong(payload string) bool {
	tok, err := strconv.ParseUint(payload, 10, 64)
	if err != nil {
		return false
	}
	b.mu.Lock()
	cmdErr := b.cmdErr
	b.cmdErr = nil
	n := 0
	for n < len(b.waiters) && b.waiters[n].tok <= tok {
		w := b.waiters[n]
		if cmdErr == nil {
			w.s.activate()
		}
		w.done <- cmdErr
		n++
	}
	b.waiters = slices.Delete(b.waiters, 0, n)
	up := b.down && b.recoverTok != 0 && tok >= b.recoverTok
	if up {
		b.down, b.recoverTok = false, 0
	}
	b.mu.Unlock()
	if up && b.ev.Up != nil {
		b.deliver(b.ev.Up)
	}
	return up
}

// ping writes PING <new token> on the subscription connection.
func (b *Redis) ping(ctx context.Context) (uint64, error) {
	if err := b.acquire(ctx); err != nil {
		return 0, err
	}
	defer b.release()
	b.mu.Lock()
	b.lastTok++
	tok, ps := b.lastTok, b.ps
	b.mu.Unlock()
	return tok, ps.Ping(ctx, strconv.FormatUint(tok, 10))
}

// outage reports Down (once per outage), replaces the connection if drop,
// and retries, backing off, until a recovery PING is written; its PONG will
// mean Up. It returns false when the bus is closing.
func (b *Redis) outage(ctx context.Context, err error, retry *backoff.Backoff, drop bool) bool {
	b.mu.Lock()
	wasDown := b.down
	b.down, b.recoverTok = true, 0
	b.mu.Unlock()
	if !wasDown && b.ev.Down != nil {
		err := fmt.Errorf("pubsub: subscription connection: %w", err)
		b.deliver(func() { b.ev.Down(err) })
	}
	if drop {
		b.replace(ctx)
	}
	for {
		t := time.NewTimer(retry.Next())
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		if b.cluster != nil {
			b.repin(ctx)
		}
		b.mu.Lock()
		b.writeErr = nil // this recovery covers earlier failures
		b.mu.Unlock()
		// The PING re-dials if needed; go-redis re-subscribes everything
		// on the new connection before it.
		tok, err := b.ping(ctx)
		if err == nil {
			b.mu.Lock()
			b.recoverTok = tok
			b.mu.Unlock()
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
}

// repin re-pins the subscription connection if the prefix's slot has
// another master now (cluster only).
func (b *Redis) repin(ctx context.Context) {
	b.cluster.ReloadState(ctx) // asynchronous: a later attempt sees it
	node, err := b.cluster.MasterForKey(ctx, b.prefix)
	if err != nil {
		return
	}
	b.mu.Lock()
	same := node == b.psNode
	b.mu.Unlock()
	if !same {
		b.replace(ctx)
	}
}

// replace swaps the subscription connection for a new one that subscribes
// every registered channel and pattern.
func (b *Redis) replace(ctx context.Context) {
	if b.acquire(ctx) != nil {
		return
	}
	defer b.release()
	ps, node, err := b.newPubSub(ctx)
	if err != nil {
		return
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		_ = ps.Close()
		return
	}
	chans := slices.Collect(maps.Keys(b.topics[kindChannel]))
	pats := slices.Collect(maps.Keys(b.topics[kindPattern]))
	old := b.ps
	b.ps, b.psNode = ps, node
	b.mu.Unlock()
	_ = old.Close()
	// Errors are not final: go-redis keeps the names and subscribes them
	// when it next connects.
	if len(chans) > 0 {
		_ = ps.Subscribe(ctx, chans...)
	}
	if len(pats) > 0 {
		_ = ps.PSubscribe(ctx, pats...)
	}
}
