package bindings

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/codec"
	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/edge"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// The Lua types of the queue capability.
const (
	plainQueueType     = "shield.queue"
	delayQueueType     = "shield.delay_queue"
	priorityQueueType  = "shield.priority_queue"
	reliableQueueType  = "shield.reliable_queue"
	broadcastQueueType = "shield.broadcast_queue"
	queueHandleType    = "shield.queue_handle"
	deadLettersType    = "shield.dead_letters"
	queueConsumerType  = "shield.queue_consumer"
)

// Queues backs shield.queue, shield.delay_queue, shield.priority_queue,
// shield.reliable_queue and shield.broadcast_queue: the process-wide queue
// backend every runtime of the Module shares, the queue config, and the
// list of queues this process opened (for the ops facts, see Stats).
type Queues struct {
	Backend queue.Backend
	// Config gives the options of queues opened without their own.
	Config config.Queue
	// Inline is true when Backend is in-process (the memory backend).
	Inline bool

	mu     sync.Mutex
	opened map[string]*openedQueue
	bg     sync.WaitGroup // settles sent off the loop (see background)
}

// openedQueue is what Stats needs of one opened queue.
type openedQueue struct {
	kind      queue.Kind
	stats     func() *store.Op[queue.Stats]
	consumers int // consume / subscribe handles running in this process
}

// QueueInfo is the ops view of one queue opened in this process.
type QueueInfo struct {
	// Stats are the queue's facts as the backend sees them: on Redis,
	// across every process (Consumers counts the processes seen in the last
	// queue.ConsumerLiveness).
	queue.Stats
	// LocalConsumers counts the consume / subscribe handles running in this
	// process.
	LocalConsumers int
}

// register records an opened queue (first open wins; later ones are the
// same queue, the backend makes sure of that).
func (q *Queues) register(kind queue.Kind, name string, stats func() *store.Op[queue.Stats]) *openedQueue {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.opened == nil {
		q.opened = map[string]*openedQueue{}
	}
	e := q.opened[name]
	if e == nil {
		e = &openedQueue{kind: kind, stats: stats}
		q.opened[name] = e
	}
	return e
}

func (q *Queues) addConsumer(e *openedQueue, n int) {
	q.mu.Lock()
	e.consumers += n
	q.mu.Unlock()
}

// Stats returns the ops facts of every queue this process opened (through
// any of its runtimes), sorted by name: on Redis one pipeline for all of
// them. A queue whose stats could not be read is left out and its error
// joined into the returned error.
func (q *Queues) Stats(ctx context.Context) ([]QueueInfo, error) {
	q.mu.Lock()
	names := make([]string, 0, len(q.opened))
	for name := range q.opened {
		names = append(names, name)
	}
	sort.Strings(names)
	ops := make([]*store.Op[queue.Stats], len(names))
	local := make([]int, len(names))
	for i, name := range names {
		ops[i] = q.opened[name].stats()
		local[i] = q.opened[name].consumers
	}
	q.mu.Unlock()
	stats, failed := store.DoAll(ctx, ops)
	var errs error
	out := make([]QueueInfo, 0, len(ops))
	for i, st := range stats {
		if failed[i] != nil {
			errs = errors.Join(errs, failed[i])
			continue
		}
		out = append(out, QueueInfo{Stats: st, LocalConsumers: local[i]})
	}
	return out, errs
}

// settleTimeout bounds a settle sent off the loop.
const settleTimeout = 5 * time.Second

// background runs run off the loop with its own deadline (not the
// runtime's context: it must still go out while a runtime closes), for
// settles nobody waits for — a release when a task ended holding a
// message. Failures are logged; the message then comes back after its
// visibility timeout.
func (q *Queues) background(log *slog.Logger, what string, run func(ctx context.Context) error) {
	q.bg.Add(1)
	go func() {
		defer q.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		defer cancel()
		if err := run(ctx); err != nil && !errors.Is(err, queue.ErrSettled) && !errors.Is(err, queue.ErrNotHeld) {
			log.Warn("shield: queue: "+what+" failed", "error", err.Error())
		}
	}()
}

// Drain waits up to timeout for the settles background sent. The Module
// calls it before closing the backend.
func (q *Queues) Drain(timeout time.Duration) {
	done := make(chan struct{})
	go func() { q.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// queueBinding is the queue capability of one runtime.
type queueBinding struct {
	rt  *runtime.Runtime
	svc *Queues
	// objs maps each core queue this runtime opened to its Lua object, so
	// opening a name again returns the same object. Loop only.
	objs map[any]*lua.LUserData
	// leases are the reliable deliveries this runtime's tasks popped: the
	// core extends them through the loop and releases a task's when it
	// ends (the task-end hook of bit ended). Loop only.
	leases *queue.Leases
	ended  runtime.EndHook
}

// queueObj is one queue as scripts see it.
type queueObj struct {
	b     *queueBinding
	kind  queue.Kind
	typ   string
	name  string
	opts  queue.Options
	entry *openedQueue

	plain queue.Plain
	delay queue.Delay
	prio  queue.Priority
	rel   queue.Reliable
	bc    queue.Broadcast
}

// kindMethod is one Lua method of a queue type.
type kindMethod struct {
	name string
	fn   func(o *queueObj, a runtime.Args) int
}

func installQueues(rt *runtime.Runtime, lib *lua.LTable, q *Queues) {
	L := rt.L
	b := &queueBinding{rt: rt, svc: q, objs: map[any]*lua.LUserData{}}
	b.leases = queue.NewLeases(rt.Loop(), queue.LeaseOptions{Clock: rt.Clock(), Log: rt.Log(),
		Detach: func(what string, run func(context.Context) error) { q.background(rt.Log(), what, run) }})
	b.ended = rt.OnTaskEnd(func(t *runtime.Task) { b.leases.AbandonOwner(t, t.Name) })
	rt.OnClose(b.leases.Close)
	common := []kindMethod{
		{"pop", (*queueObj).pop}, {"length", (*queueObj).length}, {"consume", (*queueObj).consume},
		{"stats", (*queueObj).stats}, {"name", (*queueObj).nameOf},
	}
	purge := kindMethod{"purge", (*queueObj).purge}
	kinds := []struct {
		typ     string
		kind    queue.Kind
		methods []kindMethod
	}{
		{plainQueueType, queue.KindPlain, append([]kindMethod{
			{"push", (*queueObj).push}, {"push_batch", (*queueObj).pushBatch}, purge}, common...)},
		{delayQueueType, queue.KindDelay, append([]kindMethod{
			{"push", (*queueObj).push}, {"push_at", (*queueObj).pushAt},
			{"pending", (*queueObj).pending}, {"ready", (*queueObj).ready}, purge}, common...)},
		{priorityQueueType, queue.KindPriority, append([]kindMethod{{"push", (*queueObj).push}, purge}, common...)},
		{reliableQueueType, queue.KindReliable, append([]kindMethod{
			{"push", (*queueObj).push}, {"push_batch", (*queueObj).pushBatch}, purge,
			{"ack", (*queueObj).ack}, {"nack", (*queueObj).nack}, {"dead_letter", (*queueObj).deadLetter}}, common...)},
		{broadcastQueueType, queue.KindBroadcast, []kindMethod{
			{"push", (*queueObj).push}, {"subscribe", (*queueObj).subscribe}, {"consume", (*queueObj).consume},
			{"length", (*queueObj).length}, {"dead_letter", (*queueObj).deadLetter},
			{"stats", (*queueObj).stats}, {"name", (*queueObj).nameOf}}},
	}
	for _, k := range kinds {
		typ, kind := k.typ, k.kind
		mt := L.NewTypeMetatable(typ)
		mt.RawSetString("__name", lua.LString(typ))
		methods := L.NewTable()
		for _, m := range k.methods {
			fn, name := m.fn, m.name
			methods.RawSetString(name, rt.Blocking(func(L *lua.LState) int {
				a := runtime.ArgsOf(L, typ, name)
				return fn(runtime.SelfAs[*queueObj](a, 1, typ), a)
			}))
		}
		runtime.SetMethods(L, mt, methods)
		mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
			o := runtime.SelfAs[*queueObj](runtime.ArgsOf(L, typ, "__tostring"), 1, typ)
			L.Push(lua.LString(fmt.Sprintf("%s(%q)", o.typ, o.name)))
			return 1
		}))
		ctor := typ[len("shield."):]
		lib.RawSetString(ctor, L.NewFunction(func(L *lua.LState) int { return b.open(L, ctor, typ, kind) }))
	}
	b.installHandleType()
	b.installDeadLettersType()
	b.installConsumerType()
}

// shield.queue(name [, opts]) and the other constructors: the queue name of
// that kind (the same object when this runtime opened it before).
func (b *queueBinding) open(L *lua.LState, ctor, typ string, kind queue.Kind) int {
	a := runtime.ArgsOf(L, "shield", ctor)
	name := a.Name(1, "queue name")
	if name[0] == '}' { // the core refuses it too; say it as every constructor does
		a.Bad(1, "queue name must not start with '}'")
	}
	opts := b.options(a, 2, kind)
	o := &queueObj{b: b, kind: kind, typ: typ, name: name, opts: opts}
	var q any
	var err error
	var stats func() *store.Op[queue.Stats]
	be := b.svc.Backend
	switch kind {
	case queue.KindPlain:
		o.plain, err = be.Plain(name, opts)
		q, stats = o.plain, func() *store.Op[queue.Stats] { return o.plain.Stats() }
	case queue.KindDelay:
		o.delay, err = be.Delay(name, opts)
		q, stats = o.delay, func() *store.Op[queue.Stats] { return o.delay.Stats() }
	case queue.KindPriority:
		o.prio, err = be.Priority(name, opts)
		q, stats = o.prio, func() *store.Op[queue.Stats] { return o.prio.Stats() }
	case queue.KindReliable:
		o.rel, err = be.Reliable(name, opts)
		q, stats = o.rel, func() *store.Op[queue.Stats] { return o.rel.Stats() }
	case queue.KindBroadcast:
		o.bc, err = be.Broadcast(name, opts)
		q, stats = o.bc, func() *store.Op[queue.Stats] { return o.bc.Stats() }
	}
	if err != nil {
		a.Fail("%s", err.Error())
	}
	if ud := b.objs[q]; ud != nil {
		L.Push(ud)
		return 1
	}
	o.entry = b.svc.register(kind, name, stats)
	ud := L.NewUserData()
	ud.Value = o
	ud.Metatable = L.GetTypeMetatable(typ)
	b.objs[q] = ud
	L.Push(ud)
	return 1
}

// Queue options: every kind takes the first two; reliable and broadcast
// queues take the rest.
var (
	queueOptions = runtime.NewOptSpec(
		runtime.Opt{Name: "max_length", Kind: runtime.OptWhole, Min: 1, Max: maxQueueCount},
		runtime.Opt{Name: "message_ttl", Kind: runtime.OptMillis, Min: 0, Max: maxWaitMillis},
	)
	streamOptions = queueOptions.With(
		runtime.Opt{Name: "max_retries", Kind: runtime.OptWhole, Min: 0, Max: maxQueueCount},
		runtime.Opt{Name: "retry_delay", Kind: runtime.OptMillis, Min: 0, Max: maxWaitMillis},
		runtime.Opt{Name: "visibility_timeout", Kind: runtime.OptMillis, Min: 1, Max: maxWaitMillis},
		runtime.Opt{Name: "dead_letter", Kind: runtime.OptTable, Sub: runtime.NewOptSpec(
			runtime.Opt{Name: "enabled", Kind: runtime.OptBoolean},
			runtime.Opt{Name: "max_length", Kind: runtime.OptWhole, Min: 1, Max: maxQueueCount},
			runtime.Opt{Name: "ttl", Kind: runtime.OptMillis, Min: 0, Max: maxWaitMillis},
		)},
	)
)

// options reads a queue's options table at n (optional) over the queue
// config's defaults.
func (b *queueBinding) options(a runtime.Args, n int, kind queue.Kind) queue.Options {
	o := edge.QueueOptions(b.svc.Config)
	spec := queueOptions
	if kind == queue.KindReliable || kind == queue.KindBroadcast {
		spec = streamOptions
	}
	a.Options(n, spec, func(key string, v lua.LValue) {
		whole := func() int { return int(v.(lua.LNumber)) }
		switch key {
		case "max_length":
			o.MaxLength = whole()
		case "message_ttl":
			o.MessageTTL = runtime.Millis(v)
		case "max_retries":
			o.MaxRetries = whole()
		case "retry_delay":
			o.RetryDelay = runtime.Millis(v)
		case "visibility_timeout":
			o.VisibilityTimeout = runtime.Millis(v)
		case "dead_letter.enabled":
			o.DeadLetter.Enabled = v == lua.LTrue
		case "dead_letter.max_length":
			o.DeadLetter.MaxLength = whole()
		case "dead_letter.ttl":
			o.DeadLetter.TTL = runtime.Millis(v)
		}
	})
	return o
}

// maxQueueCount bounds integer options (lengths, retries).
const maxQueueCount = 1 << 31

// maxWaitMillis bounds every duration argument: about 31 years, like
// shield.sleep. Longer values are unit mistakes (or overflow time.Duration).
const maxWaitMillis = 1e12

// message encodes the message argument n; nil is refused (a pop returning
// nil means "no message").
func message(a runtime.Args, n int) []byte {
	v := a.L.Get(n)
	if v == lua.LNil {
		a.Bad(n, "message expected, got "+a.Got(n))
	}
	data, err := codec.Encode(v)
	if err != nil {
		a.Bad(n, err.Error())
	}
	return data
}

// millisArg reads a required duration in milliseconds (>= 0, fractions
// allowed) at n; what names it in errors.
func millisArg(a runtime.Args, n int, what string) time.Duration {
	v := a.Num(n)
	if v != v || v < 0 || v > maxWaitMillis {
		a.Bad(n, fmt.Sprintf("%s must be >= 0 milliseconds (and at most %.0f), got %s", what, float64(maxWaitMillis), lua.LNumber(v).String()))
	}
	return time.Duration(v * float64(time.Millisecond))
}

func (o *queueObj) call(fn string) string { return o.typ + ":" + fn }

func (o *queueObj) nameOf(a runtime.Args) int {
	a.L.Push(lua.LString(o.name))
	return 1
}
