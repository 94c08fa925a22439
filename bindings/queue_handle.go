package bindings

import (
	"errors"
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// queueHandle is a reliable delivery a task got from q:pop: a lease of the
// runtime's queue.Leases, which extends it through the loop until the task
// acks or nacks it, reports it lost, and releases it for immediate
// redelivery when the task ends without settling it (see queue.Leases).
type queueHandle struct {
	o *queueObj
	l *queue.Lease
}

func (b *queueBinding) installHandleType() {
	L := b.rt.L
	mt := L.NewTypeMetatable(queueHandleType)
	mt.RawSetString("__name", lua.LString(queueHandleType))
	methods := L.NewTable()
	for _, m := range []struct {
		name string
		fn   func(h *queueHandle, a runtime.Args) int
	}{
		{"ack", func(h *queueHandle, a runtime.Args) int { return h.ack(a, "ack") }},
		{"nack", func(h *queueHandle, a runtime.Args) int { return h.nack(a, "nack", 2) }},
		{"deliveries", (*queueHandle).deliveries},
		{"id", (*queueHandle).id},
	} {
		name, fn := m.name, m.fn
		methods.RawSetString(name, b.rt.Blocking(func(L *lua.LState) int {
			a := runtime.ArgsOf(L, queueHandleType, name)
			return fn(runtime.SelfAs[*queueHandle](a, 1, queueHandleType), a)
		}))
	}
	runtime.SetMethods(L, mt, methods)
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		h := runtime.SelfAs[*queueHandle](runtime.ArgsOf(L, queueHandleType, "__tostring"), 1, queueHandleType)
		L.Push(lua.LString(fmt.Sprintf("%s(%q, %q)", queueHandleType, h.o.name, h.l.Delivery().ID)))
		return 1
	}))
}

// handleFor is the convert of a reliable pop: msg, handle. The delivery
// becomes a lease of task (released when it ends; outside tasks, when the
// runtime closes). Loop only.
func (o *queueObj) handleFor(L *lua.LState, task *runtime.Task, d *queue.Delivery) ([]lua.LValue, error) {
	var owner any // nil outside tasks: released by Leases.Close
	if task != nil {
		owner = task
	}
	l, err := o.b.leases.Hold(d, owner)
	if err != nil {
		return nil, err
	}
	if task != nil {
		o.b.rt.MarkTask(task, o.b.ended)
	}
	ud := L.NewUserData()
	ud.Value = &queueHandle{o: o, l: l}
	ud.Metatable = L.GetTypeMetatable(queueHandleType)
	return []lua.LValue{decode(d.Body), ud}, nil
}

// extendEvery is how often the core extends a delivery in flight.
func (o *queueObj) extendEvery() time.Duration { return o.opts.ExtendInterval() }

// handleArg reads a handle argument of q:ack / q:nack and checks that it is
// one of this queue's.
func (o *queueObj) handleArg(a runtime.Args, n int) *queueHandle {
	ud, ok := a.L.Get(n).(*lua.LUserData)
	var h *queueHandle
	if ok {
		h, _ = ud.Value.(*queueHandle)
	}
	if h == nil {
		a.Bad(n, queueHandleType+" expected, got "+a.Got(n))
	}
	if h.o.rel != o.rel {
		a.Bad(n, fmt.Sprintf("handle of another queue (%q, not %q)", h.o.name, o.name))
	}
	return h
}

// q:ack(handle) on a reliable queue: handle:ack() for this queue's handles.
func (o *queueObj) ack(a runtime.Args) int { return o.handleArg(a, 2).ack(a, "ack") }

// q:nack(handle [, delay_ms]).
func (o *queueObj) nack(a runtime.Args) int { return o.handleArg(a, 2).nack(a, "nack", 3) }

// settleErr maps what a settle may answer: not_held is a value; settling
// twice and a foreign handle are errors.
func (h *queueHandle) settleErr(err error) ([]lua.LValue, error) {
	switch {
	case errors.Is(err, queue.ErrNotHeld):
		return reason("not_held")
	case errors.Is(err, queue.ErrSettled):
		return nil, fmt.Errorf("the message %s was already acked, nacked or released through this handle", h.l.Delivery().ID)
	case errors.Is(err, queue.ErrForeign):
		return nil, fmt.Errorf("handle of another queue")
	}
	return nil, err
}

// handle:ack() -> true | nil, "not_held" (its visibility timeout passed
// and another consumer got the message). Acking twice raises.
func (h *queueHandle) ack(a runtime.Args, fn string) int {
	if h.l.Settled() {
		a.Fail("the message %s was already acked, nacked or released through this handle", h.l.Delivery().ID)
	}
	return runtime.RunOutcome(h.o.b.rt, a.L, h.o.call(fn), h.l.Ack(), func(_ *lua.LState, _ struct{}, err error) ([]lua.LValue, error) {
		if err != nil {
			return h.settleErr(err)
		}
		return values(lua.LTrue)
	})
}

// handle:nack([delay_ms]) -> true (redelivered after delay, default
// retry_delay) | true, "dead_letter" (that was its last allowed delivery:
// it moved to the dead letters) | true, "dropped" (the same with dead
// letters disabled: the message is gone) | nil, "not_held".
func (h *queueHandle) nack(a runtime.Args, fn string, n int) int {
	delay := h.o.opts.RetryDelay
	if a.L.Get(n) != lua.LNil {
		delay = millisArg(a, n, "delay")
	}
	if h.l.Settled() {
		a.Fail("the message %s was already acked, nacked or released through this handle", h.l.Delivery().ID)
	}
	return runtime.RunOutcome(h.o.b.rt, a.L, h.o.call(fn), h.l.Nack(delay), func(_ *lua.LState, r queue.NackResult, err error) ([]lua.LValue, error) {
		switch {
		case err != nil:
			return h.settleErr(err)
		case r.Dropped:
			return values(lua.LTrue, lua.LString("dropped"))
		case r.DeadLettered:
			return values(lua.LTrue, lua.LString("dead_letter"))
		}
		return values(lua.LTrue)
	})
}

// handle:deliveries() -> how many times the message was delivered, this
// delivery included.
func (h *queueHandle) deliveries(a runtime.Args) int {
	a.L.Push(lua.LNumber(h.l.Delivery().Deliveries))
	return 1
}

// handle:id() -> the message id.
func (h *queueHandle) id(a runtime.Args) int {
	a.L.Push(lua.LString(h.l.Delivery().ID))
	return 1
}

// ---- dead letters

type deadLetters struct {
	o *queueObj
	l queue.DeadLetters
}

func (b *queueBinding) installDeadLettersType() {
	L := b.rt.L
	mt := L.NewTypeMetatable(deadLettersType)
	mt.RawSetString("__name", lua.LString(deadLettersType))
	methods := L.NewTable()
	for _, m := range []struct {
		name string
		fn   func(dl *deadLetters, a runtime.Args) int
	}{
		{"range", (*deadLetters).rangeOf}, {"length", (*deadLetters).length},
		{"requeue", (*deadLetters).requeue}, {"requeue_all", (*deadLetters).requeueAll},
		{"purge", (*deadLetters).purge}, {"delete", (*deadLetters).delete},
	} {
		name, fn := m.name, m.fn
		methods.RawSetString(name, b.rt.Blocking(func(L *lua.LState) int {
			a := runtime.ArgsOf(L, deadLettersType, name)
			return fn(runtime.SelfAs[*deadLetters](a, 1, deadLettersType), a)
		}))
	}
	runtime.SetMethods(L, mt, methods)
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		dl := runtime.SelfAs[*deadLetters](runtime.ArgsOf(L, deadLettersType, "__tostring"), 1, deadLettersType)
		L.Push(lua.LString(fmt.Sprintf("%s(%q)", deadLettersType, dl.o.name)))
		return 1
	}))
}

// q:dead_letter() -> the queue's dead letters.
func (o *queueObj) deadLetter(a runtime.Args) int {
	dl := &deadLetters{o: o}
	if o.kind == queue.KindReliable {
		dl.l = o.rel.DeadLetters()
	} else {
		dl.l = o.bc.DeadLetters()
	}
	ud := a.L.NewUserData()
	ud.Value = dl
	ud.Metatable = a.L.GetTypeMetatable(deadLettersType)
	a.L.Push(ud)
	return 1
}

func (dl *deadLetters) call(fn string) string { return deadLettersType + ":" + fn }

// countArg reads an optional whole number >= 0 at n.
func countArg(a runtime.Args, n int, what string, def int) int {
	if a.L.Get(n) == lua.LNil {
		return def
	}
	v := a.Num(n)
	if v != v || v < 0 || v > maxQueueCount || v != float64(int64(v)) {
		a.Bad(n, fmt.Sprintf("%s must be a whole number >= 0, got %s", what, lua.LNumber(v).String()))
	}
	return int(v)
}

// dead:range([start=0 [, count=100]]) -> {{id, message_id, message,
// deliveries, at, group}, ...}, oldest first.
func (dl *deadLetters) rangeOf(a runtime.Args) int {
	start := countArg(a, 2, "start", 0)
	count := countArg(a, 3, "count", 100)
	return runtime.RunOutcome(dl.o.b.rt, a.L, dl.call("range"), dl.l.Range(start, count), func(L *lua.LState, ls []queue.DeadLetter, err error) ([]lua.LValue, error) {
		if err != nil {
			return nil, err
		}
		out := L.CreateTable(len(ls), 0)
		for _, d := range ls {
			t := L.CreateTable(0, 6)
			t.RawSetString("id", lua.LString(d.ID))
			t.RawSetString("message_id", lua.LString(d.MessageID))
			t.RawSetString("message", decode(d.Body))
			t.RawSetString("deliveries", lua.LNumber(d.Deliveries))
			t.RawSetString("at", lua.LNumber(d.At.UnixMilli()))
			if d.Group != "" {
				t.RawSetString("group", lua.LString(d.Group))
			}
			out.Append(t)
		}
		return values(out)
	})
}

func (dl *deadLetters) length(a runtime.Args) int {
	return runtime.RunOutcome(dl.o.b.rt, a.L, dl.call("length"), dl.l.Length(), counted)
}

// dead:requeue(id) -> true | nil, "not_found" | nil, "full".
func (dl *deadLetters) requeue(a runtime.Args) int {
	id := a.Name(2, "dead letter id")
	return runtime.RunOutcome(dl.o.b.rt, a.L, dl.call("requeue"), dl.l.Requeue(id), func(_ *lua.LState, _ struct{}, err error) ([]lua.LValue, error) {
		switch {
		case errors.Is(err, queue.ErrNotFound):
			return reason("not_found")
		case errors.Is(err, queue.ErrFull):
			return reason("full")
		case err != nil:
			return nil, err
		}
		return values(lua.LTrue)
	})
}

// dead:requeue_all() -> n moved | n, "full" (some stayed: the queue is full).
func (dl *deadLetters) requeueAll(a runtime.Args) int {
	return runtime.RunOutcome(dl.o.b.rt, a.L, dl.call("requeue_all"), dl.l.RequeueAll(), func(_ *lua.LState, n int, err error) ([]lua.LValue, error) {
		switch {
		case errors.Is(err, queue.ErrFull):
			return values(lua.LNumber(n), lua.LString("full"))
		case err != nil:
			return nil, err
		}
		return values(lua.LNumber(n))
	})
}

func (dl *deadLetters) purge(a runtime.Args) int {
	return runtime.RunOutcome(dl.o.b.rt, a.L, dl.call("purge"), dl.l.Purge(), counted)
}

// dead:delete(id, ...) -> n dropped (ids that are not dead letters count 0).
func (dl *deadLetters) delete(a runtime.Args) int {
	n := a.L.GetTop()
	if n < 2 {
		a.Bad(2, "dead letter id expected")
	}
	ids := make([]string, 0, n-1)
	for i := 2; i <= n; i++ {
		ids = append(ids, a.Name(i, "dead letter id"))
	}
	return runtime.RunOutcome(dl.o.b.rt, a.L, dl.call("delete"), dl.l.Delete(ids...), counted)
}
