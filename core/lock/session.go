package lock

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shieldrt/shieldglobal/core/lock/local"
	"github.com/shieldrt/shieldglobal/core/store"
)

// Session is the lock state of one event loop (one Lua runtime): its holds
// and pending acquires. It is not safe for concurrent use: call it on its
// Loop only, where all its callbacks run too.
//
// Holds are per (scope, name, mode, owner): two lock objects of the same
// name used by one owner share its hold (a re-entry through either counts,
// a release through either counts down).
type Session struct {
	svc   *Service
	loop  Loop
	holds map[holdKey]*Hold
	waits map[*waiter]struct{}
}

type holdKey struct {
	scope Scope
	mode  Mode
	name  string
	owner string
}

// NewSession returns a Session whose work runs on lp.
func (svc *Service) NewSession(lp Loop) *Session {
	return &Session{svc: svc, loop: lp, holds: map[holdKey]*Hold{}, waits: map[*waiter]struct{}{}}
}

// Spec describes a lock object.
type Spec struct {
	Name  string
	Mode  Mode
	Scope Scope
	// Spin (in-process) retries a contended acquire a few times, yielding
	// the goroutine, before it queues: a short hold by another Lua state
	// then costs no suspension.
	Spin bool
	// ReadWrite marks a side of a read-write lock. Both sides of a
	// distributed one stay on the Dist backend even when the Service has
	// Redlock (which has no shared mode): a writer on the Redlock nodes
	// and a reader on the single Redis would not exclude each other.
	ReadWrite bool
	// Given are the caller's options.
	Given Given
}

// Lock is a lock object: a name, a mode and Settings resolved once. Its
// holds belong to owners (see Acquire).
type Lock struct {
	s      *Session
	name   string
	mode   Mode
	scope  Scope
	kind   local.Kind // the label of its in-process holds (see ListHeld)
	spin   bool
	set    Settings
	be     Backend
	onLost func(*Hold)
	// last is the hold this object last took or found (a shortcut past
	// the session's map: an unreleased hold is always the map's value for
	// its key); spare is a hold of this object given back by Recycle, for
	// its next hold to reuse.
	last  *Hold
	spare *Hold
}

// NewLock makes a lock object. Errors: ErrInvalid for an empty name or
// mode, *OptionError (which matches ErrInvalid) for options the Defaults
// refuse, and an error when spec is Distributed but the Service has no
// backend.
func (s *Session) NewLock(spec Spec) (*Lock, error) {
	if spec.Name == "" {
		return nil, invalid("new", spec.Name, "a lock name must be non-empty")
	}
	if spec.Mode != Exclusive && spec.Mode != Shared {
		return nil, invalid("new", spec.Name, "unknown "+spec.Mode.String())
	}
	l := &Lock{s: s, name: spec.Name, mode: spec.Mode, scope: spec.Scope, spin: spec.Spin, kind: kindOf(spec)}
	redlock := false
	if spec.Scope == Distributed {
		l.be = s.svc.dist
		if s.svc.redlock != nil && spec.Mode == Exclusive && !spec.ReadWrite {
			l.be, redlock = s.svc.redlock, true
		}
		if l.be == nil {
			return nil, fmt.Errorf("lock: new %q: no distributed backend", spec.Name)
		}
	}
	set, err := s.svc.defaults.resolve(spec.Scope, spec.Given, redlock)
	if err != nil {
		return nil, err
	}
	l.set = set
	return l, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Mode returns the lock's mode.
func (l *Lock) Mode() Mode { return l.mode }

// Scope returns the lock's scope.
func (l *Lock) Scope() Scope { return l.scope }

// Settings returns the resolved options.
func (l *Lock) Settings() Settings { return l.set }

// SetAutoExtend changes whether later holds taken through this object run
// the watchdog, and its interval (0 keeps it). Errors (*OptionError): on
// without a ttl, an interval not shorter than the ttl.
func (l *Lock) SetAutoExtend(on bool, interval time.Duration) error {
	if interval <= 0 {
		interval = l.set.ExtendInterval
	}
	if on {
		if err := checkAutoExtend(l.set.TTL, interval); err != nil {
			return err
		}
	}
	l.set.AutoExtend, l.set.ExtendInterval = on, interval
	return nil
}

func checkAutoExtend(ttl, interval time.Duration) error {
	if ttl <= 0 {
		return optionErr("auto_extend", "auto_extend needs a lock with a ttl")
	}
	if interval >= ttl {
		return optionErr("interval", "interval (%d) must be shorter than the ttl (%d)", interval.Milliseconds(), ttl.Milliseconds())
	}
	return nil
}

// OnLost sets the function called (on the loop) when a hold taken through
// this object is found lost: by the watchdog, by a release, or when its
// lease runs out.
func (l *Lock) OnLost(fn func(*Hold)) {
	l.onLost = fn
	for _, h := range l.s.holds {
		if h.lock == l && !h.released {
			h.arm()
		}
	}
}

func (l *Lock) key(owner string) holdKey {
	return holdKey{scope: l.scope, mode: l.mode, name: l.name, owner: owner}
}

// Hold returns owner's hold of this lock (in this mode), or nil when it
// holds none. A lost hold is returned until it is released.
func (l *Lock) Hold(owner Owner) *Hold {
	return l.live(owner.String())
}

// live is owner's unreleased hold of this lock (in this mode), or nil.
func (l *Lock) live(owner string) *Hold {
	h, _ := l.lookup(owner)
	return h
}

// lookup returns owner's unreleased hold of this lock (or nil) and the
// session map's entry for it (nil when the object's last hold answered).
func (l *Lock) lookup(owner string) (live, entry *Hold) {
	if h := l.last; h != nil && !h.released && h.key.owner == owner {
		return h, nil
	}
	h := l.s.holds[l.key(owner)]
	if h != nil && !h.released {
		l.last = h
		return h, h
	}
	return nil, h
}

// Lost reports whether owner's hold of this lock is lost (see Hold.Lost),
// or its last hold ended lost and it has not acquired again since.
func (l *Lock) Lost(owner Owner) bool {
	h := l.s.holds[l.key(owner.String())]
	return h != nil && h.Lost()
}

// InfoOp returns the operation that reads the lock's state. For an
// in-process lock held in both modes by a downgrading owner, only the holds
// of this object's mode are listed.
func (l *Lock) InfoOp() *store.Op[Info] {
	if l.scope == Distributed {
		return l.be.Info(l.name)
	}
	m, clock, name, mode := l.s.svc.local, l.s.svc.clock, l.name, l.mode
	return store.Local(func() (Info, error) {
		in, ok := m.Info(name)
		if !ok || len(in.Owners) == 0 {
			return Info{}, nil
		}
		info := Info{Held: true, Mode: in.Mode, TTL: -1, Waiting: in.Waiting}
		now := clock.Now()
		for _, o := range in.Owners {
			if o.Mode != mode && len(in.Owners) > 1 {
				continue
			}
			info.Owners = append(info.Owners, Holder{Owner: o.Owner, Count: o.Count})
			if info.AcquiredAt.IsZero() || o.AcquiredAt.Before(info.AcquiredAt) {
				info.AcquiredAt = o.AcquiredAt
			}
			if !o.ExpiresAt.IsZero() {
				if left := max(o.ExpiresAt.Sub(now), 0); info.TTL < 0 || left < info.TTL {
					info.TTL = left
				}
			}
		}
		slices.SortFunc(info.Owners, func(a, b Holder) int { return strings.Compare(a.Owner, b.Owner) })
		return info, nil
	})
}

// CancelWaits ends every pending Acquire of the session with err (wrapped:
// ErrClosed for a closing runtime); the holds stay. A grant that already
// happened is delivered instead.
func (s *Session) CancelWaits(err error) {
	for w := range s.waits {
		w.giveUp(err)
	}
}

// AbandonOwner abandons every hold owner (an owner string) has or had
// in the session (see Hold.Abandon): its task ended. task names the task in
// the warnings.
func (s *Session) AbandonOwner(owner, task string) {
	for k, h := range s.holds {
		if k.owner == owner {
			h.Abandon(task)
		}
	}
}

// Active returns the number of the session's live holds and pending
// acquires.
func (s *Session) Active() (holds, waits int) {
	for _, h := range s.holds {
		if !h.released {
			holds++
		}
	}
	return holds, len(s.waits)
}

// gateName keeps gate names apart from the names of scripts' own in-process
// locks.
func gateName(name string) string { return gatePrefix + name }

const gatePrefix = "\x00dist\x00"

// localName is the in-process lock behind l: its own, or its gate.
func (l *Lock) localName() string {
	if l.scope == Distributed {
		return gateName(l.name)
	}
	return l.name
}

// releaseLocal gives up one level (every level with all) of owner's
// in-process hold of name and tells waiters counting attempts. It returns
// the remaining count.
func (s *Session) releaseLocal(name, owner string, mode Mode, all bool) (int, error) {
	n, err := s.svc.local.Release(name, owner, mode)
	for all && err == nil && n > 0 {
		n, err = s.svc.local.Release(name, owner, mode)
	}
	if err == nil && n == 0 {
		s.svc.wakes.notify(name)
	}
	return n, err
}

func isNotHeld(err error) bool { return errors.Is(err, ErrNotHeld) }
