package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Op is one operation of a capability as a value, in the manner of a go-redis
// command. Building it does nothing; it runs once, either alone with Do or
// with other operations in one pipeline through a Batch. The Lua runtime
// sends the operations its tasks issue in one loop turn as one Batch, so
// concurrent tasks share round trips.
//
// An Op is of one Kind:
//   - KindLocal: in-process work that never waits on I/O (the memory
//     backends). The runtime runs it inline on its loop.
//   - KindRedis: commands for one client, sent in order on one connection
//     (per Cluster node), and a decoder that reads their replies once they
//     are in. Commands of one Op must not depend on each other's replies;
//     use a script for read-then-write.
//   - KindWork: Go code that may wait on the network, for operations that
//     need several dependent round trips. The runtime runs it on a worker
//     goroutine.
//
// The zero Op is invalid; use Local, LocalRun, Failed, Commands or Work.
type Op[T any] struct {
	kind    Kind
	settled bool
	// What each kind runs, each in the Op's allocation (see localOp and
	// redisOp): a local Op is small, which matters where the memory
	// backends serve many per second from a large heap, each byte
	// allocated bringing the next GC cycle closer.
	local localRunner[T]
	work  func(ctx context.Context) (T, error)
	redis *redisOp[T]

	val T
	err error
}

// localRunner is the work of a local Op.
type localRunner[T any] interface{ runLocal() (T, error) }

// localOp is a local Op and its runner in one allocation.
type localOp[T any, R interface{ Run() (T, error) }] struct {
	op Op[T]
	r  R
}

func (o *localOp[T, R]) runLocal() (T, error) { return o.r.Run() }

// funcRunner runs a local Op built by Local.
type funcRunner[T any] func() (T, error)

func (f funcRunner[T]) Run() (T, error) { return f() }

// redisOp is a Redis Op and its commands in one allocation.
type redisOp[T any] struct {
	op     Op[T]
	c      redis.UniversalClient
	cmds   []redis.Cmder
	decode func() (T, error)
	// durable is set by Durable only (a pointer: the Ops of the default,
	// without durability, stay as small as they were).
	durable *durableOp
}

// Kind says how an Op runs.
type Kind uint8

// The kinds of Op.
const (
	KindLocal Kind = iota + 1
	KindRedis
	KindWork
)

// Local returns an Op that runs fn in the calling goroutine. fn must not
// wait on I/O.
func Local[T any](fn func() (T, error)) *Op[T] { return LocalRun[T](funcRunner[T](fn)) }

// LocalRun returns an Op that runs r.Run in the calling goroutine, like
// Local; r must not wait on I/O. The Op and r make one allocation, where
// Local's fn, a closure over the operation's arguments, is a second one:
// a hot in-process operation passes its arguments in r instead.
func LocalRun[T any, R interface{ Run() (T, error) }](r R) *Op[T] {
	o := &localOp[T, R]{r: r}
	o.op.kind, o.op.local = KindLocal, o
	return &o.op
}

// Failed returns a local Op that fails with err: an operation refused before
// any I/O (an invalid argument).
func Failed[T any](err error) *Op[T] {
	return &Op[T]{kind: KindLocal, settled: true, err: err}
}

// Work returns an Op that runs fn, which may wait on the network, with the
// context of Do (or of the runtime).
func Work[T any](fn func(ctx context.Context) (T, error)) *Op[T] {
	return &Op[T]{kind: KindWork, work: fn}
}

// Commands returns an Op that sends cmds on c and then calls decode, which
// reads the commands' replies (their Err included). Build cmds with
// redis.NewXxxCmd(ctx, ...) and Script.Cmd; ctx there is only what go-redis
// hooks see: the Op runs with the context of Do or of the batch.
func Commands[T any](c redis.UniversalClient, decode func() (T, error), cmds ...redis.Cmder) *Op[T] {
	o := &redisOp[T]{c: c, cmds: cmds, decode: decode}
	o.op.kind, o.op.redis = KindRedis, o
	return &o.op
}

// Kind returns the Op's kind.
func (o *Op[T]) Kind() Kind { return o.kind }

// Do runs the Op and returns its result. A Redis Op is one round trip (one
// pipeline when it has several commands); a script the server lost
// (NOSCRIPT: a restart, SCRIPT FLUSH, a failover) is loaded and sent again.
// With ctx already done, Do fails with ctx's cause (context.Cause: the
// runtime's context ends with ErrModuleClosed) without running the op; so
// does an Op built by Failed.
// Do may be called once; later calls return the first result.
func (o *Op[T]) Do(ctx context.Context) (T, error) {
	if o.settled {
		if o.kind == KindLocal && o.local == nil && ctx.Err() != nil {
			// A Failed Op (refused before any I/O, often because its backend
			// is closed) still reports why ctx ended, as every other Op:
			// ErrModuleClosed rather than a closed engine's or bus's error.
			o.err = context.Cause(ctx)
		}
		return o.val, o.err
	}
	if ctx.Err() != nil && o.kind != KindRedis {
		o.settled, o.err = true, context.Cause(ctx) // ErrModuleClosed once the module closed
		return o.val, o.err
	}
	switch o.kind {
	case KindLocal:
		o.val, o.err = o.local.runLocal()
	case KindWork:
		o.val, o.err = o.work(ctx)
	case KindRedis:
		var b Batch
		b.Add(o)
		b.Exec(ctx)
		return o.val, o.err
	default:
		o.err = errors.New("store: invalid Op")
	}
	o.settled = true
	return o.val, o.err
}

// Result returns what the Op produced, once a Batch it was added to has
// run (or Do returned).
func (o *Op[T]) Result() (T, error) {
	if !o.settled {
		var zero T
		return zero, errors.New("store: Op result read before it ran")
	}
	return o.val, o.err
}

// Pending is what a Batch holds: an *Op[T] of KindRedis.
type Pending interface {
	client() redis.UniversalClient
	commands() []redis.Cmder
	durability() Durability
	setWaitErr(error)
	settle()
}

func (o *Op[T]) client() redis.UniversalClient { return o.redis.c }
func (o *Op[T]) commands() []redis.Cmder       { return o.redis.cmds }

// settle decodes the replies. The decoder reads every command's outcome,
// a failed connection included (go-redis records it on each command), so
// its errors can say which operation and key failed. A write marked Durable
// that succeeded fails when its WAIT counted too few replicas.
func (o *Op[T]) settle() {
	if o.settled {
		return
	}
	o.settled = true
	o.val, o.err = o.redis.decode()
	if d := o.redis.durable; o.err == nil && d != nil && d.err != nil {
		o.err = d.err
	}
}

// Batch sends the commands of many Redis Ops together: one pipeline per
// client, in the order the Ops were added (so each caller's order holds),
// and settles every Op. The zero Batch is ready to use; a Batch is not safe
// for concurrent use.
type Batch struct {
	ops []Pending
}

// Add queues p (an *Op[T] of KindRedis).
func (b *Batch) Add(p Pending) { b.ops = append(b.ops, p) }

// Len returns the number of queued Ops.
func (b *Batch) Len() int { return len(b.ops) }

// Reset empties the batch, keeping its storage.
func (b *Batch) Reset() {
	clear(b.ops)
	b.ops = b.ops[:0]
}

// Exec sends every queued Op's commands and settles each Op, then empties
// the batch. Scripts the server does not have (NOSCRIPT) are loaded and
// their commands sent once more. A failure of the connection settles the
// Ops it hit with that error. Exec returns within OpTimeout of its clients
// (or ctx's earlier deadline), whatever Redis does: a Redis that does not
// answer fails the Ops with a timeout then. When an Op is marked Durable, a
// WAIT follows the commands on their connection (see Durability).
func (b *Batch) Exec(ctx context.Context) {
	if len(b.ops) == 0 {
		return
	}
	if ctx.Err() != nil {
		// Nothing is sent: the Ops fail with why ctx ended (ErrModuleClosed
		// once the module closed, not the closed client's error).
		cause := context.Cause(ctx)
		for _, p := range b.ops {
			for _, cmd := range p.commands() {
				cmd.SetErr(cause)
			}
			p.settle()
		}
		b.Reset()
		return
	}
	var clients []redis.UniversalClient
	var budget time.Duration
	for _, p := range b.ops {
		if c := p.client(); !containsClient(clients, c) {
			clients = append(clients, c)
			budget = max(budget, OpTimeout(c))
		}
	}
	ctx, cancel := withBudget(ctx, budget)
	defer cancel()
	start := time.Now()
	for _, c := range clients {
		var (
			cmds []redis.Cmder
			wait Durability
		)
		for _, p := range b.ops {
			if p.client() == c {
				cmds = append(cmds, p.commands()...)
				wait = wait.max(p.durability())
			}
		}
		if wait.On() {
			b.execDurable(ctx, c, wait)
		} else {
			sendReloading(ctx, c, cmds)
		}
		if ctx.Err() != nil {
			noAnswer(cmds, time.Since(start))
		}
	}
	for _, p := range b.ops {
		p.settle()
	}
	b.Reset()
}

// DoAll runs ops together: the Redis ones in one Batch (a pipeline per
// client), the others one by one. It returns each Op's result and error,
// in order.
func DoAll[T any](ctx context.Context, ops []*Op[T]) ([]T, []error) {
	var b Batch
	for _, op := range ops {
		if op.Kind() == KindRedis {
			b.Add(op)
		}
	}
	b.Exec(ctx)
	vals, errs := make([]T, len(ops)), make([]error, len(ops))
	for i, op := range ops {
		vals[i], errs[i] = op.Do(ctx) // runs a local op; returns a batched op's result
	}
	return vals, errs
}

// ErrModuleClosed is the cause of the context a module's runtimes run
// their operations under once the module is closed (shieldglobal's
// ErrModuleClosed is this error): an operation of a runtime left open after
// Module.Close fails with it, on every backend.
var ErrModuleClosed = errors.New("shield: module closed")

// ErrNoAnswer is wrapped by the error of an operation Redis did not answer
// before its deadline (OpTimeout, or a shorter one of the caller's): a
// frozen or blackholed server, a dead address. Its effect on the server is
// unknown (it may still run when the server wakes up).
var ErrNoAnswer = errors.New("Redis did not answer")

// noAnswer words the timeouts of cmds, whose deadline passed after waited.
func noAnswer(cmds []redis.Cmder, waited time.Duration) {
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !isReplyError(err) && !errors.Is(err, ErrNoAnswer) && !errors.Is(err, context.Canceled) {
			cmd.SetErr(fmt.Errorf("%w within %v: %w", ErrNoAnswer, waited.Round(time.Millisecond), err))
		}
	}
}

// OpTimeout is the hard bound of one Redis operation (one round trip of a
// Batch) on c: its read timeout, global.redis.read_timeout for the clients
// NewClient builds (3 s by default). Batch.Exec and Op.Do run within it:
// dialing a new connection, go-redis's retries of a failed connection and
// the reply all happen before that deadline, so a frozen or blackholed
// Redis costs one read timeout, not MaxRetries+1 of them plus dials.
// 0 means no bound (a host's client without a read timeout). The bound is
// exact for NewClient's clients (ContextTimeoutEnabled); a host's client
// (global.redis.inherit) without ContextTimeoutEnabled may finish a read
// already in flight past it, by at most its own ReadTimeout.
func OpTimeout(c redis.UniversalClient) time.Duration {
	var d time.Duration
	switch c := c.(type) {
	case *redis.Client:
		d = c.Options().ReadTimeout
	case *redis.ClusterClient:
		d = c.Options().ReadTimeout
	}
	return max(d, 0)
}

// Bound returns ctx with OpTimeout(c) as its deadline (unless ctx has an
// earlier one): for the round trips a capability sends on c outside a
// Batch (transactions, a KindWork op's own commands), so they keep the
// bound every Batch has.
func Bound(ctx context.Context, c redis.UniversalClient) (context.Context, context.CancelFunc) {
	return withBudget(ctx, OpTimeout(c))
}

func withBudget(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

func containsClient(cs []redis.UniversalClient, c redis.UniversalClient) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// send runs cmds as one round trip. Each command records its own outcome.
// go-redis does not record a connection failure on the commands of a
// pipeline that never got a connection: those get Exec's error here (a
// command that went out before the connection broke is reported failed too,
// which is what any timeout is: its effect is unknown).
func send(ctx context.Context, c redis.UniversalClient, cmds []redis.Cmder) {
	if len(cmds) == 1 {
		_ = c.Process(ctx, cmds[0])
		return
	}
	pipe := c.Pipeline()
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, cmd)
	}
	if _, err := pipe.Exec(ctx); err != nil && !isReplyError(err) {
		for _, cmd := range cmds {
			if cmd.Err() == nil {
				cmd.SetErr(err)
			}
		}
	}
}

// noScript returns the script commands the server refused with NOSCRIPT,
// with their errors cleared for a second attempt.
func noScript(cmds []redis.Cmder) []redis.Cmder {
	var lost []redis.Cmder
	for _, cmd := range cmds {
		if _, ok := cmd.(*ScriptCmd); ok && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			cmd.SetErr(nil)
			lost = append(lost, cmd)
		}
	}
	return lost
}

// reload loads the scripts of cmds (each once; on Cluster on every master).
// On failure the commands keep the load error.
func reload(ctx context.Context, c redis.UniversalClient, cmds []redis.Cmder) error {
	var done []*Script
	for _, cmd := range cmds {
		s := cmd.(*ScriptCmd).script
		if containsScript(done, s) {
			continue
		}
		done = append(done, s)
		if err := s.s.Load(ctx, c).Err(); err != nil {
			err = fmt.Errorf("loading script %s after NOSCRIPT: %w", s.name, err)
			for _, cmd := range cmds {
				cmd.SetErr(err)
			}
			return err
		}
	}
	return nil
}

func containsScript(ss []*Script, s *Script) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Script is a Redis script that Ops run with EVALSHA; a Batch or Do that
// gets NOSCRIPT loads it and sends the command again. Declare scripts as
// package-level variables from go:embed sources.
type Script struct {
	name string
	s    *redis.Script
	hash any // the SHA1, boxed once
}

// NewScript returns the script src; name (its file, "rank/update.lua")
// appears in errors.
func NewScript(name, src string) *Script {
	rs := redis.NewScript(src)
	return &Script{name: name, s: rs, hash: rs.Hash()}
}

// Name returns the script's name.
func (s *Script) Name() string { return s.name }

// Hash returns the script's SHA1.
func (s *Script) Hash() string { return s.s.Hash() }

// Cmd returns an EVALSHA of the script with keys and args, to hand to
// Commands; read its reply with its *redis.Cmd methods or ReadReply.
func (s *Script) Cmd(keys []string, args ...any) *ScriptCmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, argEvalSha, s.hash, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	return &ScriptCmd{Cmd: redis.NewCmd(context.Background(), a...), script: s}
}

// CmdBoxed is Cmd with keys already boxed: a caller that sends the same
// keys often (a lock's seven) boxes them once instead of once per call.
func (s *Script) CmdBoxed(keys []any, args ...any) *ScriptCmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, argEvalSha, s.hash, len(keys))
	a = append(a, keys...)
	a = append(a, args...)
	return &ScriptCmd{Cmd: redis.NewCmd(context.Background(), a...), script: s}
}

var argEvalSha any = "evalsha"

// Run runs the script once with keys and args, outside any Op (tests and
// one-off calls).
func (s *Script) Run(ctx context.Context, c redis.UniversalClient, keys []string, args ...any) *ScriptCmd {
	cmd := s.Cmd(keys, args...)
	_, _ = Commands(c, func() (struct{}, error) { return struct{}{}, nil }, cmd).Do(ctx)
	return cmd
}

// ScriptCmd is an EVALSHA command of a Script.
type ScriptCmd struct {
	*redis.Cmd
	script *Script
}

// Script returns the script the command runs.
func (c *ScriptCmd) Script() *Script { return c.script }

// isReplyError reports an error the server answered (redis.Nil, or an error
// reply), as opposed to a failed connection.
func isReplyError(err error) bool {
	if errors.Is(err, redis.Nil) {
		return true
	}
	var re redis.Error
	return errors.As(err, &re)
}
