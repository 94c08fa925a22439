package scheduler

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// "Run now" across processes: TriggerAny records a trigger in the Store
// and tells every Engine; each one holding the task claims it, and the one
// claim that succeeds runs it (as distributed firings are claimed, under a
// key of its own: scheduler:run:{name}:manual:<id>).

// MaxTriggerWindow bounds TriggerAny's window.
const MaxTriggerWindow = time.Hour

// triggerClaimTries bounds the claims of one trigger the Store did not
// answer (50 ms doubling to 1 s between them: about 10 s).
const triggerClaimTries = 14

// TriggerState is what TriggerStatus reports of a trigger.
type TriggerState struct {
	// Pending: no process has claimed it yet, and its window is open.
	Pending bool
	// Runner is the owner id of the process that claimed it and runs it
	// (its Config.Instance, a random part and a sequence number); "" while
	// pending, and when the trigger is unknown or its window passed
	// unclaimed (then no process will run it).
	Runner string
}

// TriggerAny asks the processes that registered the distributed task name
// to run it once, now, outside its schedule: exactly one of them runs it
// (Firing.Manual, Scheduled the Store's time of the claim; counted in
// RunCount; overlap does not apply, and a paused or disabled task runs
// too). The caller need not have registered the task (an admin CLI
// registers nothing). It returns the trigger's id once the Store has
// recorded it and published it (one round trip on Redis); the run happens
// in whichever process claims it first. TriggerStatus(name, id) tells
// whether one did: a trigger no process claims within window is dropped
// (nothing queues it for a process that starts later), and so is one that
// reaches no process holding the task (a process whose control connection
// was down when it was sent does not hear it).
//
// A process that wins the claim and dies before the run ends does not
// re-run it elsewhere: a manual run is at most once if interrupted.
//
// Errors: ErrInvalid (bad name, window not in (0, MaxTriggerWindow], a
// local task of this process: use Trigger), ErrNotFound (no record in the
// Store), ErrClosed, the Store's error.
func (e *Engine) TriggerAny(name string, window time.Duration) *store.Op[string] {
	if err := checkName(name); err != nil {
		return store.Failed[string](err)
	}
	if window <= 0 || window > MaxTriggerWindow {
		return store.Failed[string](fmt.Errorf("%w: trigger window %v: must be in (0, %v]", ErrInvalid, window, MaxTriggerWindow))
	}
	if e.refusing() {
		return store.Failed[string](ErrClosed)
	}
	if dist, ok := e.lookupName(name); ok && !dist {
		return store.Failed[string](fmt.Errorf("%w: task %q is local to this process: use Trigger", ErrInvalid, name))
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	return thenOp(e.st.sendTrigger(name, id, window), func(ok bool, err error) (string, error) {
		if err != nil {
			return "", fmt.Errorf("scheduler: trigger %q: %w", name, err)
		}
		if !ok {
			return "", fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		return id, nil
	})
}

// TriggerStatus reads trigger id of task name (TriggerAny): pending, or
// claimed by a process (Runner), or neither (unknown, or its window passed
// with no claim). Errors: ErrInvalid, ErrClosed, the Store's error.
func (e *Engine) TriggerStatus(name, id string) *store.Op[TriggerState] {
	if err := checkName(name); err != nil {
		return store.Failed[TriggerState](err)
	}
	if id == "" {
		return store.Failed[TriggerState](fmt.Errorf("%w: empty trigger id", ErrInvalid))
	}
	if e.refusing() {
		return store.Failed[TriggerState](ErrClosed)
	}
	return thenOp(e.st.triggerState(name, id), func(r trigReply, err error) (TriggerState, error) {
		if err != nil {
			return TriggerState{}, fmt.Errorf("scheduler: trigger %q: %w", name, err)
		}
		return TriggerState{Pending: r.State == trigPending, Runner: r.Owner}, nil
	})
}

// onTrigger claims trigger id of t (a control message) as owner; the
// winner runs it. A claim the Store did not answer is sent again with the
// same owner, so that a claim that Redis ran but whose reply was lost is
// found won.
func (e *Engine) onTrigger(t *task, id, owner string, fails int) {
	if t.removed || e.closing || len(t.runners) == 0 {
		return
	}
	submit(e, e.st.claimTrigger(t.name, id, owner), func(res trigReply, err error, t0, t1 time.Time) {
		if err != nil {
			if fails+1 >= triggerClaimTries {
				e.log.Warn("scheduler: could not claim a trigger; giving up (another process may run it)",
					"task", t.name, "trigger", id, "error", err)
				return
			}
			e.clock.AfterFunc(claimBackoff(fails+1), func() { e.post(func() { e.onTrigger(t, id, owner, fails+1) }) })
			return
		}
		e.observe(res.Now, t0, t1)
		if res.State != trigClaimed || res.Owner != owner {
			return // another process runs it, or it expired
		}
		if t.removed || e.closing || len(t.runners) == 0 {
			e.log.Warn("scheduler: won a trigger of a task that left this process meanwhile; it does not run",
				"task", t.name, "trigger", id)
			return
		}
		e.startFiring(t, res.Now, Firing{Manual: true})
	})
}
