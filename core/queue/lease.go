package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/clock"
)

// Loop is the one goroutine a Leases lives on (a Lua runtime's loop; the
// contract every core session shares). Every method of a Leases and a Lease
// must be called on it, and every callback they take runs on it.
type Loop = store.Loop

// LeaseOptions configure NewLeases.
type LeaseOptions struct {
	// Clock times the extensions and Lease.Expired; nil means the real
	// clock.
	Clock Clock
	// Log receives the warnings: a lease lost, an extension that failed, an
	// owner that ended holding a lease. nil discards them.
	Log *slog.Logger
	// Detach sends a release nobody waits for (AbandonOwner, Close) off the
	// loop, with a deadline of its own, so that it goes out even while the
	// loop stops; run returns the release's error. nil: a goroutine per
	// release with a 5 s deadline, whose failure is logged.
	Detach func(what string, run func(ctx context.Context) error)
}

// detachTimeout bounds a release sent by the default Detach.
const detachTimeout = 5 * time.Second

// Leases are the reliable and broadcast deliveries one event loop holds
// (a Lua runtime's pops), in the manner of core/lock's Hold: each delivery
// popped for an owner (a task) becomes a Lease that the session extends
// while it is held, reports lost when its message went to another consumer,
// and releases when its owner ends without settling it.
//
// Extensions go through the loop: the session's one timer posts a tick to
// it every Options.ExtendInterval (a third of the visibility timeout), and
// the tick extends every held lease of a queue in one round trip. A wedged
// loop therefore stops extending, and its messages go to another consumer
// after their visibility timeout instead of being held forever.
//
// A Leases is not safe for concurrent use: call it on its Loop only.
type Leases struct {
	loop   Loop
	clk    Clock
	log    *slog.Logger
	detach func(what string, run func(ctx context.Context) error)

	groups  map[receiver]*leaseGroup // leases still extended, per queue or group
	owners  map[any]map[*Lease]struct{}
	timer   clock.Timer // posts the next tick; nil when none is armed
	timerAt time.Time
	closed  bool
}

// leaseGroup is the leases of one queue (or broadcast group), extended
// together.
type leaseGroup struct {
	r      receiver
	every  time.Duration
	vt     time.Duration
	leases map[*Lease]struct{}
	next   time.Time // the next extension
}

// Lease is one held delivery of a Leases. Its methods run on the session's
// loop, like the session's.
type Lease struct {
	s         *Leases
	g         *leaseGroup
	d         *Delivery
	owner     any
	end       time.Time // the visibility timeout's end by the session's clock
	lost      bool      // an extension found the message given to another consumer
	extending bool
}

// NewLeases returns the lease session of the loop lp.
func NewLeases(lp Loop, o LeaseOptions) *Leases {
	s := &Leases{loop: lp, clk: clock.OrReal(o.Clock), log: o.Log, detach: o.Detach,
		groups: map[receiver]*leaseGroup{}, owners: map[any]map[*Lease]struct{}{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.detach == nil {
		log := s.log
		s.detach = func(what string, run func(ctx context.Context) error) {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), detachTimeout)
				defer cancel()
				if err := run(ctx); err != nil && !errors.Is(err, ErrSettled) && !isNotHeld(err) {
					log.Warn("shield: queue: "+what+" failed", "error", err.Error())
				}
			}()
		}
	}
	return s
}

// Hold takes d, a delivery a reliable queue or broadcast group just popped
// for owner, into the session: it is extended from now on until it is
// settled, lost, or released by AbandonOwner (owner ended) or Close (owner
// nil: a pop outside any task). owner is any comparable value. Hold a
// delivery once. Errors: ErrInvalid (nil, or a delivery of a plain, delay
// or priority queue: those have no lease), ErrSettled; after Close, a
// delivery without owner is released at once and Hold returns ErrClosed.
func (s *Leases) Hold(d *Delivery, owner any) (*Lease, error) {
	switch {
	case d == nil:
		return nil, invalid("hold", "", "nil delivery")
	case d.r == nil:
		return nil, invalid("hold", "", "a delivery of a plain, delay or priority queue has no lease")
	case d.state.Load() != held:
		return nil, opErr("hold", d.r.queueLabel(), ErrSettled)
	}
	now := s.clk.Now()
	g := s.groups[d.r]
	if g == nil {
		o := d.r.options()
		g = &leaseGroup{r: d.r, every: o.ExtendInterval(), vt: o.VisibilityTimeout, leases: map[*Lease]struct{}{}}
		s.groups[d.r] = g
	}
	l := &Lease{s: s, g: g, d: d, owner: owner, end: now.Add(g.vt)}
	if s.closed && owner == nil {
		s.release(l)
		return nil, opErr("hold", d.r.queueLabel(), ErrClosed)
	}
	if len(g.leases) == 0 {
		g.next = now.Add(g.every)
	}
	g.leases[l] = struct{}{}
	ls := s.owners[owner]
	if ls == nil {
		ls = map[*Lease]struct{}{}
		s.owners[owner] = ls
	}
	ls[l] = struct{}{}
	s.arm()
	return l, nil
}

// AbandonOwner runs when owner ended (a task returned, raised or was
// interrupted): each of its leases not yet settled is released for
// immediate redelivery — given back, not counted as a delivery — with a
// warning naming task. A lost lease is only forgotten: its message is
// another consumer's already.
func (s *Leases) AbandonOwner(owner any, task string) {
	for l := range s.owners[owner] {
		s.drop(l)
		if l.d.Settled() || l.Lost() {
			continue
		}
		s.log.Warn("shield: queue: a task ended holding a reliable message without ack or nack; released for immediate redelivery",
			"queue", l.d.r.queueLabel(), "id", l.d.ID, "task", task)
		s.release(l)
	}
}

// Close runs when the loop's runtime closes: the leases without owner (pops
// outside any task) are released, without a warning. Owners' leases stay
// extended until their owners end (they may finish within a shutdown
// grace); call AbandonOwner for them.
func (s *Leases) Close() {
	s.closed = true
	for l := range s.owners[nil] {
		s.drop(l)
		if !l.d.Settled() && !l.Lost() {
			s.release(l)
		}
	}
}

// Active is the number of leases held and not yet settled.
func (s *Leases) Active() int {
	n := 0
	for _, ls := range s.owners {
		for l := range ls {
			if l.d.Settled() {
				s.drop(l)
				continue
			}
			n++
		}
	}
	return n
}

// release gives l's delivery back off the loop (see LeaseOptions.Detach).
func (s *Leases) release(l *Lease) {
	op := l.d.Release()
	s.detach("releasing a message of "+l.d.r.queueLabel(), func(ctx context.Context) error {
		_, err := op.Do(ctx)
		return err
	})
}

// drop forgets l.
func (s *Leases) drop(l *Lease) {
	delete(l.g.leases, l)
	if ls := s.owners[l.owner]; ls != nil {
		delete(ls, l)
		if len(ls) == 0 {
			delete(s.owners, l.owner)
		}
	}
}

// arm sets the session's one timer for the next extension due.
func (s *Leases) arm() {
	var at time.Time
	for _, g := range s.groups {
		if len(g.leases) > 0 && (at.IsZero() || g.next.Before(at)) {
			at = g.next
		}
	}
	if at.IsZero() {
		return
	}
	if s.timer != nil {
		if !s.timerAt.After(at) || !s.timer.Stop() {
			return // armed early enough, or fired: its tick re-arms
		}
	}
	s.timerAt = at
	s.timer = s.clk.AfterFunc(at.Sub(s.clk.Now()), func() { s.loop.Post(s.tick) })
}

// tick extends the groups that are due and re-arms the timer. Loop only.
func (s *Leases) tick() {
	s.timer = nil
	now := s.clk.Now()
	for r, g := range s.groups {
		if now.Before(g.next) {
			continue
		}
		g.next = now.Add(g.every)
		s.extend(g, now)
		if len(g.leases) == 0 {
			delete(s.groups, r)
		}
	}
	s.arm()
}

// extend extends g's held leases in one round trip, sent at now.
func (s *Leases) extend(g *leaseGroup, now time.Time) {
	var ls []*Lease
	for l := range g.leases {
		switch {
		case l.d.Settled():
			s.drop(l)
		case l.extending || l.d.state.Load() != held: // one in flight, or a settle
		default:
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		return
	}
	ds := make([]*Delivery, len(ls))
	for i, l := range ls {
		ds[i], l.extending = l.d, true
	}
	store.RunOn(s.loop, g.r.extendMany(ds), func(errs []error, err error) {
		failed := err
		for i, l := range ls {
			l.extending = false
			if err != nil || l.d.state.Load() != held {
				continue // failed (retried next tick), or being settled: its answer decides
			}
			switch e := errs[i]; {
			case e == nil:
				l.end = now.Add(g.vt)
			case isNotHeld(e):
				l.lost = true
				delete(g.leases, l) // no longer extended; its owner still holds the record
				s.log.Warn("shield: queue: a held reliable message was given to another consumer (its visibility timeout passed)",
					"queue", g.r.queueLabel(), "id", l.d.ID)
			default:
				failed = e
			}
		}
		if failed != nil {
			s.log.Warn("shield: queue: extending a held reliable message failed; retrying", "queue", g.r.queueLabel(), "error", failed.Error())
		}
	})
}

// Delivery is the delivery l holds: its message, id and delivery count.
func (l *Lease) Delivery() *Delivery { return l.d }

// Owner is the owner given to Hold.
func (l *Lease) Owner() any { return l.owner }

// Ack settles the message: it is done (see Receiver.Ack for the errors).
// The session stops extending l.
func (l *Lease) Ack() *store.Op[struct{}] { return l.d.Ack() }

// Nack gives the message back for a retry after delay, counted as a failed
// delivery (see Receiver.Nack). The session stops extending l.
func (l *Lease) Nack(delay time.Duration) *store.Op[NackResult] { return l.d.Nack(delay) }

// Release gives the message back — the one "give back" (see Unpopper): the
// next pop of its queue (or group) takes it before any new message, and it
// is not counted as a delivery. Errors as Receiver.Release. AbandonOwner
// and Close call it for the leases they end.
func (l *Lease) Release() *store.Op[struct{}] { return l.d.Release() }

// Settled reports whether the delivery was acknowledged, nacked or
// released (or a settle found it no longer held).
func (l *Lease) Settled() bool { return l.d.Settled() }

// Lost reports whether the message is known to be another delivery's now:
// an extension or a settle found it no longer held (its visibility timeout
// passed and another consumer took it, or it was purged). A lost lease is
// no longer extended; an Ack of it still acknowledges the message.
func (l *Lease) Lost() bool { return l.lost || l.d.lost.Load() }

// Expired reports whether the lease ran past its end by the session's
// clock (the last successful extension, or the Hold, plus the visibility
// timeout) while unsettled: the loop was wedged or Redis did not answer,
// and any consumer's next pop may take the message. It is not Lost: an
// extension that succeeds later (nobody took it meanwhile) renews it.
func (l *Lease) Expired() bool {
	return !l.d.Settled() && !l.s.clk.Now().Before(l.end)
}

// End is when the lease runs out unless extended, by the session's clock.
func (l *Lease) End() time.Time { return l.end }

// String names the lease in messages.
func (l *Lease) String() string { return fmt.Sprintf("lease(%s, %s)", l.d.r.queueLabel(), l.d.ID) }
