package ratelimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// The token-bucket scripts; each file's header lists its KEYS, ARGV and
// replies.
var (
	//go:embed scripts/share.lua
	shareSrc string
	//go:embed scripts/heartbeat.lua
	heartbeatSrc string

	// shareScript reports keys of a token bucket and returns the new shares.
	shareScript = store.NewScript("ratelimit/share.lua", shareSrc)
	// heartbeatScript counts the processes running token buckets.
	heartbeatScript = store.NewScript("ratelimit/heartbeat.lua", heartbeatSrc)
)

// keysPerCall bounds one script call, so a limiter with many active keys
// does not hold Redis for long: its keys go in several calls of one
// pipeline.
const keysPerCall = 128

// roundKind is what a report round covers.
type roundKind int

const (
	roundFull    roundKind = iota // every key (and every limiter's heartbeat)
	roundPending                  // new keys and early reports
	roundHinted                   // keys whose last reply asked for a report now
)

// report is what one key's report says; the same values are subtracted
// from the bucket's counters when the report succeeds, so whatever
// happened while it was in flight is reported next time.
type report struct {
	k           *bucket // nil for a leave
	key         string
	sent        int64
	elapsed     int64 // ns
	wanted      float64
	provUsed    float64
	degUsed     float64
	overflow    float64
	level       float64
	rejects     uint32
	provisional bool
	leave       bool
}

// report snapshots k (its shard locked, refilled to now).
func (k *bucket) report(key string, now int64, leave bool) report {
	r := report{k: k, key: key, sent: now, elapsed: now - k.reported, wanted: k.wanted,
		provUsed: k.provUsed, degUsed: k.degUsed, overflow: k.overflow, level: k.level,
		rejects: k.rejects, provisional: k.provisional, leave: leave}
	if leave {
		r.k = nil
	}
	return r
}

// funded is the part of the level paid for by a lease or the pool.
func (r *report) funded() float64 {
	if r.provisional {
		return 0
	}
	return r.level
}

// arg is the report as share.lua reads it; buf is scratch space.
func (r *report) arg(buf *[]byte) string {
	b := (*buf)[:0]
	f := func(x float64) { b = strconv.AppendFloat(b, x, 'g', -1, 64); b = append(b, ' ') }
	f(r.wanted)
	b = strconv.AppendInt(b, max(r.elapsed/int64(time.Millisecond), 0), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(r.rejects), 10)
	b = append(b, ' ')
	f(r.funded())
	f(r.provUsed)
	f(r.degUsed)
	f(r.overflow)
	switch {
	case r.leave:
		b = append(b, 'l')
	case r.provisional:
		b = append(b, 'n')
	default:
		b = append(b, '-')
	}
	*buf = b
	return string(b)
}

// share is one key's reply.
type share struct {
	rate, burst, delta float64
	retry              time.Duration
}

type shareReply struct {
	procs  int64
	shares []share
}

// call is one script call of a round: some reports of one limiter.
type call struct {
	l    *TokenBucket
	reps []report
	op   *store.Op[shareReply]
}

// appendCalls appends the calls that report reps, keysPerCall keys each;
// with no reps, one call that only registers the process (or says bye).
func (l *TokenBucket) appendCalls(calls []*call, reps []report, bye bool) []*call {
	if len(reps) == 0 {
		return append(calls, l.call(nil, bye))
	}
	for len(reps) > 0 {
		n := min(len(reps), keysPerCall)
		calls = append(calls, l.call(reps[:n], bye))
		reps = reps[n:]
	}
	return calls
}

func (l *TokenBucket) call(reps []report, bye bool) *call {
	s := l.set
	keys := make([]string, 0, len(reps)+1)
	keys = append(keys, s.keys.RateLimitProcs(l.name))
	args := make([]any, 0, len(reps)+6)
	byeArg := "0"
	if bye {
		byeArg = "1"
	}
	args = append(args, s.pid, l.opts.Rate, l.opts.Burst,
		s.cfg.SyncInterval.Milliseconds(), s.margin.Milliseconds(), byeArg)
	buf := make([]byte, 0, 128)
	for i := range reps {
		keys = append(keys, s.keys.RateLimitBucket(l.name, reps[i].key))
		args = append(args, reps[i].arg(&buf))
	}
	cmd := shareScript.Cmd(keys, args...)
	const what = "share.lua"
	decode := func() (shareReply, error) {
		if noReply(cmd.Cmd) {
			return shareReply{}, noReplyErr(s.c)
		}
		r := store.ReadReply(what, cmd.Cmd)
		out := shareReply{procs: r.Int(), shares: make([]share, 0, len(reps))}
		for range reps {
			sh, err := parseShare(r.Str())
			if err != nil && r.Err() == nil {
				return out, fmt.Errorf("%s: %w: %v", what, store.ErrReply, err)
			}
			out.shares = append(out.shares, sh)
		}
		return out, r.End()
	}
	return &call{l: l, reps: reps, op: store.Commands(s.c, decode, cmd)}
}

func parseShare(s string) (share, error) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return share{}, fmt.Errorf("share %q: want 4 fields", s)
	}
	var v [3]float64
	for i := range v {
		x, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return share{}, fmt.Errorf("share %q: %v", s, err)
		}
		v[i] = x
	}
	ms, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return share{}, fmt.Errorf("share %q: %v", s, err)
	}
	return share{rate: v[0], burst: v[1], delta: v[2], retry: time.Duration(ms) * time.Millisecond}, nil
}

// round reports what kind covers, for every token bucket on Redis, in one
// pipeline, and applies the replies. It returns the first error.
func (s *Set) round(kind roundKind) error {
	if s.c == nil {
		return nil
	}
	bs, _ := s.snapshot()
	now := s.clock()
	var calls []*call
	for _, l := range bs {
		reps, register := l.collect(kind, now)
		if len(reps) == 0 && !register {
			continue
		}
		calls = l.appendCalls(calls, reps, false)
	}
	if len(calls) == 0 && kind != roundFull {
		return nil
	}
	return s.exec(calls, kind == roundFull, false)
}

// heartbeat returns the op that keeps this process in the set of processes
// running token buckets and counts them.
func (s *Set) heartbeat(bye bool) *store.Op[int64] {
	byeArg := "0"
	if bye {
		byeArg = "1"
	}
	cmd := heartbeatScript.Cmd([]string{s.keys.RateLimitProcesses()}, s.pid,
		(s.cfg.SyncInterval + s.margin).Milliseconds(), byeArg)
	return store.Commands(s.c, func() (int64, error) {
		if noReply(cmd.Cmd) {
			return 0, noReplyErr(s.c)
		}
		r := store.ReadReply("heartbeat.lua", cmd.Cmd)
		n := r.Int()
		return n, r.End()
	}, cmd)
}

// exec sends calls (and the process heartbeat if beat) as one pipeline
// and applies each reply. bye: the calls are a farewell.
func (s *Set) exec(calls []*call, beat, bye bool) error {
	timeout := min(max(s.cfg.SyncInterval, time.Second), 5*time.Second)
	if bye {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var b store.Batch
	var hb *store.Op[int64]
	if beat {
		hb = s.heartbeat(bye)
		b.Add(hb)
	}
	for _, c := range calls {
		b.Add(c.op)
	}
	b.Exec(ctx)

	var first error
	if hb != nil {
		n, err := hb.Result()
		if err == nil {
			s.procs.Store(max(n, 1))
		} else {
			first = fmt.Errorf("ratelimit: heartbeat: %w", err)
		}
		if !bye && (err != nil) != s.hbFailing.Load() {
			s.hbFailing.Store(err != nil)
			if err != nil {
				s.log.Warn("rate limiter heartbeat failed: new limiters guess shares from the last count", "error", err)
			}
		}
	}
	var order []*TokenBucket
	failed := make(map[*TokenBucket]error)
	for _, c := range calls {
		if _, ok := failed[c.l]; !ok {
			order = append(order, c.l)
			failed[c.l] = nil
		}
		rep, err := c.op.Result()
		if err != nil {
			err = fmt.Errorf("ratelimit: sync %q: %w", c.l.name, err)
			if failed[c.l] == nil {
				failed[c.l] = err
			}
			if first == nil {
				first = err
			}
			continue
		}
		if !bye {
			c.l.apply(c.reps, rep)
		}
	}
	if bye {
		return first
	}
	for _, l := range order {
		l.setFailing(failed[l])
	}
	if first != nil {
		s.syncFailures.Add(1)
	} else {
		s.syncs.Add(1)
	}
	return first
}

// setFailing logs the transitions between reaching Redis and not, once
// each.
func (l *TokenBucket) setFailing(err error) {
	if err != nil {
		if !l.failing.Swap(true) {
			l.set.log.Warn("rate limiter cannot reach Redis: keeping the last shares, new keys decide on a guess",
				"limiter", l.name, "error", err)
		}
		return
	}
	if l.failing.Swap(false) {
		l.set.log.Info("rate limiter reaches Redis again: global shares restored", "limiter", l.name)
	}
}

// collect returns the reports a round of kind includes for l, and whether
// l must call even without reports (a full round heartbeats every limiter;
// a new limiter registers at once).
func (l *TokenBucket) collect(kind roundKind, now int64) ([]report, bool) {
	if !l.global {
		return nil, false
	}
	l.pmu.Lock()
	pending := l.pending
	l.pending = nil
	register := l.fresh
	l.fresh = false
	l.pmu.Unlock()

	var reps []report
	if len(l.leaves) > 0 && (kind == roundFull || !l.failing.Load()) {
		reps = append(reps, l.leaves...) // leaves first: a key may be back already
		l.leaves = l.leaves[:0]
	}
	switch kind {
	case roundFull:
		for i := range l.shards {
			sh := &l.shards[i]
			sh.mu.Lock()
			for key, k := range sh.m {
				k.refill(now, true)
				reps = append(reps, k.report(key, now, false))
			}
			sh.mu.Unlock()
		}
		return reps, true
	case roundPending:
		if l.failing.Load() {
			// Do not hammer an unreachable Redis: the keys stay queued
			// and the next full round reports them.
			return reps, register
		}
		reps = l.reportKeys(reps, pending, now)
	case roundHinted:
		due := pending
		for key, at := range l.hinted {
			if at <= now+l.set.minGap/5 {
				due = append(due, key)
				delete(l.hinted, key)
			}
		}
		reps = l.reportKeys(reps, due, now)
	}
	return reps, register
}

func (l *TokenBucket) reportKeys(reps []report, keys []string, now int64) []report {
	seen := make(map[string]bool, len(keys))
	for _, key := range keys {
		if seen[key] {
			continue
		}
		seen[key] = true
		sh := l.shard(key)
		sh.mu.Lock()
		if k := sh.m[key]; k != nil {
			k.refill(now, true)
			reps = append(reps, k.report(key, now, false))
		}
		sh.mu.Unlock()
	}
	return reps
}

// apply installs the shares of a successful call.
func (l *TokenBucket) apply(reps []report, rep shareReply) {
	s := l.set
	l.procs.Store(max(rep.procs, 1))
	now := s.clock()
	lease := int64(s.cfg.SyncInterval + s.margin)
	slack := max(s.minGap/5, int64(2*time.Millisecond))
	for i := range reps {
		r := &reps[i]
		if r.k == nil {
			continue // a leave
		}
		sh := l.shard(r.key)
		sh.mu.Lock()
		k := sh.m[r.key]
		if k != r.k { // dropped since; cannot happen while the loop owns cleanup
			sh.mu.Unlock()
			continue
		}
		sr := rep.shares[i]
		k.refill(now, true) // what flowed under the old share
		k.wanted -= r.wanted
		k.provUsed -= r.provUsed
		k.degUsed -= r.degUsed
		k.overflow -= r.overflow
		k.rejects -= r.rejects
		if r.provisional {
			// The guess's tokens were never paid for: the reply's delta
			// replaces the level reported. The provisional spends made
			// while the report was on its way came out of that level, so
			// the lease pays for them as well; left in provUsed, the next
			// report would charge them to the pool a second time (a debt
			// for tokens spent once).
			k.level -= r.level
			k.provUsed -= min(k.provUsed, max(r.level, 0))
		}
		k.level += sr.delta
		k.rate, k.cap = sr.rate, sr.burst
		if k.level > k.cap {
			k.overflow += k.level - k.cap
			k.level = k.cap
		}
		k.provisional = false
		k.queued = false
		k.leaseEnd = r.sent + lease
		k.reported = r.sent
		sh.mu.Unlock()
		if sr.retry > 0 {
			l.hinted[r.key] = r.sent + int64(sr.retry) + slack
		} else {
			delete(l.hinted, r.key)
		}
	}
}

// nextHint returns the earliest hinted report over all token buckets.
func (s *Set) nextHint() (int64, bool) {
	bs, _ := s.snapshot()
	var next int64
	found := false
	for _, l := range bs {
		for _, at := range l.hinted {
			if !found || at < next {
				next, found = at, true
			}
		}
	}
	return next, found
}

// farewell reports every key as left and takes the process out of every
// limiter's procs, so the others need not wait for the leases to end.
func (s *Set) farewell() {
	bs, _ := s.snapshot()
	now := s.clock()
	var calls []*call
	for _, l := range bs {
		if !l.global {
			continue
		}
		reps := append([]report(nil), l.leaves...)
		l.leaves = nil
		for i := range l.shards {
			sh := &l.shards[i]
			sh.mu.Lock()
			for key, k := range sh.m {
				k.refill(now, true)
				reps = append(reps, k.report(key, now, true))
				// The lease is given up: what follows is local only.
				k.leaseEnd = now
			}
			sh.mu.Unlock()
		}
		calls = l.appendCalls(calls, reps, true)
	}
	if err := s.exec(calls, true, true); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("rate limiter could not hand its shares back at stop; they end with their leases", "error", err)
	}
}
