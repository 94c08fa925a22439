package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Redlock is a Backend for exclusive locks over N independent backends
// (typically Redis backends on N independent masters), following the
// Redlock algorithm: a lock is held when a quorum of the nodes granted it to
// the same owner within its validity time. It survives the loss of up to
// N - quorum nodes.
//
// Safety: Redlock is for efficiency (avoiding duplicate work), not for
// correctness. It assumes bounded clock drift and process pauses; a holder
// paused past its validity can still act after another owner obtained the
// lock. Its fencing tokens are per node (Grant.Token is the highest token of
// the nodes that granted), so they are NOT guaranteed to increase from one
// grant to the next when the granting quorums differ (the nodes' clocks
// make them roughly increase): a resource that needs fencing must use a
// single Redis backend, not Redlock.
//
// Supported: Exclusive mode only (Shared fails with ErrInvalid), Reentrant,
// not Fair (ErrInvalid: each node's queue would elect its own head). Its
// operations are work (store.Work): each waits for every node, which it asks
// concurrently.
//
// Hold identity: a hold is named by its Grant.Token like on every backend;
// Redlock remembers, per name and owner, the token each node gave that hold
// and names the hold to each node by its own token. A node whose grant was
// never seen (it failed or answered too late to be remembered) keeps it
// until its lease ends.
type Redlock struct {
	nodes  []Backend
	quorum int
	err    error // configuration error, returned by every operation

	mu   sync.Mutex
	held map[redlockKey]*redlockHold
}

type redlockKey struct{ name, owner string }

// redlockHold is a hold's token and the tokens of the nodes that hold it
// (0: that node does not).
type redlockHold struct {
	token int64
	nodes []int64
}

// nodeTokens returns a copy of the node tokens of owner's hold token of
// name, or nil when no such hold is remembered.
func (r *Redlock) nodeTokens(name, owner string, token int64) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.held[redlockKey{name, owner}]; h != nil && h.token == token {
		return slices.Clone(h.nodes)
	}
	return nil
}

// remember records the node tokens of owner's hold token of name.
func (r *Redlock) remember(name, owner string, token int64, nodes []int64) {
	r.mu.Lock()
	r.held[redlockKey{name, owner}] = &redlockHold{token: token, nodes: nodes}
	r.mu.Unlock()
}

// forget drops owner's hold token of name.
func (r *Redlock) forget(name, owner string, token int64) {
	r.mu.Lock()
	if k := (redlockKey{name, owner}); r.held[k] != nil && r.held[k].token == token {
		delete(r.held, k)
	}
	r.mu.Unlock()
}

// lateGrant records a grant of node i that came after the attempt
// succeeded, or releases it when its hold is no longer remembered.
func (r *Redlock) lateGrant(name, owner string, token int64, i int, a Attempt) {
	r.mu.Lock()
	h := r.held[redlockKey{name, owner}]
	ok := h != nil && h.token == token
	if ok {
		h.nodes[i] = a.Token
	}
	r.mu.Unlock()
	if !ok {
		ctx, cancel := context.WithTimeout(context.Background(), max(a.TTL, time.Second))
		defer cancel()
		_, _ = r.nodes[i].Release(name, owner, Exclusive, a.Token, a.Count-1).Do(ctx)
	}
}

var _ Backend = (*Redlock)(nil)

// driftFactor and driftMin bound the clock drift subtracted from a grant's
// validity: TTL × 1% + 2ms, as in the Redlock description.
const (
	driftFactor = 0.01
	driftMin    = 2 * time.Millisecond
)

// NewRedlock returns a Redlock over backends requiring quorum of them. The
// quorum must be a majority (len(backends)/2 < quorum <= len(backends)):
// a smaller one could grant the lock to two owners at once. A bad
// configuration does not fail here: every operation then returns an error
// wrapping ErrInvalid.
func NewRedlock(backends []Backend, quorum int) Backend {
	r := &Redlock{nodes: slices.Clone(backends), quorum: quorum, held: map[redlockKey]*redlockHold{}}
	n := len(backends)
	switch {
	case n == 0:
		r.err = fmt.Errorf("%w: redlock needs at least one backend", ErrInvalid)
	case quorum <= n/2 || quorum > n:
		r.err = fmt.Errorf("%w: redlock quorum %d of %d backends must be a majority (%d..%d)",
			ErrInvalid, quorum, n, n/2+1, n)
	}
	for _, b := range backends {
		if b == nil {
			r.err = fmt.Errorf("%w: redlock with a nil backend", ErrInvalid)
		}
	}
	return r
}

// each runs f on every node concurrently and waits for all.
func (r *Redlock) each(f func(i int, b Backend)) {
	var wg sync.WaitGroup
	for i, b := range r.nodes {
		wg.Go(func() { f(i, b) })
	}
	wg.Wait()
}

func (r *Redlock) check(op, name string, mode Mode) error {
	if r.err != nil {
		return opErr(op, name, r.err)
	}
	if mode == Shared {
		return invalid(op, name, "redlock supports exclusive locks only")
	}
	return nil
}

// TryAcquire tries every node at once (each bounded by o.TTL). It succeeds
// as soon as quorum nodes granted while validity = TTL − elapsed − drift is
// still positive (a slow or dead node is not awaited then); Grant.TTL is
// that validity, Grant.Token the highest token of those nodes, Grant.Count
// the highest count, Grant.AcquiredAt the earliest (a re-entry: the
// token of the hold). A re-entry asks each node with that node's token of
// the hold. Otherwise the levels granted are given back, and the attempt is
// refused: RetryIn is the longest RetryIn of the nodes that refused.
// Errors: ErrInvalid (bad configuration, Shared, Fair), ErrUpgrade when a
// node refuses with it, ErrNotHeld when o.Token names a hold not remembered
// or too many nodes lost it for a quorum; when too many nodes fail for a
// quorum to be possible even once the lock is free, the joined node errors.
func (r *Redlock) TryAcquire(name, owner string, mode Mode, o Options) *store.Op[Attempt] {
	const op = "acquire"
	if err := r.check(op, name, mode); err != nil {
		return store.Failed[Attempt](err)
	}
	if o.Fair {
		return store.Failed[Attempt](invalid(op, name, "redlock does not support fair locks"))
	}
	if err := checkTTL(op, name, o.TTL); err != nil {
		return store.Failed[Attempt](err)
	}
	return store.Work(func(ctx context.Context) (Attempt, error) { return r.tryAcquire(ctx, name, owner, mode, o) })
}

func (r *Redlock) tryAcquire(ctx context.Context, name, owner string, mode Mode, o Options) (Attempt, error) {
	const op = "acquire"
	type result struct {
		i   int
		a   Attempt
		err error
	}
	tokens := make([]int64, len(r.nodes))
	if o.Token != 0 {
		if tokens = r.nodeTokens(name, owner, o.Token); tokens == nil {
			return Attempt{}, statusErr(op, name, stNotHeld)
		}
	}
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, o.TTL)
	results := make(chan result, len(r.nodes))
	for i, b := range r.nodes {
		go func() {
			oi := o
			oi.Token = tokens[i]
			a, err := b.TryAcquire(name, owner, mode, oi).Do(actx)
			results <- result{i, a, err}
		}()
	}
	drift := time.Duration(float64(o.TTL)*driftFactor) + driftMin
	res := make([]result, len(r.nodes))
	var (
		granted, failed, answered, lost int
		g                               Grant
		retryIn                         time.Duration
		errs                            []error
	)
	for answered < len(r.nodes) {
		x := <-results
		answered++
		res[x.i] = x
		switch {
		case errors.Is(x.err, ErrNotHeld):
			lost++ // this node lost the hold being re-entered
		case x.err != nil:
			if errors.Is(x.err, ErrUpgrade) || errors.Is(x.err, ErrInvalid) {
				// Deterministic refusals, not node trouble.
				errs = append(errs, x.err)
				continue
			}
			failed++
			errs = append(errs, fmt.Errorf("node %d: %w", x.i, x.err))
		case x.a.Granted:
			granted++
			g.Token = max(g.Token, x.a.Token)
			g.Count = max(g.Count, x.a.Count)
			if g.AcquiredAt.IsZero() || x.a.AcquiredAt.Before(g.AcquiredAt) {
				g.AcquiredAt = x.a.AcquiredAt
			}
		default:
			retryIn = max(retryIn, x.a.RetryIn)
		}
		if validity := o.TTL - time.Since(start) - drift; granted >= r.quorum && validity > 0 {
			// A quorum holds it: the stragglers need not be awaited (a late
			// grant of theirs is remembered, or released when the hold is
			// over by then).
			if o.Token != 0 {
				g.Token = o.Token
			}
			for i, x := range res {
				switch {
				case x.a.Granted:
					tokens[i] = x.a.Token
				case errors.Is(x.err, ErrNotHeld):
					tokens[i] = 0
				}
			}
			r.remember(name, owner, g.Token, tokens)
			go func(left int, token int64) {
				for range left {
					if x := <-results; x.err == nil && x.a.Granted {
						r.lateGrant(name, owner, token, x.i, x.a)
					}
				}
				cancel()
			}(len(r.nodes)-answered, g.Token)
			g.TTL = validity
			return Attempt{Granted: true, Grant: g}, nil
		}
	}
	// Undo: give back the levels granted (a grant an error hid is unknown:
	// it lapses with its lease).
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), o.TTL)
	r.each(func(i int, b Backend) {
		if x := res[i]; x.a.Granted {
			_, _ = b.Release(name, owner, mode, x.a.Token, x.a.Count-1).Do(rctx)
		}
	})
	rcancel()
	cancel()
	if lost > len(r.nodes)-r.quorum {
		return Attempt{}, statusErr(op, name, stNotHeld)
	}
	for _, err := range errs {
		if errors.Is(err, ErrUpgrade) || errors.Is(err, ErrInvalid) {
			return Attempt{}, err
		}
	}
	if len(r.nodes)-failed < r.quorum {
		return Attempt{}, fmt.Errorf("lock: %s %q: redlock: %d of %d nodes failed, quorum %d impossible: %w",
			op, name, failed, len(r.nodes), r.quorum, errors.Join(errs...))
	}
	if retryIn <= 0 {
		retryIn = max(drift, time.Millisecond)
	}
	return Attempt{RetryIn: retryIn}, nil
}

// tally classifies per-node errors of Release and Extend.
func (r *Redlock) tally(op, name string, errs []error) (done int, err error) {
	var notHeld, failed int
	var other []error
	for i, e := range errs {
		switch {
		case e == nil:
			done++
		case errors.Is(e, ErrNotHeld):
			notHeld++
		default:
			failed++
			other = append(other, fmt.Errorf("node %d: %w", i, e))
		}
	}
	switch {
	case done >= r.quorum:
		return done, nil
	case done+failed >= r.quorum:
		// A quorum may still have it: the outcome is unknown.
		return done, fmt.Errorf("lock: %s %q: redlock: %d of %d nodes failed: %w",
			op, name, failed, len(r.nodes), errors.Join(other...))
	}
	return done, statusErr(op, name, stNotHeld)
}

// Release releases on every node that holds the hold. Errors: ErrNotHeld
// when fewer than quorum nodes held it (the lock was lost or had expired,
// or the hold is not remembered); the joined node errors when failures
// leave it unknown; ErrInvalid.
func (r *Redlock) Release(name, owner string, mode Mode, token int64, keep int) *store.Op[None] {
	const op = "release"
	if err := r.check(op, name, mode); err != nil {
		return store.Failed[None](err)
	}
	if err := checkRelease(op, name, owner, mode, keep); err != nil {
		return store.Failed[None](err)
	}
	return store.Work(func(ctx context.Context) (None, error) {
		err := r.onHolders(op, name, owner, token, func(b Backend, t int64) error {
			_, err := b.Release(name, owner, mode, t, keep).Do(ctx)
			return err
		})
		if keep == 0 && (err == nil || errors.Is(err, ErrNotHeld)) {
			r.forget(name, owner, token)
		}
		return None{}, err
	})
}

// onHolders runs f on every node with its token of owner's hold named by
// token, concurrently, and tallies the answers; a node without one (token
// 0) does not hold it. Errors: ErrNotHeld (also when the hold is not
// remembered), the joined node errors.
func (r *Redlock) onHolders(op, name, owner string, token int64, f func(b Backend, token int64) error) error {
	tokens := r.nodeTokens(name, owner, token)
	if tokens == nil {
		return statusErr(op, name, stNotHeld)
	}
	errs := make([]error, len(r.nodes))
	r.each(func(i int, b Backend) {
		if tokens[i] == 0 {
			errs[i] = ErrNotHeld
			return
		}
		errs[i] = f(b, tokens[i])
	})
	_, err := r.tally(op, name, errs)
	return err
}

// Extend extends on every node and succeeds when at least quorum nodes
// still held the lock. Errors: ErrNotHeld when fewer than quorum did; the
// joined node errors when failures leave it unknown; ErrInvalid.
func (r *Redlock) Extend(name, owner string, mode Mode, token int64, ttl time.Duration) *store.Op[None] {
	const op = "extend"
	if err := r.check(op, name, mode); err != nil {
		return store.Failed[None](err)
	}
	if err := checkTTL(op, name, ttl); err != nil {
		return store.Failed[None](err)
	}
	return store.Work(func(ctx context.Context) (None, error) {
		err := r.onHolders(op, name, owner, token, func(b Backend, t int64) error {
			_, err := b.Extend(name, owner, mode, t, ttl).Do(ctx)
			return err
		})
		return None{}, err
	})
}

// Info asks every node and reports the lock as held when at least quorum
// nodes agree on its exclusive owner (TTL: the shortest of theirs; Token:
// the highest; AcquiredAt: the earliest; Waiting: the highest). Errors:
// ErrInvalid; the joined node errors when fewer than quorum nodes answered.
func (r *Redlock) Info(name string) *store.Op[Info] {
	const op = "info"
	if err := r.check(op, name, Exclusive); err != nil {
		return store.Failed[Info](err)
	}
	return store.Work(func(ctx context.Context) (Info, error) { return r.info(ctx, name) })
}

func (r *Redlock) info(ctx context.Context, name string) (Info, error) {
	const op = "info"
	infos := make([]Info, len(r.nodes))
	errs := make([]error, len(r.nodes))
	r.each(func(i int, b Backend) { infos[i], errs[i] = b.Info(name).Do(ctx) })
	answered := 0
	var nodeErrs []error
	byOwner := map[string][]int{}
	waiting := 0
	for i, e := range errs {
		if e != nil {
			nodeErrs = append(nodeErrs, fmt.Errorf("node %d: %w", i, e))
			continue
		}
		answered++
		waiting = max(waiting, infos[i].Waiting)
		if infos[i].Held && infos[i].Mode == Exclusive && len(infos[i].Owners) == 1 {
			o := infos[i].Owners[0].Owner
			byOwner[o] = append(byOwner[o], i)
		}
	}
	if answered < r.quorum {
		return Info{}, fmt.Errorf("lock: %s %q: redlock: only %d of %d nodes answered: %w",
			op, name, answered, len(r.nodes), errors.Join(nodeErrs...))
	}
	for _, idx := range byOwner {
		if len(idx) < r.quorum {
			continue
		}
		out := Info{Held: true, Mode: Exclusive, Waiting: waiting}
		for _, i := range idx {
			in := infos[i]
			if out.Owners == nil || in.Owners[0].Count > out.Owners[0].Count {
				out.Owners = []Holder{in.Owners[0]}
			}
			if out.TTL == 0 || in.TTL < out.TTL {
				out.TTL = in.TTL
			}
			out.Token = max(out.Token, in.Token)
			if out.AcquiredAt.IsZero() || in.AcquiredAt.Before(out.AcquiredAt) {
				out.AcquiredAt = in.AcquiredAt
			}
		}
		return out, nil
	}
	return Info{Waiting: waiting}, nil
}

// LeaveQueue removes owner's writer intents on every node (Redlock has no
// fair queue). Errors: ErrInvalid (bad configuration); node failures are
// ignored (an intent left behind lapses by itself).
func (r *Redlock) LeaveQueue(name, owner string) *store.Op[None] {
	if err := r.check("leave queue", name, Exclusive); err != nil {
		return store.Failed[None](err)
	}
	return store.Work(func(ctx context.Context) (None, error) {
		r.each(func(_ int, b Backend) { _, _ = b.LeaveQueue(name, owner).Do(ctx) })
		return None{}, nil
	})
}

// Watch watches every node; fn may be called once per node for one
// release. ready reports success once one node's watch is active (the
// others' failures only cost wake-ups), or the joined node errors when every
// node failed; ErrInvalid at once for a bad configuration. cancel stops
// them all.
func (r *Redlock) Watch(name string, fn func(), ready func(error)) func() {
	const op = "watch"
	if err := r.check(op, name, Exclusive); err != nil {
		ready(err)
		return func() {}
	}
	var (
		mu      sync.Mutex
		settled bool
		failed  []error
	)
	cancels := make([]func(), 0, len(r.nodes))
	for i, b := range r.nodes {
		cancels = append(cancels, b.Watch(name, fn, func(err error) {
			mu.Lock()
			if settled {
				mu.Unlock()
				return
			}
			if err == nil {
				settled = true
				mu.Unlock()
				ready(nil)
				return
			}
			failed = append(failed, fmt.Errorf("node %d: %w", i, err))
			all := len(failed) == len(r.nodes)
			settled = all
			mu.Unlock()
			if all {
				ready(fmt.Errorf("lock: %s %q: redlock: %w", op, name, errors.Join(failed...)))
			}
		}))
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, c := range cancels {
				c()
			}
		})
	}
}
