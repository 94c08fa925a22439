package bindings

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/codec"
	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// pushed is the conv of every push: true (or the message id of a reliable
// or broadcast queue), or nil, "full".
func pushed[T any](id func(T) lua.LValue) func(*lua.LState, T, error) ([]lua.LValue, error) {
	return func(_ *lua.LState, v T, err error) ([]lua.LValue, error) {
		switch {
		case errors.Is(err, queue.ErrFull):
			return reason("full")
		case err != nil:
			return nil, err
		}
		return values(id(v))
	}
}

func pushedTrue(struct{}) lua.LValue { return lua.LTrue }
func pushedID(id string) lua.LValue  { return lua.LString(id) }

// q:push(msg) on a plain, reliable or broadcast queue; q:push(msg, delay_ms)
// on a delay queue; q:push(msg, priority) on a priority queue.
func (o *queueObj) push(a runtime.Args) int {
	body := message(a, 2)
	rt, L, name := o.b.rt, a.L, o.call("push")
	switch o.kind {
	case queue.KindPlain:
		return runtime.RunOutcome(rt, L, name, o.plain.Push(body), pushed(pushedTrue))
	case queue.KindDelay:
		return runtime.RunOutcome(rt, L, name, o.delay.Push(body, millisArg(a, 3, "delay")), pushed(pushedTrue))
	case queue.KindPriority:
		p := a.Num(3)
		if p != p {
			a.Bad(3, "priority must be a number, got NaN")
		}
		return runtime.RunOutcome(rt, L, name, o.prio.Push(body, p), pushed(pushedTrue))
	case queue.KindReliable:
		return runtime.RunOutcome(rt, L, name, o.rel.Push(body), pushed(pushedID))
	default:
		return runtime.RunOutcome(rt, L, name, o.bc.Push(body), pushed(pushedID))
	}
}

// q:push_at(msg, unix_seconds) on a delay queue: due at that time (fractions
// allowed); a time in the past is due at once.
func (o *queueObj) pushAt(a runtime.Args) int {
	body := message(a, 2)
	sec := a.Num(3)
	if sec != sec || math.Abs(sec) > maxWaitMillis {
		a.Bad(3, fmt.Sprintf("time must be Unix seconds, got %s", lua.LNumber(sec).String()))
	}
	whole, frac := math.Modf(sec)
	at := time.Unix(int64(whole), int64(frac*1e9))
	return runtime.RunOutcome(o.b.rt, a.L, o.call("push_at"), o.delay.PushAt(body, at), pushed(pushedTrue))
}

// q:push_batch({msg, ...}): all or nothing. Plain: true; reliable: the ids;
// nil, "full" when the batch does not fit.
func (o *queueObj) pushBatch(a runtime.Args) int {
	t := a.Table(2)
	n := t.Len()
	t.ForEach(func(k, _ lua.LValue) {
		if i, ok := k.(lua.LNumber); !ok || float64(i) != math.Trunc(float64(i)) || i < 1 || int(i) > n {
			a.Bad(2, fmt.Sprintf("a list of messages expected, got key %s", keyText(k)))
		}
	})
	bodies := make([][]byte, 0, n)
	for i := 1; i <= n; i++ {
		v := t.RawGetInt(i)
		if v == lua.LNil {
			a.Bad(2, fmt.Sprintf("message #%d is nil", i))
		}
		data, err := codec.Encode(v)
		if err != nil {
			a.Bad(2, fmt.Sprintf("message #%d: %v", i, err))
		}
		bodies = append(bodies, data)
	}
	rt, L, name := o.b.rt, a.L, o.call("push_batch")
	if o.kind == queue.KindPlain {
		return runtime.RunOutcome(rt, L, name, o.plain.PushBatch(bodies), pushed(pushedTrue))
	}
	return runtime.RunOutcome(rt, L, name, o.rel.PushBatch(bodies), pushed(func(ids []string) lua.LValue {
		out := rt.L.CreateTable(len(ids), 0)
		for _, id := range ids {
			out.Append(lua.LString(id))
		}
		return out
	}))
}

// timeoutArg reads pop's optional timeout: nil or 0 = do not wait.
func timeoutArg(a runtime.Args, n int) time.Duration {
	if a.L.Get(n) == lua.LNil {
		return 0
	}
	v := a.Num(n)
	if v != v || v < 0 || v > maxWaitMillis {
		a.Bad(n, fmt.Sprintf("timeout must be >= 0 milliseconds (and at most %.0f), got %s", float64(maxWaitMillis), lua.LNumber(v).String()))
	}
	return time.Duration(v * float64(time.Millisecond))
}

// q:pop([timeout_ms]) -> msg | nil | nil, "timeout". On a reliable queue
// -> msg, handle. Without a timeout (or 0) it does not wait; with one only
// the calling task waits.
func (o *queueObj) pop(a runtime.Args) int {
	timeout := timeoutArg(a, 2)
	name := o.call("pop")
	if o.kind == queue.KindReliable {
		return pop(o, a.L, name, timeout, popKind[*queue.Delivery]{
			first:    o.rel.Pop,
			w:        o.rel,
			giveBack: func(d *queue.Delivery) { o.giveBack(d.Release(), "a message reached a task that had ended") },
			convert:  o.handleFor,
		})
	}
	var first func() *store.Op[queue.Message]
	var w queue.Waiter[queue.Message]
	var up queue.Unpopper
	switch o.kind {
	case queue.KindPlain:
		first, w, up = o.plain.Pop, o.plain, o.plain
	case queue.KindDelay:
		first, w, up = o.delay.Pop, o.delay, o.delay
	default:
		first, w, up = o.prio.Pop, o.prio, o.prio
	}
	return pop(o, a.L, name, timeout, popKind[queue.Message]{
		first:    first,
		w:        w,
		giveBack: func(m queue.Message) { o.giveBack(up.Unpop(m), "a message reached a task that had ended") },
		convert: func(_ *lua.LState, _ *runtime.Task, m queue.Message) ([]lua.LValue, error) {
			return []lua.LValue{decode(m.Body)}, nil
		},
	})
}

// giveBack sends op, the core's give back of a message nobody processed
// (queue.Unpopper: it returns to its place, unchanged, uncounted), off the
// loop: it must go out even while the runtime closes. Rare; logged.
func (o *queueObj) giveBack(op *store.Op[struct{}], why string) {
	o.b.rt.Log().Warn("shield: queue: "+why+"; given back", "queue", o.name)
	o.b.svc.background(o.b.rt.Log(), "giving back a message of "+o.name, func(ctx context.Context) error {
		_, err := op.Do(ctx)
		return err
	})
}

func counted(_ *lua.LState, n int64, err error) ([]lua.LValue, error) {
	if err != nil {
		return nil, err
	}
	return values(lua.LNumber(n))
}

// q:length() -> messages held (a reliable queue: not yet acknowledged; a
// broadcast queue: entries retained).
func (o *queueObj) length(a runtime.Args) int {
	var op *store.Op[int64]
	switch o.kind {
	case queue.KindPlain:
		op = o.plain.Length()
	case queue.KindDelay:
		op = o.delay.Length()
	case queue.KindPriority:
		op = o.prio.Length()
	case queue.KindReliable:
		op = o.rel.Length()
	default:
		op = o.bc.Length()
	}
	return runtime.RunOutcome(o.b.rt, a.L, o.call("length"), op, counted)
}

// q:pending() -> delay-queue messages not yet due.
func (o *queueObj) pending(a runtime.Args) int {
	return runtime.RunOutcome(o.b.rt, a.L, o.call("pending"), o.delay.Pending(), counted)
}

// q:ready() -> delay-queue messages due.
func (o *queueObj) ready(a runtime.Args) int {
	return runtime.RunOutcome(o.b.rt, a.L, o.call("ready"), o.delay.Ready(), counted)
}

// q:purge() -> how many messages were dropped.
func (o *queueObj) purge(a runtime.Args) int {
	var op *store.Op[int64]
	switch o.kind {
	case queue.KindPlain:
		op = o.plain.Purge()
	case queue.KindDelay:
		op = o.delay.Purge()
	case queue.KindPriority:
		op = o.prio.Purge()
	default:
		op = o.rel.Purge()
	}
	return runtime.RunOutcome(o.b.rt, a.L, o.call("purge"), op, counted)
}

func (o *queueObj) statsOp() *store.Op[queue.Stats] { return o.entry.stats() }

// q:stats() -> the queue's ops facts (see statsTable).
func (o *queueObj) stats(a runtime.Args) int {
	entry := o.entry
	return runtime.RunOutcome(o.b.rt, a.L, o.call("stats"), o.statsOp(), func(L *lua.LState, st queue.Stats, err error) ([]lua.LValue, error) {
		if err != nil {
			return nil, err
		}
		t := statsTable(L, st)
		o.b.svc.mu.Lock()
		t.RawSetString("local_consumers", lua.LNumber(entry.consumers))
		o.b.svc.mu.Unlock()
		return values(t)
	})
}

// statsTable is queue.Stats as a Lua table with snake_case fields; a
// broadcast queue's groups are under groups[name].
func statsTable(L *lua.LState, st queue.Stats) *lua.LTable {
	t := L.CreateTable(0, 16)
	t.RawSetString("name", lua.LString(st.Name))
	t.RawSetString("kind", lua.LString(st.Kind.String()))
	for _, f := range []struct {
		k string
		v int64
	}{
		{"length", st.Length}, {"pending", st.Pending}, {"ready", st.Ready}, {"in_flight", st.InFlight},
		{"retrying", st.Retrying}, {"consumers", st.Consumers}, {"dead_letters", st.DeadLetters},
		{"expired", st.Expired}, {"trimmed", st.Trimmed}, {"reclaimed", st.Reclaimed}, {"nacked", st.Nacked},
		{"dead_lettered", st.DeadLettered}, {"dead_dropped", st.DeadDropped},
	} {
		t.RawSetString(f.k, lua.LNumber(f.v))
	}
	if st.Kind == queue.KindBroadcast {
		groups := L.CreateTable(0, len(st.Groups))
		for _, g := range st.Groups {
			groups.RawSetString(g.Name, statsTable(L, g))
		}
		t.RawSetString("groups", groups)
	}
	return t
}

// keyText shows a table key in an error: strings quoted, others as Lua
// prints them.
func keyText(k lua.LValue) string {
	if s, ok := k.(lua.LString); ok {
		return strconv.Quote(string(s))
	}
	return k.String()
}
