package ops

import (
	"fmt"
	"strings"
	"time"

	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/core/scheduler"
)

// The JSON shapes of the console's pages (GET /ops/api/..., docs/ops.md),
// shared with the admin CLI's --json output.

// QueueView is one queue on the queues page.
type QueueView struct {
	Name           string `json:"name"`
	Kind           string `json:"kind"`
	Length         int64  `json:"length"`
	InFlight       int64  `json:"in_flight"`
	Ready          int64  `json:"ready"`
	Pending        int64  `json:"pending"`
	Retrying       int64  `json:"retrying"`
	Consumers      int64  `json:"consumers"`
	LocalConsumers int64  `json:"local_consumers"`
	DeadLetters    int64  `json:"dead_letters"`
	// OldestAgeMs is how long the message at the head of the queue has
	// waited, in ms (queue.Handle.Oldest: delay queues count from the due
	// time, reliable queues from the oldest unacknowledged message); null
	// when there is none.
	OldestAgeMs *int64 `json:"oldest_age_ms"`
}

// QueueViewOf is the console's (and the admin CLI's) view of a queue: its
// stats, the consume / subscribe handles of this process, and how long its
// oldest message has waited (AgeMs).
func QueueViewOf(st queue.Stats, localConsumers int, oldestAgeMs *int64) QueueView {
	return QueueView{Name: st.Name, Kind: st.Kind.String(), Length: st.Length, InFlight: st.InFlight, Ready: st.Ready,
		Pending: st.Pending, Retrying: st.Retrying, Consumers: st.Consumers, LocalConsumers: int64(localConsumers),
		DeadLetters: st.DeadLetters, OldestAgeMs: oldestAgeMs}
}

// AgeMs is the age at now of a message waiting since t, in ms (never
// negative: Redis's clock may run a little ahead of this machine's); nil
// for the zero time (no message).
func AgeMs(t, now time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	ms := max(now.Sub(t).Milliseconds(), 0)
	return &ms
}

// DeadLetterView is one dead letter, its body shown as text (a preview of
// at most PreviewBytes bytes; Truncated says there was more).
type DeadLetterView struct {
	ID         string `json:"id"`
	MessageID  string `json:"message_id"`
	Group      string `json:"group,omitempty"`
	Deliveries int    `json:"deliveries"`
	At         string `json:"at"`
	Preview    string `json:"preview"`
	Size       int    `json:"size"`
	Truncated  bool   `json:"truncated"`
}

// PreviewBytes bounds a dead letter's payload preview.
const PreviewBytes = 256

// Preview is the preview of body: at most PreviewBytes bytes, invalid UTF-8
// shown as U+FFFD.
func Preview(body []byte) (string, bool) {
	cut := len(body) > PreviewBytes
	if cut {
		body = body[:PreviewBytes]
	}
	return strings.ToValidUTF8(string(body), "\uFFFD"), cut
}

// DeadAt formats a dead letter's time: RFC 3339 in UTC with milliseconds.
func DeadAt(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// TaskView is one scheduler task on the tasks page. Status is "active",
// "paused" or "failing" (the latest firing failed after its retries).
type TaskView struct {
	Name        string  `json:"name"`
	Schedule    string  `json:"schedule"`
	Status      string  `json:"status"`
	NextRun     *string `json:"next_run"`
	LastRun     *string `json:"last_run"`
	Runs        int64   `json:"runs"`
	Failures    int64   `json:"failures"`
	Missed      int64   `json:"missed"`
	Skipped     int64   `json:"skipped"`
	LastError   string  `json:"last_error"`
	Distributed bool    `json:"distributed"`
	Running     int     `json:"running"`
}

// TaskViewOf is the console's (and the admin CLI's) view of a task.
func TaskViewOf(i scheduler.Info) TaskView {
	next, last := runTimes(i)
	return TaskView{Name: i.Name, Schedule: i.Schedule, Status: TaskStatus(string(i.Status)), NextRun: next, LastRun: last,
		Runs: i.RunCount, Failures: i.Failed, Missed: i.Missed, Skipped: i.Skipped, LastError: i.LastError,
		Distributed: i.Distributed, Running: i.Running}
}

// SchedulerTaskOf is GET /ops/scheduler's entry of a task: the spec's
// fields and the failure counters. failing says an attempt of the task
// failed in this process with its retries still to come (StatusFailing,
// like the scheduler's "error").
func SchedulerTaskOf(i scheduler.Info, failing bool) Task {
	next, last := runTimes(i)
	t := Task{Name: i.Name, Schedule: i.Schedule, Status: string(i.Status), NextRun: next, LastRun: last,
		RunCount: i.RunCount, Distributed: i.Distributed, Failures: i.Failed, Missed: i.Missed, Skipped: i.Skipped}
	if i.Status == scheduler.StatusError || (failing && i.Status == scheduler.StatusActive) {
		t.Status = StatusFailing
	}
	if i.LastError != "" {
		t.LastError = &i.LastError
	}
	return t
}

// runTimes are a task's next and last run as Timestamps (null when none).
func runTimes(i scheduler.Info) (next, last *string) {
	if !i.NextRun.IsZero() {
		next = Timestamp(i.NextRun.UnixMilli())
	}
	if !i.LastRun.IsZero() {
		last = Timestamp(i.LastRun.UnixMilli())
	}
	return next, last
}

// BoardView is one leaderboard this process opened.
type BoardView struct {
	Name    string `json:"name"`
	Count   int    `json:"count"`
	Version int64  `json:"version"`
}

// EntryView is one member of a board.
type EntryView struct {
	Rank  int     `json:"rank"`
	UID   string  `json:"uid"`
	Score float64 `json:"score"`
}

// BoardDetail is a board's page: its top and a member's neighbourhood.
type BoardDetail struct {
	BoardView
	Top []EntryView `json:"top"`
	// Member is set when a member was asked for; Around is then the member
	// with its neighbours, best first (empty when it is not on the board).
	Member string      `json:"member,omitempty"`
	Found  bool        `json:"found"`
	Around []EntryView `json:"around"`
}

// LockView is a named lock's state as the backend sees it.
type LockView struct {
	Name       string       `json:"name"`
	Held       bool         `json:"held"`
	Mode       string       `json:"mode"`
	Owners     []HolderView `json:"owners"`
	TTLMs      int64        `json:"ttl_ms"`
	AcquiredAt *string      `json:"acquired_at"`
	Token      int64        `json:"token"`
	Waiting    int          `json:"waiting"`
}

// HolderView is one holder of a lock.
type HolderView struct {
	Owner   string `json:"owner"`
	Count   int    `json:"count"`
	Service string `json:"service,omitempty"`
}

// LagView summarizes the loop-lag probes (shield_loop_lag_seconds).
type LagView struct {
	Samples uint64  `json:"samples"`
	MeanMs  float64 `json:"mean_ms"`
	// P99Ms is the upper bound of the histogram bucket holding the 99th
	// percentile (0 with no samples).
	P99Ms float64 `json:"p99_ms"`
}

// HeldLocksView is the locks tasks of this process hold or wait for: the
// first HeldLimit (distributed ones first, then in-process ones, each by
// name) and the total.
type HeldLocksView struct {
	Total     int            `json:"total"`
	Truncated bool           `json:"truncated"`
	Locks     []HeldLockView `json:"locks"`
}

// HeldLockView is one lock held in this process (lock.HeldLock), with, for
// a distributed one, what the backend says of it.
type HeldLockView struct {
	Name string `json:"name"`
	// Kind is "mutex", "spinlock", "rwlock", "distributed_mutex" or
	// "distributed_rwlock" ("+"-joined when several kinds share the name).
	Kind        string `json:"kind"`
	Distributed bool   `json:"distributed"`
	// Holders counts the holds in this process: Readers shared, Writers
	// exclusive. Waiting counts the acquires queued in this process.
	Holders int `json:"holders"`
	Readers int `json:"readers"`
	Writers int `json:"writers"`
	Waiting int `json:"waiting"`
	// HeldSince is the oldest listed hold's acquisition; HeldMs its age.
	HeldSince *string `json:"held_since"`
	HeldMs    int64   `json:"held_ms"`
	// TTLMs is the remaining lease: the backend's for a distributed lock
	// read from it (else this process's count of it), the shortest of the
	// holds' ttls for an in-process lock; -1 for none.
	TTLMs int64 `json:"ttl_ms"`
	// Token is a distributed lock's fencing token, from the backend (null:
	// in-process, or not read).
	Token  *int64          `json:"token"`
	Owners []HeldOwnerView `json:"owners"`
	// BackendError says why the backend could not be read, or that it was
	// not (past HeldBackendReads distributed locks).
	BackendError string `json:"backend_error,omitempty"`
}

// HeldOwnerView is one hold of a HeldLockView.
type HeldOwnerView struct {
	Owner string  `json:"owner"`
	Mode  string  `json:"mode"`
	Count int     `json:"count"`
	Since *string `json:"since"`
	// State is "held"; for a distributed lock, "acquiring" when the task
	// passed this process's gate but the backend does not list it as a
	// holder (its attempt is in flight or waits for another process), and
	// "unknown" when the backend was not read.
	State   string `json:"state"`
	Service string `json:"service,omitempty"`
}

// The bounds of the locks page: the locks listed, the holds listed per
// lock, and the distributed locks whose backend state is read (one
// pipeline) per request.
const (
	HeldLimit        = 200
	HeldOwners       = 10
	HeldBackendReads = 50
)

// HeldLocksOf is the console's view of held (lock.ListHeld) at now.
// backend has the backend's Info of the distributed locks that were read,
// by name; failed the errors of those that could not be.
func HeldLocksOf(held lock.HeldLocks, backend map[string]lock.Info, failed map[string]error, now time.Time) HeldLocksView {
	v := HeldLocksView{Total: held.Total, Truncated: held.Total > len(held.Locks), Locks: make([]HeldLockView, 0, len(held.Locks))}
	for _, l := range held.Locks {
		h := HeldLockView{Name: l.Name, Kind: l.Kind, Distributed: l.Distributed, Holders: l.Holders, Readers: l.Readers,
			Writers: l.Holders - l.Readers, Waiting: l.Waiting, TTLMs: -1, Owners: make([]HeldOwnerView, 0, len(l.Owners))}
		info, read := backend[l.Name]
		remote := map[string]lock.Holder{}
		for _, o := range info.Owners {
			remote[o.Owner] = o
		}
		for i, o := range l.Owners {
			ov := HeldOwnerView{Owner: o.Owner, Mode: o.Mode.String(), Count: o.Count, Since: Timestamp(o.AcquiredAt.UnixMilli()), State: "held"}
			if i == 0 {
				h.HeldSince, h.HeldMs = ov.Since, max(now.Sub(o.AcquiredAt).Milliseconds(), 0)
			}
			if !o.ExpiresAt.IsZero() {
				if left := max(o.ExpiresAt.Sub(now).Milliseconds(), 0); h.TTLMs < 0 || left < h.TTLMs {
					h.TTLMs = left
				}
			}
			if l.Distributed {
				r, ok := remote[o.Owner]
				switch {
				case !read:
					ov.State = "unknown"
				case !ok:
					ov.State = "acquiring"
				default:
					ov.Service = r.ServiceName
				}
			}
			h.Owners = append(h.Owners, ov)
		}
		switch {
		case !l.Distributed:
		case read && info.Held:
			tok := info.Token
			h.Token, h.TTLMs = &tok, info.TTL.Milliseconds()
			if info.TTL < 0 {
				h.TTLMs = -1
			}
		case read: // the backend has no hold: the tasks are acquiring
			h.TTLMs = -1
		case failed[l.Name] != nil:
			h.BackendError = failed[l.Name].Error()
		default:
			h.BackendError = fmt.Sprintf("not read: only the first %d distributed locks are read from the backend", HeldBackendReads)
		}
		v.Locks = append(v.Locks, h)
	}
	return v
}

// locksPage, limitersPage and runtimePage are the pages read from State.
type locksPage struct {
	Held      int64         `json:"held"`
	Waiting   int64         `json:"waiting"`
	Lost      int64         `json:"lost"`
	Abandoned int64         `json:"abandoned"`
	Process   HeldLocksView `json:"process"`
	Lock      *LockView     `json:"lock,omitempty"`
}

type limitersPage struct {
	Limiters      int    `json:"limiters"`
	ActiveKeys    int    `json:"active_keys"`
	Allowed       uint64 `json:"allowed"`
	Rejected      uint64 `json:"rejected"`
	Unavailable   uint64 `json:"unavailable"`
	RejectedToday uint64 `json:"rejected_today"`
	Degraded      uint64 `json:"degraded"`
}

type runtimePage struct {
	Runtimes int     `json:"runtimes"`
	Tasks    int     `json:"tasks"`
	LoopLag  LagView `json:"loop_lag"`
}

// TaskStatus is the console's status of a task: the scheduler's ("active",
// "paused"), with "error" (the latest firing failed after its retries)
// shown as "failing".
func TaskStatus(s string) string {
	if s == string(scheduler.StatusError) {
		return "failing"
	}
	return s
}

// LockInfo is the console's (and the admin CLI's) view of a lock's Info.
func LockInfo(name string, i lock.Info) LockView {
	v := LockView{Name: name, Held: i.Held, Mode: i.Mode.String(), Owners: []HolderView{},
		TTLMs: i.TTL.Milliseconds(), Token: i.Token, Waiting: i.Waiting}
	if i.TTL < 0 {
		v.TTLMs = -1
	}
	if !i.Held {
		v.Mode, v.TTLMs = "", 0
	}
	if !i.AcquiredAt.IsZero() {
		v.AcquiredAt = Timestamp(i.AcquiredAt.UnixMilli())
	}
	for _, h := range i.Owners {
		v.Owners = append(v.Owners, HolderView{Owner: h.Owner, Count: h.Count, Service: h.ServiceName})
	}
	return v
}
