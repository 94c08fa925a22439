package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
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
// grant to the next when the granting quorums differ: a resource that needs
// fencing must use a single Redis backend (whose tokens are strict), not
// Redlock.
//
// Supported: Exclusive mode only (Shared fails with ErrInvalid), Reentrant,
// not Fair (ErrInvalid: each node's queue would elect its own head).
type Redlock struct {
	nodes  []Backend
	quorum int
	err    error // configuration error, returned by every operation
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
	r := &Redlock{nodes: slices.Clone(backends), quorum: quorum}
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
// when at least quorum nodes granted and validity = TTL − elapsed − drift is
// still positive; Grant.TTL is that validity, Grant.Token the highest node
// token, Grant.Count the highest node count, Grant.AcquiredAt the earliest.
// Otherwise every node that granted or failed (an error may hide a grant)
// is released, and ok is false: retryIn is the longest retryIn of the nodes
// that refused. Errors: ErrInvalid (bad configuration, Shared, Fair),
// ErrUpgrade when a node refuses with it; when too many nodes fail for a
// quorum to be possible even once the lock is free, the joined node errors.
func (r *Redlock) TryAcquire(ctx context.Context, name, owner string, mode Mode, o Options) (Grant, bool, time.Duration, error) {
	const op = "acquire"
	if err := r.check(op, name, mode); err != nil {
		return Grant{}, false, 0, err
	}
	if o.Fair {
		return Grant{}, false, 0, invalid(op, name, "redlock does not support fair locks")
	}
	if err := checkTTL(op, name, o.TTL); err != nil {
		return Grant{}, false, 0, err
	}
	type result struct {
		g       Grant
		ok      bool
		retryIn time.Duration
		err     error
	}
	res := make([]result, len(r.nodes))
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, o.TTL)
	r.each(func(i int, b Backend) {
		g, ok, retryIn, err := b.TryAcquire(actx, name, owner, mode, o)
		res[i] = result{g, ok, retryIn, err}
	})
	cancel()
	elapsed := time.Since(start)
	drift := time.Duration(float64(o.TTL)*driftFactor) + driftMin
	validity := o.TTL - elapsed - drift

	var (
		granted, failed int
		g               Grant
		retryIn         time.Duration
		errs            []error
	)
	for i, x := range res {
		switch {
		case x.err != nil:
			if errors.Is(x.err, ErrUpgrade) || errors.Is(x.err, ErrInvalid) {
				// Deterministic refusals, not node trouble.
				errs = append(errs, x.err)
				continue
			}
			failed++
			errs = append(errs, fmt.Errorf("node %d: %w", i, x.err))
		case x.ok:
			granted++
			g.Token = max(g.Token, x.g.Token)
			g.Count = max(g.Count, x.g.Count)
			if g.AcquiredAt.IsZero() || x.g.AcquiredAt.Before(g.AcquiredAt) {
				g.AcquiredAt = x.g.AcquiredAt
			}
		default:
			retryIn = max(retryIn, x.retryIn)
		}
	}
	if granted >= r.quorum && validity > 0 {
		g.TTL = validity
		return g, true, 0, nil
	}
	// Undo: release where we were granted or cannot tell.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), o.TTL)
	r.each(func(i int, b Backend) {
		if res[i].ok || (res[i].err != nil && !errors.Is(res[i].err, ErrInvalid) && !errors.Is(res[i].err, ErrUpgrade)) {
			b.Release(rctx, name, owner, mode)
		}
	})
	rcancel()
	for _, err := range errs {
		if errors.Is(err, ErrUpgrade) || errors.Is(err, ErrInvalid) {
			return Grant{}, false, 0, err
		}
	}
	if len(r.nodes)-failed < r.quorum {
		return Grant{}, false, 0, fmt.Errorf("lock: %s %q: redlock: %d of %d nodes failed, quorum %d impossible: %w",
			op, name, failed, len(r.nodes), r.quorum, errors.Join(errs...))
	}
	if retryIn <= 0 {
		retryIn = max(drift, time.Millisecond)
	}
	return Grant{}, false, retryIn, nil
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

// Release releases on every node. It returns the highest remaining count
// among the nodes that released. Errors: ErrNotHeld when fewer than quorum
// nodes held it (the lock was lost or had expired); the joined node errors
// when failures leave it unknown; ErrInvalid.
func (r *Redlock) Release(ctx context.Context, name, owner string, mode Mode) (int, error) {
	const op = "release"
	if err := r.check(op, name, mode); err != nil {
		return 0, err
	}
	errs := make([]error, len(r.nodes))
	rem := make([]int, len(r.nodes))
	r.each(func(i int, b Backend) { rem[i], errs[i] = b.Release(ctx, name, owner, mode) })
	if _, err := r.tally(op, name, errs); err != nil {
		return 0, err
	}
	remaining := 0
	for i, e := range errs {
		if e == nil {
			remaining = max(remaining, rem[i])
		}
	}
	return remaining, nil
}

// Extend extends on every node and succeeds when at least quorum nodes
// still held the lock. Errors: ErrNotHeld when fewer than quorum did; the
// joined node errors when failures leave it unknown; ErrInvalid.
func (r *Redlock) Extend(ctx context.Context, name, owner string, mode Mode, ttl time.Duration) error {
	const op = "extend"
	if err := r.check(op, name, mode); err != nil {
		return err
	}
	if err := checkTTL(op, name, ttl); err != nil {
		return err
	}
	errs := make([]error, len(r.nodes))
	r.each(func(i int, b Backend) { errs[i] = b.Extend(ctx, name, owner, mode, ttl) })
	_, err := r.tally(op, name, errs)
	return err
}

// Info asks every node and reports the lock as held when at least quorum
// nodes agree on its exclusive owner (TTL: the shortest of theirs; Token:
// the highest; AcquiredAt: the earliest; Waiting: the highest). Errors:
// ErrInvalid; the joined node errors when fewer than quorum nodes answered.
func (r *Redlock) Info(ctx context.Context, name string) (Info, bool, error) {
	const op = "info"
	if err := r.check(op, name, Exclusive); err != nil {
		return Info{}, false, err
	}
	infos := make([]Info, len(r.nodes))
	found := make([]bool, len(r.nodes))
	errs := make([]error, len(r.nodes))
	r.each(func(i int, b Backend) { infos[i], found[i], errs[i] = b.Info(ctx, name) })
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
		if found[i] && infos[i].Mode == Exclusive && len(infos[i].Owners) == 1 {
			o := infos[i].Owners[0].Owner
			byOwner[o] = append(byOwner[o], i)
		}
	}
	if answered < r.quorum {
		return Info{}, false, fmt.Errorf("lock: %s %q: redlock: only %d of %d nodes answered: %w",
			op, name, answered, len(r.nodes), errors.Join(nodeErrs...))
	}
	for _, idx := range byOwner {
		if len(idx) < r.quorum {
			continue
		}
		out := Info{Mode: Exclusive, Waiting: waiting}
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
		return out, true, nil
	}
	return Info{Waiting: waiting}, false, nil
}

// LeaveQueue does nothing: Redlock has no fair queue. Errors: ErrInvalid
// (bad configuration).
func (r *Redlock) LeaveQueue(ctx context.Context, name, owner string) error {
	return r.check("leave queue", name, Exclusive)
}

// Watch watches every node; fn may be called once per node for one
// release. It succeeds when at least one node's watch was set up (the
// others' failures only cost wake-ups); cancel stops them all. Errors:
// ErrInvalid; the joined node errors when every node failed.
func (r *Redlock) Watch(ctx context.Context, name string, fn func()) (func(), error) {
	const op = "watch"
	if err := r.check(op, name, Exclusive); err != nil {
		return nil, err
	}
	cancels := make([]func(), len(r.nodes))
	errs := make([]error, len(r.nodes))
	r.each(func(i int, b Backend) { cancels[i], errs[i] = b.Watch(ctx, name, fn) })
	var ok []func()
	for _, c := range cancels {
		if c != nil {
			ok = append(ok, c)
		}
	}
	if len(ok) == 0 {
		return nil, fmt.Errorf("lock: %s %q: redlock: %w", op, name, errors.Join(errs...))
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, c := range ok {
				c()
			}
		})
	}, nil
}
