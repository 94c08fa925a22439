package bindings

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// queueConsumer is one q:consume / q:subscribe: the core's consumer
// goroutine pops, and each message runs fn(msg) as a task of this runtime.
// For reliable and broadcast queues the task's success acks the message and
// its error nacks it after retry_delay (logged with its traceback and
// counted as a callback error). Loop only, except handle.
type queueConsumer struct {
	o     *queueObj
	label string // consumer name, or the broadcast group
	fn    *lua.LFunction
	task  string        // task name
	stall time.Duration // the loop counts as wedged after a resume this long

	stopFn   queue.StopFunc
	tasks    map[*runtime.Task]struct{} // handler tasks running
	stopping bool
	// halted is stopping for the consumer goroutine: set with it, so that
	// a message popped before the core consumer saw the stop is given back
	// rather than started.
	halted      atomic.Bool
	done        chan struct{} // closed once stopFn returned
	stopErr     error         // written before done is closed
	forgetClose func()
}

// maxConcurrency bounds consume's concurrency (each slot may hold a
// message and a task).
const maxConcurrency = 10000

var consumeOptions = runtime.NewOptSpec(runtime.Opt{Name: "concurrency", Kind: runtime.OptWhole, Min: 1, Max: maxConcurrency})

// readConsumeOptions reads consume's / subscribe's options table at n.
func readConsumeOptions(a runtime.Args, n int) int {
	conc := 1
	a.Options(n, consumeOptions, func(_ string, v lua.LValue) { conc = int(v.(lua.LNumber)) })
	return conc
}

func (b *queueBinding) installConsumerType() {
	L := b.rt.L
	mt := L.NewTypeMetatable(queueConsumerType)
	mt.RawSetString("__name", lua.LString(queueConsumerType))
	methods := L.NewTable()
	methods.RawSetString("stop", b.rt.Blocking(func(L *lua.LState) int {
		a := runtime.ArgsOf(L, queueConsumerType, "stop")
		return runtime.SelfAs[*queueConsumer](a, 1, queueConsumerType).stopLua(a)
	}))
	runtime.SetMethods(L, mt, methods)
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		c := runtime.SelfAs[*queueConsumer](runtime.ArgsOf(L, queueConsumerType, "__tostring"), 1, queueConsumerType)
		L.Push(lua.LString(fmt.Sprintf("%s(%q, %q)", queueConsumerType, c.o.name, c.label)))
		return 1
	}))
}

func (o *queueObj) newConsumer(label string, fn *lua.LFunction) *queueConsumer {
	c := &queueConsumer{o: o, label: label, fn: fn, task: "consumer " + o.name + "/" + label,
		tasks: map[*runtime.Task]struct{}{}, done: make(chan struct{})}
	c.stall = max(o.extendEvery()/2, 10*time.Millisecond)
	return c
}

func (c *queueConsumer) options(concurrency int) queue.ConsumeOptions {
	o := queue.ConsumeOptions{Concurrency: concurrency, OnError: c.onError}
	if c.o.kind == queue.KindReliable || c.o.kind == queue.KindBroadcast {
		// Extend in-flight messages only while the loop makes progress: a
		// wedged loop's messages go to another consumer after their
		// visibility timeout instead of being held forever.
		o.Alive = func() bool { return c.o.b.rt.Responsive(c.stall) }
	}
	return o
}

// q:consume(name, fn [, {concurrency = n}]) -> consumer. On a broadcast
// queue name is the subscriber group (q:subscribe).
func (o *queueObj) consume(a runtime.Args) int {
	label := a.Name(2, "consumer name")
	fn := a.Function(3)
	conc := readConsumeOptions(a, 4)
	if o.kind == queue.KindBroadcast {
		return o.startSubscribe(a, label, fn, conc)
	}
	c := o.newConsumer(label, fn)
	opts := c.options(conc)
	var stop queue.StopFunc
	var err error
	switch o.kind {
	case queue.KindPlain:
		stop, err = o.plain.Consume(opts, c.handle)
	case queue.KindDelay:
		stop, err = o.delay.Consume(opts, c.handle)
	case queue.KindPriority:
		stop, err = o.prio.Consume(opts, c.handle)
	default:
		stop, err = o.rel.Consume(opts, c.handle)
	}
	if err != nil {
		a.Fail("%s", err.Error())
	}
	a.L.Push(c.started(a.L, stop))
	return 1
}

// q:subscribe(group, fn [, {concurrency = n}]) -> consumer: fn(msg) runs
// for every message of the broadcast queue, once per group. It returns once
// the group exists (it receives every message pushed from then on).
func (o *queueObj) subscribe(a runtime.Args) int {
	group := a.Name(2, "group")
	fn := a.Function(3)
	return o.startSubscribe(a, group, fn, readConsumeOptions(a, 4))
}

func (o *queueObj) startSubscribe(a runtime.Args, group string, fn *lua.LFunction, conc int) int {
	c := o.newConsumer(group, fn)
	opts := c.options(conc)
	subscribe := func(ctx context.Context) (queue.StopFunc, error) {
		ctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
		defer cancel()
		return o.bc.Subscribe(ctx, group, opts, c.handle)
	}
	op := store.Work(subscribe)
	if o.b.svc.Inline {
		op = store.Local(func() (queue.StopFunc, error) { return subscribe(o.b.rt.Context()) })
	}
	return runtime.Run(o.b.rt, a.L, o.call(a.Fn), op, func(L *lua.LState, stop queue.StopFunc) []lua.LValue {
		return []lua.LValue{c.started(L, stop)}
	})
}

// started records a running consumer: it keeps the runtime busy (shield run
// stays up) and stops when the runtime closes. Loop only.
func (c *queueConsumer) started(L *lua.LState, stop queue.StopFunc) *lua.LUserData {
	rt := c.o.b.rt
	c.stopFn = stop
	rt.Ref()
	c.o.b.svc.addConsumer(c.o.entry, 1)
	// On close, handlers may finish within the shutdown grace; what is
	// still in flight when the runtime's context ends is released.
	c.forgetClose = rt.OnClose(func() { c.requestStop(rt.Context(), nil) })
	// Close returns once the core consumer has stopped, so every message it
	// gave back was sent before (Module.Close drains those sends).
	rt.OnStop(func() {
		select {
		case <-c.done:
		case <-time.After(runtime.KillWait):
			rt.Log().Warn("shield: queue consumer did not stop in time", "queue", c.o.name, "consumer", c.label)
		}
	})
	ud := L.NewUserData()
	ud.Value = c
	ud.Metatable = L.GetTypeMetatable(queueConsumerType)
	return ud
}

// handle is the core's handler, on the consumer goroutine: run the message
// on the loop. If the runtime has stopped, the message is given back.
func (c *queueConsumer) handle(d *queue.Delivery, done func(error)) {
	if c.halted.Load() || !c.o.b.rt.TryPost(func() { c.run(d, done) }) {
		c.unprocessed(d, done)
	}
}

// run starts the task for d. Loop only.
func (c *queueConsumer) run(d *queue.Delivery, done func(error)) {
	rt := c.o.b.rt
	var t *runtime.Task
	start := time.Now()
	t = rt.Spawn(c.task, c.fn, []lua.LValue{decode(d.Body)}, func(err error) {
		if t != nil { // nil: the task ended before Spawn returned
			delete(c.tasks, t)
		}
		if errors.Is(err, runtime.ErrClosed) || errors.Is(err, runtime.ErrInterrupted) {
			c.unprocessed(d, done) // the runtime ended the handler, not the message
			return
		}
		if f := rt.Observers().QueueHandled; f != nil {
			f(c.o.name, c.o.kind.String(), time.Since(start))
		}
		if err != nil {
			rt.CallbackFailed("queue consumer", c.o.name+"/"+c.label, err)
		}
		done(err)
	})
	if !t.Ended() {
		c.tasks[t] = struct{}{}
	}
}

// unprocessed handles a message whose task the closing runtime ended before
// it finished: a reliable or broadcast message stays in flight, and the
// consumer's stop releases it for immediate redelivery when the runtime's
// context ends (not a nack: the failure was not the message's); a popped
// plain, delay or priority message is given back (Unpop: to its place).
func (c *queueConsumer) unprocessed(d *queue.Delivery, done func(error)) {
	switch c.o.kind {
	case queue.KindReliable, queue.KindBroadcast:
		return
	}
	c.o.giveBack(d.Release(), "the shutdown ended a consumer's handler before it finished")
	done(nil)
}

// onError is told about the consumer's troubles (on its goroutine).
func (c *queueConsumer) onError(err error) {
	var he *queue.HandlerError
	if errors.As(err, &he) {
		return // logged, with its traceback, when its task ended
	}
	msg := "shield: queue consumer: " + err.Error()
	if errors.Is(err, queue.ErrNotHeld) {
		msg = "shield: queue consumer: a message in flight was given to another consumer (its visibility timeout passed)"
	}
	c.o.b.rt.Log().Warn(msg, "queue", c.o.name, "consumer", c.label, "error", err.Error())
}

// requestStop stops taking messages and ends the consumer in the
// background: running handlers may finish until ctx ends, then what is
// still in flight is released. Loop only; idempotent.
func (c *queueConsumer) requestStop(ctx context.Context, cancel context.CancelFunc) {
	if c.stopping {
		if cancel != nil {
			cancel()
		}
		return
	}
	rt := c.o.b.rt
	c.stopping = true
	c.halted.Store(true)
	c.forgetClose()
	rt.Unref()
	c.o.b.svc.addConsumer(c.o.entry, -1)
	stop := c.stopFn
	go func() {
		c.stopErr = stop(ctx)
		if cancel != nil {
			cancel()
		}
		close(c.done)
	}()
}

// defaultStopWait is how long consumer:stop() lets running handlers finish.
const defaultStopWait = 30 * time.Second

// consumer:stop([timeout_ms]) -> true | false, error: takes no new message,
// waits for the running handlers (up to timeout_ms, default 30000; their
// messages are then released for redelivery) and returns. Called from one
// of the consumer's own handlers, or outside any task, it does not wait.
// Idempotent.
func (c *queueConsumer) stopLua(a runtime.Args) int {
	rt := c.o.b.rt
	wait := defaultStopWait
	if a.L.Get(2) != lua.LNil {
		wait = millisArg(a, 2, "timeout")
	}
	if !c.stopping {
		ctx, cancel := context.WithTimeout(rt.Context(), wait)
		c.requestStop(ctx, cancel)
	}
	running := rt.CurrentTask(a.L)
	if _, own := c.tasks[running]; own || running == nil {
		a.L.Push(lua.LTrue)
		return 1
	}
	return rt.Block(a.L, queueConsumerType+":stop", func(w *runtime.Wait) func() {
		go func() {
			<-c.done
			w.Complete(func() ([]lua.LValue, error) {
				if c.stopErr != nil {
					return values(lua.LFalse, lua.LString(c.stopErr.Error()))
				}
				return values(lua.LTrue)
			})
		}()
		return nil
	})
}
