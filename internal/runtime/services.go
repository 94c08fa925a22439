package runtime

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	lua "github.com/yuin/gopher-lua"

	iclock "github.com/shieldrt/shieldglobal/internal/clock"
)

// Services is what the process-wide Module hands every runtime. A nil
// capability is not registered in Lua.
type Services struct {
	// Context ends when the module closes, with the cause
	// store.ErrModuleClosed; a runtime's operations run under it, so a
	// runtime left open past Module.Close fails every call with that error
	// (on every backend) instead of reaching closed clients. nil: never ends.
	Context context.Context
	Log     *slog.Logger
	Owner   Owner
	// Now is the clock of shield.now_ms (Clock's, else time.Now, when nil).
	Now func() time.Time
	// Clock arms the runtime's timers (shield.sleep, pop and limiter
	// timeouts, reliable-queue extensions) and, without Now, reads the time;
	// nil: the system clock. The spec runner's virtual time sets both.
	Clock iclock.Clock
	// Capabilities are installed into the shield table of the runtime, in
	// this order (the Module hands its capability table's; see
	// Capability). A capability that is off is not in the list.
	Capabilities []Capability
	// SlowTask is how long a task may run without yielding before it is
	// logged (once per run, with its name and line); 0 disables the check.
	SlowTask time.Duration
	// Observe is told of the events the metrics count.
	Observe Observers
}

// Owner is the identity of this process in lock owners and logs.
type Owner struct {
	NodeID      string
	ServiceID   int64
	ServiceName string
	// Instance tells apart processes that share NodeID and ServiceID (several
	// processes on one host, or a copied config): owners must never collide.
	Instance string
}

// Node is "node_id:service_id": the scheduler's instance prefix and the
// first part of every lock owner of this process.
func (o Owner) Node() string { return o.NodeID + ":" + strconv.FormatInt(o.ServiceID, 10) }

// Process is "node_id:service_id:instance": this process among all others
// (its queue consumer name, its rate-limiter reports).
func (o Owner) Process() string { return o.Node() + ":" + o.Instance }

// OwnerID is the lock-owner identity of the task running L:
// "node_id:service_id:coroutine-<instance>-N" (thread "main-<instance>"
// outside tasks). Loop only.
func (rt *Runtime) OwnerID(L *lua.LState) string {
	o := rt.svc.Owner
	prefix := o.Node() + ":"
	if t := rt.CurrentTask(L); t != nil {
		if t.owner == "" {
			t.owner = prefix + "coroutine-" + o.Instance + "-" + strconv.FormatInt(t.ID, 10)
		}
		return t.owner
	}
	return prefix + "main-" + o.Instance
}

// Observers are told of the events the Prometheus metrics count. Any field
// may be nil; each is called on the loop (LoopLag on the monitor goroutine)
// and must be quick.
type Observers struct {
	// OpFailed: the Lua call op (for example "shield.global:get") raised
	// because its Redis operation failed.
	OpFailed func(op string)
	// TaskFailed: a task, or a callback, ended with an uncaught error.
	TaskFailed func()
	// LoopLag: how long posted work waited for the loop (probed every 250 ms).
	LoopLag func(time.Duration)
	// QueueHandled: a consumer's handler for one message of the queue
	// (name, kind) ended, normally or by an error, after d; handlers the
	// closing runtime ended are not told.
	QueueHandled func(queue, kind string, d time.Duration)
}
