package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Set holds a process's limiters by name, on one backend, and runs their
// background work on one goroutine (Start/Stop): the token buckets'
// reports to Redis and the cleanup of idle keys. Safe for concurrent use.
type Set struct {
	cfg    Config
	c      redis.UniversalClient // nil: memory backend
	keys   store.Keys
	log    *slog.Logger
	pid    string
	now    func() time.Time
	real   bool      // now is time.Now: read the monotonic clock only
	base   time.Time // clock origin
	baseNs int64     // base as Unix ns
	margin time.Duration
	minGap int64 // clock ns between a key's reports, at least

	mu       sync.Mutex
	limiters map[string]Limiter
	buckets  []*TokenBucket
	windows  []*SlidingWindow

	wakeCh  chan struct{}
	calls   chan func() // run on the loop (SyncNow)
	stopCh  chan struct{}
	done    chan struct{}
	started atomic.Bool
	stopped atomic.Bool
	runOnce sync.Once
	endOnce sync.Once

	hbFailing           atomic.Bool
	procs               atomic.Int64 // processes running token buckets, at the last heartbeat (>= 1)
	syncs, syncFailures atomic.Uint64
}

// NewMemory returns a Set whose limiters are exact in-process: token
// buckets with the whole rate, sliding windows on the Set's clock. Start
// it to have idle keys cleaned up.
func NewMemory(cfg Config) *Set { return newSet(nil, "", cfg) }

// NewRedis returns a Set whose limiters share their limits, through c,
// with every process using the same prefix (global.redis.prefix) and
// limiter names. Nothing is sent before Start; until then (and until a
// key's first report) token buckets decide on a provisional share.
func NewRedis(c redis.UniversalClient, prefix string, cfg Config) *Set {
	return newSet(c, prefix, cfg)
}

func newSet(c redis.UniversalClient, prefix string, cfg Config) *Set {
	if cfg.Algorithm == "" {
		cfg.Algorithm = AlgorithmTokenBucket
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = time.Second
	}
	if cfg.CleanupInterval <= 0 {
		cfg.CleanupInterval = time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	real := cfg.Now == nil
	if real {
		cfg.Now = time.Now
	}
	if cfg.AfterFunc == nil {
		cfg.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	if cfg.ProcessID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.ProcessID = hex.EncodeToString(b[:])
	}
	base := cfg.Now()
	s := &Set{
		cfg: cfg, c: c, keys: store.Keys{Prefix: prefix},
		log: cfg.Logger.With("component", "ratelimit"), pid: cfg.ProcessID,
		now: cfg.Now, real: real, base: base, baseNs: base.UnixNano(),
		margin:   leaseMargin(cfg.SyncInterval),
		minGap:   int64(cfg.SyncInterval / 4),
		limiters: make(map[string]Limiter),
		wakeCh:   make(chan struct{}, 1),
		calls:    make(chan func()),
		stopCh:   make(chan struct{}),
		done:     make(chan struct{}),
	}
	s.procs.Store(1)
	return s
}

// leaseMargin is how long past one interval a lease lasts: the slack a
// late report has before the others take its share. Half an interval keeps
// a killed process's share out of use for at most 1.5 intervals.
func leaseMargin(interval time.Duration) time.Duration { return interval / 2 }

// clock returns the Set's clock in ns since its origin (monotonic when Now
// is time.Now).
func (s *Set) clock() int64 {
	if s.real {
		return int64(time.Since(s.base)) // monotonic only: about half of time.Now
	}
	return int64(s.now().Sub(s.base))
}

// day returns the UTC day number of clock time t.
func (s *Set) day(t int64) int64 {
	u := s.baseNs + t
	d := u / dayNanos
	if u < 0 && u%dayNanos != 0 {
		d--
	}
	return d
}

func (s *Set) afterFunc(d time.Duration, f func()) func() bool { return s.cfg.AfterFunc(d, f) }

// ProcessID returns the id this process reports under.
func (s *Set) ProcessID() string { return s.pid }

// Limiter returns the limiter called name, creating it with o: a
// *TokenBucket or a *SlidingWindow by o's algorithm. Asking again for a
// name with the same options returns the same limiter (every Lua state of
// a process shares it). Errors: ErrInvalid (bad name or option, naming it
// and its value), ErrConflict (the name exists with other options).
func (s *Set) Limiter(name string, o Options) (Limiter, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	o, err := o.resolve(name, s.cfg.Algorithm)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.limiters[name]; ok {
		if l.Options() != o {
			return nil, fmt.Errorf("%w: rate_limiter %q: exists with %s, asked for %s", ErrConflict, name, describe(l.Options()), describe(o))
		}
		return l, nil
	}
	var l Limiter
	switch o.Algorithm {
	case AlgorithmTokenBucket:
		tb := newTokenBucket(s, name, o)
		s.buckets = append(s.buckets, tb)
		l = tb
		if tb.global {
			defer s.wake() // register with the others now
		}
	case AlgorithmSlidingWindow:
		w := newSlidingWindow(s, name, o)
		s.windows = append(s.windows, w)
		l = w
	}
	s.limiters[name] = l
	return l, nil
}

// TokenBucket is Limiter for a token bucket: o.Algorithm "" means
// TokenBucket here. Errors as Limiter's; a sliding-window o is ErrInvalid.
func (s *Set) TokenBucket(name string, o Options) (*TokenBucket, error) {
	if o.Algorithm == "" && !o.Sliding {
		o.Algorithm = AlgorithmTokenBucket
	}
	l, err := s.Limiter(name, o)
	if err != nil {
		return nil, err
	}
	tb, ok := l.(*TokenBucket)
	if !ok {
		return nil, fmt.Errorf("%w: rate_limiter %q: the options describe a %s", ErrInvalid, name, l.Options().Algorithm)
	}
	return tb, nil
}

// SlidingWindow is Limiter for a sliding window: o.Algorithm "" means
// SlidingWindow here. Errors as Limiter's; a token-bucket o is ErrInvalid.
func (s *Set) SlidingWindow(name string, o Options) (*SlidingWindow, error) {
	if o.Algorithm == "" {
		o.Algorithm = AlgorithmSlidingWindow
	}
	l, err := s.Limiter(name, o)
	if err != nil {
		return nil, err
	}
	w, ok := l.(*SlidingWindow)
	if !ok {
		return nil, fmt.Errorf("%w: rate_limiter %q: the options describe a %s", ErrInvalid, name, l.Options().Algorithm)
	}
	return w, nil
}

func describe(o Options) string {
	if o.Algorithm == AlgorithmSlidingWindow {
		return fmt.Sprintf("window=%v max_requests=%d", o.Window, o.MaxRequests)
	}
	return fmt.Sprintf("rate=%v burst=%v", o.Rate, o.Burst)
}

// Get returns the limiter called name, if there is one.
func (s *Set) Get(name string) (Limiter, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.limiters[name]
	return l, ok
}

func (s *Set) snapshot() ([]*TokenBucket, []*SlidingWindow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*TokenBucket(nil), s.buckets...), append([]*SlidingWindow(nil), s.windows...)
}

// Stats returns the sums of the limiters' counters.
func (s *Set) Stats() Stats {
	bs, ws := s.snapshot()
	st := Stats{Limiters: len(bs) + len(ws), Syncs: s.syncs.Load(), SyncFailures: s.syncFailures.Load()}
	add := func(l LimiterStats) {
		st.ActiveKeys += l.ActiveKeys
		st.Allowed += l.Allowed
		st.Rejected += l.Rejected
		st.Unavailable += l.Unavailable
		st.Degraded += l.Degraded
		st.RejectedToday += l.RejectedToday
	}
	for _, b := range bs {
		add(b.Stats())
	}
	for _, w := range ws {
		add(w.Stats())
	}
	return st
}

// Start starts the Set's goroutine: on Redis it registers the limiters and
// reports every SyncInterval (and sooner for new keys, and when a report
// says a share is about to be handed over); on every backend it drops
// keys idle for CleanupInterval. It is idempotent.
func (s *Set) Start() {
	s.runOnce.Do(func() {
		s.started.Store(true)
		go s.run()
	})
}

// Stop stops the goroutine. On Redis it first reports every key as left
// (its lease ends and its unspent tokens go back to the pool, so the other
// processes take its share at their next report), waiting at most about a
// second. Limiters keep deciding locally afterwards, as if Redis were
// unreachable. It is idempotent; after Stop, Start does nothing.
func (s *Set) Stop() {
	s.endOnce.Do(func() {
		s.stopped.Store(true)
		s.runOnce.Do(func() { close(s.done) }) // never started
		close(s.stopCh)
	})
	<-s.done
}

// SyncNow runs a full report round at once (all keys of every token bucket
// on Redis) and returns its first error. Tests and tools use it to know
// the shares are in place; the loop does the same every SyncInterval. It
// waits for the Set's goroutine; errors: ErrStopped (not started, or
// stopped), ctx's error, the round's error (what failed, on which
// limiter).
func (s *Set) SyncNow(ctx context.Context) error {
	var err error
	if e := s.onLoop(ctx, func() { err = s.round(roundFull) }); e != nil {
		return e
	}
	return err
}

// onLoop runs f on the Set's goroutine and waits until it returned.
func (s *Set) onLoop(ctx context.Context, f func()) error {
	if !s.started.Load() || s.stopped.Load() {
		return ErrStopped
	}
	ran := make(chan struct{})
	select {
	case s.calls <- func() { f(); close(ran) }:
	case <-s.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ran:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wake tells the loop there are keys to report.
func (s *Set) wake() {
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

// run is the Set's goroutine. It alone reports to Redis and drops keys;
// Allow calls post to it through wake.
func (s *Set) run() {
	defer close(s.done)
	var tick <-chan time.Time
	if s.c != nil {
		t := time.NewTicker(s.cfg.SyncInterval)
		defer t.Stop()
		tick = t.C
		s.round(roundFull)
	}
	clean := time.NewTicker(s.cfg.CleanupInterval)
	defer clean.Stop()
	hint := time.NewTimer(time.Hour)
	defer hint.Stop()
	for {
		select {
		case <-s.stopCh:
			if s.c != nil {
				s.farewell()
			}
			return
		case <-tick:
			s.round(roundFull)
		case f := <-s.calls:
			f()
		case <-s.wakeCh:
			s.round(roundPending)
		case <-hint.C:
			s.round(roundHinted)
		case <-clean.C:
			s.cleanup()
		}
		if next, ok := s.nextHint(); ok {
			hint.Reset(max(time.Duration(next-s.clock()), time.Millisecond))
		} else {
			hint.Reset(time.Hour)
		}
	}
}

// cleanup drops the local state of keys idle for CleanupInterval. On
// Redis a dropped token-bucket key is reported as left at the next round.
// On memory a bucket is dropped only once full again, so a key that comes
// back starts exactly where it would have been.
func (s *Set) cleanup() {
	now := s.clock()
	idle := int64(s.cfg.CleanupInterval)
	bs, ws := s.snapshot()
	for _, l := range bs {
		l.cleanup(now, idle)
	}
	for _, w := range ws {
		w.cleanup(now)
	}
}

func (l *TokenBucket) cleanup(now, idle int64) {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for key, k := range sh.m {
			if now-k.lastUse < idle {
				continue
			}
			k.refill(now, l.global)
			if !l.global {
				if k.level >= k.cap {
					delete(sh.m, key)
				}
				continue
			}
			l.leaves = append(l.leaves, k.report(key, now, true))
			delete(sh.m, key)
			delete(l.hinted, key)
		}
		sh.mu.Unlock()
	}
}
