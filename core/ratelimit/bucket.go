package ratelimit

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

const (
	shardBits = 6
	numShards = 1 << shardBits
	shardMask = numShards - 1
	dayNanos  = int64(24 * time.Hour)
	// epsilon absorbs float rounding in token counts: 0.9999999999999999
	// tokens are a token.
	epsilon = 1e-9
)

// TokenBucket is a token-bucket limiter: one bucket of Rate tokens per
// second and Burst capacity per key. Allow, Remaining and Delay decide in
// local memory and never wait on I/O; with Redis the Set's loop keeps each
// key's local rate and capacity at this process's share of the global ones
// (see the package doc). Safe for concurrent use.
type TokenBucket struct {
	set    *Set
	name   string
	opts   Options
	global bool // shares synced through Redis
	seed   maphash.Seed
	shards [numShards]tbShard

	// Shared with the loop.
	procs   atomic.Int64 // processes sharing the limiter at its last sync; 0 before its first
	failing atomic.Bool  // the last sync round failed
	pmu     sync.Mutex
	pending []string // keys to report before the next interval (new keys, early reports)
	fresh   bool     // the limiter has not registered yet

	// Owned by the loop.
	hinted map[string]int64 // key -> when to report it again (clock ns)
	leaves []report         // reports of dropped keys, sent with the next round

	wmu   sync.Mutex
	waits map[string][]*waiter // each key's waiters in arrival order (see Wait)
}

type tbShard struct {
	mu       sync.Mutex
	m        map[string]*bucket
	allowed  uint64
	rejected uint64
	degraded uint64
	rejDay   int64 // day (Unix days, UTC) rejToday counts
	rejToday uint64
	_        [64]byte // keep shards' locks on separate cache lines
}

// bucket is one key's local token bucket. Times are Set clock ns.
type bucket struct {
	level    float64 // tokens; negative is a debt
	rate     float64 // tokens/s flowing in: the key's rate or this process's share
	cap      float64 // capacity: the burst or this process's share
	last     int64   // last refill
	lastUse  int64   // last Allow, Remaining or Delay
	leaseEnd int64   // the share is paid for until then (MaxInt64 on memory)
	reported int64   // when the last successful report was sent (or creation)

	// Since the last successful report (see scripts/share.lua).
	wanted   float64
	provUsed float64
	degUsed  float64
	overflow float64
	rejects  uint32

	provisional bool // no lease yet: the share is a guess, charged at the first report
	queued      bool // in pending, or waiting for the next full round
}

func newTokenBucket(s *Set, name string, o Options) *TokenBucket {
	l := &TokenBucket{set: s, name: name, opts: o, global: s.c != nil, seed: maphash.MakeSeed(), fresh: s.c != nil}
	for i := range l.shards {
		l.shards[i].m = make(map[string]*bucket)
	}
	l.hinted = make(map[string]int64)
	l.waits = make(map[string][]*waiter)
	return l
}

// Name returns the limiter's name.
func (l *TokenBucket) Name() string { return l.name }

// Options returns the limiter's resolved options.
func (l *TokenBucket) Options() Options { return l.opts }

func (l *TokenBucket) shard(key string) *tbShard {
	return &l.shards[maphash.String(l.seed, key)&shardMask]
}

// refill lets tokens flow in up to now. Leased tokens that find the bucket
// full are counted as overflow, returned to the global pool at the next
// report.
func (k *bucket) refill(now int64, global bool) {
	dt := now - k.last
	if dt <= 0 {
		return
	}
	k.last = now
	if k.rate == 0 {
		return
	}
	lvl := k.level + k.rate*float64(dt)/1e9
	if lvl > k.cap {
		if global && now <= k.leaseEnd {
			k.overflow += lvl - math.Max(k.level, k.cap)
		}
		lvl = math.Max(k.level, k.cap)
	}
	k.level = lvl
}

// start returns the state a key starts in: on memory a full bucket of the
// whole rate; on Redis a provisional guess of this process's share (the
// rate and burst divided by the live processes), full, until the first
// report returns the real share. Tokens spent from the guess are charged
// to the key's pool at that report, and what the pool cannot cover is
// paid back from this process's share.
func (l *TokenBucket) start(now int64) bucket {
	if !l.global {
		return bucket{level: l.opts.Burst, rate: l.opts.Rate, cap: l.opts.Burst, last: now, lastUse: now, leaseEnd: math.MaxInt64, reported: now}
	}
	n := float64(l.processes())
	return bucket{level: l.opts.Burst / n, rate: l.opts.Rate / n, cap: l.opts.Burst / n,
		last: now, lastUse: now, leaseEnd: math.MinInt64, reported: now, provisional: true}
}

// processes is how many processes the limiter's keys are shared by: its
// own count once it synced, else the count of processes running token
// buckets at all (an upper bound).
func (l *TokenBucket) processes() int64 {
	if n := l.procs.Load(); n > 0 {
		return n
	}
	if l.global {
		return l.set.procs.Load()
	}
	return 1
}

// add creates key's bucket in sh (locked) and queues its first report.
func (l *TokenBucket) add(sh *tbShard, key string, now int64) *bucket {
	k := new(bucket)
	*k = l.start(now)
	sh.m[key] = k
	if l.global {
		k.queued = true
		l.queue(key)
	}
	return k
}

// queue asks the loop to report key before the next interval.
func (l *TokenBucket) queue(key string) {
	l.pmu.Lock()
	l.pending = append(l.pending, key)
	l.pmu.Unlock()
	l.set.wake()
}

// Allow takes n tokens from key's bucket if it has them: true, or false and
// Rejected. It never waits and never calls Redis. n <= 0 is always allowed
// and takes nothing.
func (l *TokenBucket) Allow(key string, n int) (bool, Reason) {
	if n <= 0 {
		return true, ""
	}
	now := l.set.clock()
	sh := l.shard(key)
	sh.mu.Lock()
	k := sh.m[key]
	if k == nil {
		k = l.add(sh, key, now)
	}
	k.refill(now, l.global)
	k.lastUse = now
	need := float64(n)
	k.wanted += need
	if k.level >= need-epsilon {
		k.level -= need
		sh.allowed++
		if now > k.leaseEnd {
			l.unleased(sh, k, need)
		}
		sh.mu.Unlock()
		return true, ""
	}
	k.rejects++
	sh.rejected++
	sh.rejectedToday(l.set.day(now))
	if now > k.leaseEnd && (!k.provisional || l.failing.Load()) {
		sh.degraded++
	}
	early := l.global && !k.queued && now-k.reported >= l.set.minGap &&
		k.rate*float64(l.processes()) < l.opts.Rate*(1-1e-9)
	if early {
		k.queued = true
	}
	sh.mu.Unlock()
	if early {
		// Below an equal share and refusing: report the demand now rather
		// than at the next interval.
		l.queue(key)
	}
	return false, Rejected
}

// unleased records need tokens spent while the key held no valid lease:
// before its first share (provisional; charged, and repaid if the pool
// lacks them) or after its lease ended (degraded: Redis unreachable or the
// report late; charged as far as the pool goes).
func (l *TokenBucket) unleased(sh *tbShard, k *bucket, need float64) {
	if k.provisional && !l.failing.Load() {
		k.provUsed += need
		return
	}
	k.degUsed += need
	sh.degraded++
}

func (sh *tbShard) rejectedToday(day int64) {
	if day != sh.rejDay {
		sh.rejDay, sh.rejToday = day, 0
	}
	sh.rejToday++
}

// Remaining returns how many tokens key's bucket holds now (rounded down,
// at least 0): how many requests of one token Allow would grant at once.
// A key without local state reports what a new key starts with.
func (l *TokenBucket) Remaining(key string) int64 {
	now := l.set.clock()
	sh := l.shard(key)
	sh.mu.Lock()
	var lvl float64
	if k := sh.m[key]; k != nil {
		k.refill(now, l.global)
		k.lastUse = now
		lvl = k.level
	} else {
		lvl = l.start(now).level
	}
	sh.mu.Unlock()
	return int64(math.Max(0, math.Floor(lvl+epsilon)))
}

// Delay returns how long until key's bucket holds n tokens at its current
// local rate, without taking any: 0 when it holds them now. ok is false
// when the current share can never hold them (n is more than the local
// capacity, or the local rate is 0); on Redis the share may grow at the
// next sync, so a waiter should look again then. It never calls Redis.
func (l *TokenBucket) Delay(key string, n int) (d time.Duration, ok bool) {
	now := l.set.clock()
	sh := l.shard(key)
	sh.mu.Lock()
	var b bucket
	if k := sh.m[key]; k != nil {
		k.refill(now, l.global)
		k.lastUse = now
		b = *k
	} else {
		b = l.start(now)
	}
	sh.mu.Unlock()
	need := float64(n)
	switch {
	case b.level >= need-epsilon:
		return 0, true
	case need > b.cap || b.rate <= 0:
		return 0, false
	}
	secs := (need - b.level) / b.rate
	return time.Duration(math.Ceil(secs * 1e9)), true
}

// Take is Allow for a caller that would otherwise Wait: it takes n tokens
// of key now only when no earlier Wait for key is still waiting (those go
// first), so a wait's fast path does not jump the queue.
func (l *TokenBucket) Take(key string, n int) bool {
	l.wmu.Lock()
	queued := len(l.waits[key]) > 0
	l.wmu.Unlock()
	if queued {
		return false
	}
	ok, _ := l.Allow(key, n)
	return ok
}

// Wait calls done(true, "") once n tokens of key were taken, or done(false,
// Timeout) when that did not happen within timeout. The waits of a key are
// served first come, first served, as golang.org/x/time/rate reservations
// are: only the oldest tries for tokens, so a wait for n > 1 is not starved
// by later waits for 1, and later waits do not overtake it. The oldest
// sleeps locally (Config.AfterFunc timers; no goroutine waits) until Delay
// says the tokens should be there, tries Allow, and repeats; when the
// current share can never hold n it looks again every SyncInterval, since
// a sync may raise it. The others only wait for their turn or their
// deadline. It never calls Redis. done is called exactly once, from a
// timer's goroutine (possibly before Wait returns); call Take first for
// the fast path.
//
// cancel gives up: it returns true if the wait was stopped (done will not
// be called), false if it had already finished (done was or is being
// called). It is idempotent.
func (l *TokenBucket) Wait(key string, n int, timeout time.Duration, done func(ok bool, reason Reason)) (cancel func() bool) {
	w := &waiter{l: l, key: key, n: n, done: done, deadline: l.set.clock() + int64(max(timeout, 0))}
	l.wmu.Lock()
	q := l.waits[key]
	l.waits[key] = append(q, w)
	l.wmu.Unlock()
	w.mu.Lock()
	if len(q) == 0 {
		w.schedule(0) // the oldest: try at once
	} else {
		w.schedule(max(timeout, 0)) // wait for its turn (leave wakes it) or its deadline
	}
	w.mu.Unlock()
	return w.cancel
}

type waiter struct {
	l        *TokenBucket
	key      string
	n        int
	deadline int64
	done     func(bool, Reason)

	mu       sync.Mutex
	stop     func() bool
	finished bool
}

// schedule arms the timer for after d (mu held).
func (w *waiter) schedule(d time.Duration) {
	w.stop = w.l.set.afterFunc(d, w.fire)
}

// first reports whether w is the oldest waiter of its key.
func (w *waiter) first() bool {
	w.l.wmu.Lock()
	defer w.l.wmu.Unlock()
	q := w.l.waits[w.key]
	return len(q) > 0 && q[0] == w
}

func (w *waiter) fire() {
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		return
	}
	first := w.first()
	if first {
		if ok, _ := w.l.Allow(w.key, w.n); ok {
			w.finished = true
			w.mu.Unlock()
			w.leave()
			w.done(true, "")
			return
		}
	}
	left := time.Duration(w.deadline - w.l.set.clock())
	if left <= 0 {
		w.finished = true
		w.mu.Unlock()
		w.leave()
		w.done(false, Timeout)
		return
	}
	d := left // not its turn yet: leave wakes it
	if first {
		var ok bool
		if d, ok = w.l.Delay(w.key, w.n); !ok {
			d = w.l.set.cfg.SyncInterval
		}
		d = min(d, left) // a timer fires no earlier than asked; the deadline try is the last
	}
	w.schedule(max(d, time.Microsecond))
	w.mu.Unlock()
}

// leave takes w (finished) out of its key's queue and, when it was the
// oldest, lets the next one try at once. Called without w.mu.
func (w *waiter) leave() {
	l := w.l
	l.wmu.Lock()
	q := l.waits[w.key]
	var next *waiter
	for i, x := range q {
		if x == w {
			if i == 0 && len(q) > 1 {
				next = q[1]
			}
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(l.waits, w.key)
	} else {
		l.waits[w.key] = q
	}
	l.wmu.Unlock()
	if next == nil {
		return
	}
	next.mu.Lock()
	if !next.finished {
		if next.stop != nil {
			next.stop()
		}
		next.schedule(0)
	}
	next.mu.Unlock()
}

func (w *waiter) cancel() bool {
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		return false
	}
	w.finished = true
	if w.stop != nil {
		w.stop()
	}
	w.mu.Unlock()
	w.leave()
	return true
}

// Stats returns the limiter's counters.
func (l *TokenBucket) Stats() LimiterStats {
	st := LimiterStats{Name: l.name, Algorithm: AlgorithmTokenBucket, Processes: int(l.processes())}
	today := l.set.day(l.set.clock())
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		st.ActiveKeys += len(sh.m)
		st.Allowed += sh.allowed
		st.Rejected += sh.rejected
		st.Degraded += sh.degraded
		if sh.rejDay == today {
			st.RejectedToday += sh.rejToday
		}
		sh.mu.Unlock()
	}
	return st
}
