package scheduler

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
)

// Store keeps the shared records of distributed tasks and arbitrates their
// firings: a *Memory (one process) or a *Redis (many). Give one to
// Config.Store. Every step is atomic on the Store's clock (Redis: server
// TIME) and, on Redis, one round trip; the Engine is its only caller.
type Store interface {
	// register creates the record of d or returns the existing one: the
	// same schedule changes nothing; another schedule of the same kind
	// updates it (re-anchored at the Store's now, cursor moved to now so
	// the change counts nothing as missed) and tells every Engine; another
	// kind fails with ErrKindConflict.
	register(d def) step[registered]
	// claim settles one firing (see claim and claimResult).
	claim(c claim) step[claimResult]
	// recover takes over a firing whose lease lapsed: owner gets a new
	// lease if the firing is unfinished and its lease has passed. On
	// Redis, owner "<base>/<n>" is attempt n of a recover whose earlier
	// attempts got no reply: if one of them took the firing over, this one
	// takes it from it.
	recover(name string, fire int64, owner string, lease time.Duration) step[recoverResult]
	// heartbeat renews owner's lease on a firing and records the attempt
	// it is at. held is false when another owner took the firing over.
	heartbeat(name string, fire int64, owner string, attempt int, lease time.Duration) step[heartbeatResult]
	// finish ends owner's run of a firing and counts it (a manual run is
	// only counted). A one-shot task's record is deleted and every Engine
	// told to remove it.
	finish(f finish) step[finishResult]
	// addMissed adds n to a record's missed count.
	addMissed(name string, n int64) step[struct{}]
	// control pauses, resumes, disables, enables or removes a record and
	// tells every Engine; it returns false when there is no record. Resume
	// and Enable (of a disabled record) move the cursor to now, so firings
	// while paused or disabled count as nothing. It returns the record's
	// version after the change (ctlRemove: 0), which the message carries.
	control(name string, op controlOp) step[controlled]
	// get returns a record (found false when there is none).
	get(name string) step[found]
	// sendTrigger records trigger id of a record for window and tells
	// every Engine (ctlTrigger); false when there is no record.
	sendTrigger(name, id string, window time.Duration) step[bool]
	// claimTrigger gives trigger id to owner if nobody has it: exactly one
	// owner ever gets it (the same owner asking again gets it again, so a
	// retry after a lost reply is safe). Unknown or past its window:
	// trigUnknown.
	claimTrigger(name, id, owner string) step[trigReply]
	// triggerState reads trigger id: unclaimed (trigPending), claimed by
	// Owner (trigClaimed), or unknown or past its window (trigUnknown).
	triggerState(name, id string) step[trigReply]
	// subscribe calls fn for every control message (from any process, this
	// one included) and with ctlResync after the Store's connection
	// came back, when messages may have been lost. fn must not block.
	// cancel is idempotent.
	subscribe(fn func(controlMsg)) (cancel func(), err error)
	// clock returns the Store's clock when the Engine can read it directly
	// (in-process), else nil: the Engine then estimates it from replies.
	clock() func() time.Time
}

// step is one Store operation before it becomes an Op: in-process work
// (local), or commands for one client and the decoder of their replies.
// The Engine runs steps itself (batching Redis ones) or chains a
// continuation onto them (thenOp) for the Ops it returns.
type step[T any] struct {
	local  func() (T, error)
	c      redis.UniversalClient
	cmds   []redis.Cmder
	decode func() (T, error)
}

// op returns the step as an Op.
func (s step[T]) op() *store.Op[T] {
	if s.local != nil {
		return store.Local(s.local)
	}
	return store.Commands(s.c, s.decode, s.cmds...)
}

// thenOp returns an Op that runs s and passes its result to then (not
// called when a Redis round trip fails outright: the Op returns that
// error).
func thenOp[T, U any](s step[T], then func(T, error) (U, error)) *store.Op[U] {
	if s.local != nil {
		return store.Local(func() (U, error) { return then(s.local()) })
	}
	return store.Commands(s.c, func() (U, error) { return then(s.decode()) }, s.cmds...)
}

// def describes a task to register.
type def struct {
	Name string
	Kind Kind
	// Spec is the canonical schedule (Schedule.spec); Text what ops show.
	Spec, Text string
	// Timezone of a cron schedule.
	Timezone string
	// At is a one-shot task's absolute fire time (Unix ms); 0 anchors the
	// record at the Store's now.
	At int64
	// Expire, when > 0, is how long after its fire time a one-shot record
	// lingers if nobody finishes it (garbage collection).
	Expire time.Duration
	// Anchor and Cursor, when > 0, are used instead of now if the record is
	// created: an Engine re-creating a record the Store lost (a Redis
	// restart without persistence) keeps its fire times and the firing it
	// was waiting to claim.
	Anchor, Cursor int64
}

// record is the shared state of a distributed task. Times are Unix ms on
// the Store's clock; 0 means none.
type record struct {
	Name            string
	Kind            Kind
	Spec, Text      string
	Timezone        string
	Anchor          int64
	Paused          bool
	Disabled        bool  // Disable: off the schedule until Enable (apart from Paused)
	Cursor          int64 // the latest fire time settled (claimed, skipped or missed)
	LastRun         int64
	RunCount        int64
	Missed, Skipped int64
	Late, Failed    int64
	LastError       string
	Errored         bool // the latest firing failed
	Done            bool // a one-shot task that ran (a tombstone)
	Version         int64
	Now             int64 // the Store's time of the reply
	Orphaned        bool  // some firing's lease lapsed unfinished
	Running         int64 // firings with a live lease
}

// registered is what register returns.
type registered struct {
	record
	// Created: no record existed. Updated: the schedule changed. Done: a
	// one-shot task that already ran (its tombstone lingers for Keep).
	Created, Updated, Done bool
}

// found is what get returns.
type found struct {
	record
	Found bool
}

// claim asks to settle firing Fire of task Name.
type claim struct {
	Name string
	// Fire is the fire time (Unix ms). 0 claims nothing: the reply reports
	// Orphan, and RunDeadline of Probe.
	Fire int64
	// Probe is a firing whose lease deadline the reply reports.
	Probe int64
	// Owner gets the claim's lease of Lease. On Redis, "<base>/<n>" is
	// attempt n of a claim whose attempts 1..n-1 got no reply: what they
	// recorded, if Redis ran them after all, is this Engine's and never
	// ran (scripts/claim.lua, Attempts), so this attempt takes over the
	// same firing or drops another as missed (Dropped). An attempt older
	// than one recorded changes nothing (outcomeTaken).
	Owner string
	Lease time.Duration
	// ExpectPrev is the cursor the Engine believes in and Missed the fire
	// times it counted between it and Fire: added to missed only if the
	// cursor is ExpectPrev (else claimResult.Recount).
	ExpectPrev, Missed int64
	// Skip refuses the claim when another firing of the task holds a live
	// lease (Overlap "skip").
	Skip bool
	// CatchUp: a firing older than this on the Store's clock is settled as
	// missed instead.
	CatchUp time.Duration
	// Early: a claim up to this much before Fire is accepted (the Engine
	// claims ahead of the fire time); earlier ones get outcomeEarly.
	Early time.Duration
	// MissOnly settles the firing as missed without running it.
	MissOnly bool
	// Keep, when > 0, marks a one-shot task: if the claim settles its
	// firing as missed, the record turns into a tombstone kept for Keep
	// and every Engine is told to remove it (as finish does for one that
	// ran).
	Keep time.Duration
}

// outcome is what a claim settled.
type outcome uint8

const (
	// outcomeClaimed: the caller runs the firing.
	outcomeClaimed outcome = iota + 1
	// outcomeTaken: the firing (or a later one) was settled already.
	outcomeTaken
	// outcomeSkipped: another firing still runs (Skip); counted skipped.
	outcomeSkipped
	// outcomeMissed: too old (CatchUp) or MissOnly; counted missed.
	outcomeMissed
	// outcomePaused: the task is paused; nothing changed.
	outcomePaused
	// outcomeEarly: the Store's clock is more than Early before Fire;
	// retry after Wait.
	outcomeEarly
	// outcomeUnknown: no record (removed, or the Store lost its data).
	outcomeUnknown
	// outcomeNone: Fire was 0.
	outcomeNone
	// outcomeDisabled: the task is disabled; nothing changed.
	outcomeDisabled
)

// claimResult is what claim returns.
type claimResult struct {
	Outcome outcome
	// Cursor: before the claim (claimed, skipped, missed) or the current
	// one (taken, paused, none).
	Cursor int64
	// Recount: the cursor was not ExpectPrev, so Missed was not counted;
	// the caller counts the fire times in (Cursor, Fire) and adds them.
	Recount bool
	// RunDeadline: lease deadline of firing Fire (taken) or Probe, if it
	// is unfinished; 0 otherwise.
	RunDeadline int64
	// Wait: outcomeEarly.
	Wait time.Duration
	// Orphan is an unfinished firing whose lease lapsed, 0 if none.
	Orphan int64
	// Dropped firings, from DroppedFirst to DroppedLast, were claimed by
	// earlier attempts of this claim (see claim.Owner) and are now counted
	// missed; Cursor and Recount do not account for them.
	Dropped, DroppedFirst, DroppedLast int64
	Now                                int64
	// Version is the record's: a paused or disabled outcome is as of the
	// control of that version.
	Version int64
}

// recoverResult is what recover returns.
type recoverResult struct {
	Recovered bool
	// Attempt the lapsed runner had reached.
	Attempt int
	// Deadline of the firing's live lease when not recovered (0: the
	// firing is finished).
	Deadline int64
	Now      int64
}

// heartbeatResult is what heartbeat returns.
type heartbeatResult struct {
	Held bool
	Now  int64
}

// finish ends a run.
type finish struct {
	Name  string
	Fire  int64
	Owner string
	// Manual: a Trigger run (no claim); only counted.
	Manual bool
	// Started is the run's start on the Store's clock (Unix ms).
	Started int64
	// Fail: the last attempt failed with Err. Late: count it as late.
	Fail bool
	Err  string
	Late bool
	// Once turns the record into a tombstone kept for Keep, so that late
	// claims of the firing (and registrations) see it ran; then it expires.
	Once bool
	Keep time.Duration
}

// finishResult is what finish returns.
type finishResult struct {
	// Held: the caller still held the firing (else another process took it
	// over and counts it; this run was not counted).
	Held bool
	// Found: the record exists (false after a Remove).
	Found  bool
	Record record
}

// controlOp is a control message's operation.
type controlOp string

// The control operations.
const (
	ctlPause  controlOp = "pause"
	ctlResume controlOp = "resume"
	ctlRemove controlOp = "remove"
	// ctlDisable, ctlEnable: Disable and Enable.
	ctlDisable controlOp = "disable"
	ctlEnable  controlOp = "enable"
	// ctlUpdate: the schedule changed; re-read the record.
	ctlUpdate controlOp = "update"
	// ctlTrigger: a "run now" (controlMsg.ID); the processes holding the
	// task claim it and the winner runs it.
	ctlTrigger controlOp = "trigger"
	// ctlResync: the Store's connection came back; re-read every
	// record (Name is "").
	ctlResync controlOp = "resync"
)

// valid reports whether op is one a caller may send (Store.control).
func (op controlOp) valid() bool {
	switch op {
	case ctlPause, ctlResume, ctlDisable, ctlEnable, ctlRemove:
		return true
	}
	return false
}

// controlled is what Store.control returns: found, and the record's
// version after the change.
type controlled struct {
	Found   bool
	Version int64
}

// controlMsg is one control message.
type controlMsg struct {
	Op   controlOp
	Name string
	// ID of a ctlTrigger.
	ID string
	// Version is the record's version after a pause, resume, disable or
	// enable (0: none, as for remove). Messages can reach a process after
	// it applied a later control itself (the issuer applies its own at
	// once; its message travels on another connection): a task applies a
	// control only if it is newer than the last it applied or adopted.
	Version int64
	// issued: this process sent the control and its Store op has just
	// returned (not a message from the Store).
	issued bool
}

// trigState is what claimTrigger and triggerState found.
type trigState uint8

const (
	// trigUnknown: no such trigger, or its window passed unclaimed.
	trigUnknown trigState = iota
	// trigPending: not claimed yet.
	trigPending
	// trigClaimed: Owner has it (for claimTrigger: the caller won when
	// Owner is the caller).
	trigClaimed
)

// trigReply is what claimTrigger and triggerState return.
type trigReply struct {
	State trigState
	Owner string
	Now   int64
}
