package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Durability asks that a write be confirmed by replicas before its Op
// succeeds (global.redis.wait_replicas and wait_timeout). Redis replicates
// asynchronously: a master that acknowledged a write and failed over before
// its replica had it loses the write. With Durability on, a Batch sends
// WAIT Replicas Timeout right after the writes, on the same connection (WAIT
// counts the replicas that hold that connection's last write; it is not
// allowed inside scripts), and an Op marked Durable succeeds only when WAIT
// counted at least Replicas replicas. On a Cluster the writes marked Durable
// go to the master of their key on a pipeline of its own, one WAIT per
// master. The zero Durability is off: nothing is sent.
type Durability struct {
	// Replicas is how many replicas must hold the write; 0 is off.
	Replicas int
	// Timeout bounds WAIT; it must be at least 1 ms (WAIT 0 blocks for ever)
	// and below the client's read timeout.
	Timeout time.Duration
}

// On reports whether d asks for confirmation.
func (d Durability) On() bool { return d.Replicas > 0 }

// max is the stronger of d and e: several Ops of one round trip share one WAIT.
func (d Durability) max(e Durability) Durability {
	return Durability{Replicas: max(d.Replicas, e.Replicas), Timeout: max(d.Timeout, e.Timeout)}
}

func (d Durability) waitCmd() *redis.IntCmd {
	return redis.NewIntCmd(context.Background(), "wait", d.Replicas, max(d.Timeout.Milliseconds(), 1))
}

// ErrNotDurable is matched (errors.Is) by the error of a write marked
// Durable that the replicas did not confirm: the master applied it, but it
// may be lost on a failover. The error is a *NotDurableError.
var ErrNotDurable = errors.New("store: write not confirmed by the replicas")

// NotDurableError is the error of a write marked Durable that fewer than
// Want replicas confirmed within Timeout. The master applied the write (and
// answered it; the Op's value is that answer).
type NotDurableError struct {
	Want, Got int
	Timeout   time.Duration
	// Err is WAIT's own failure (a broken connection: Got is then unknown, 0).
	Err error
}

func (e *NotDurableError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("written on the master, but not confirmed by the replicas (WAIT failed: %v): it may be lost on a failover", e.Err)
	}
	return fmt.Sprintf("written on the master, but confirmed by %d of %d replicas within %d ms (global.redis.wait_replicas): it may be lost on a failover",
		e.Got, e.Want, e.Timeout.Milliseconds())
}

// Is makes errors.Is(err, ErrNotDurable) true.
func (e *NotDurableError) Is(target error) bool { return target == ErrNotDurable }

func (e *NotDurableError) Unwrap() error { return e.Err }

// waitResult is the outcome of a WAIT for the writes sent before it.
func waitResult(d Durability, w *redis.IntCmd) error {
	n, err := w.Result()
	switch {
	case err != nil:
		return &NotDurableError{Want: d.Replicas, Timeout: d.Timeout, Err: err}
	case n < int64(d.Replicas):
		return &NotDurableError{Want: d.Replicas, Got: int(n), Timeout: d.Timeout}
	}
	return nil
}

// Durable marks a Redis Op as a write that must be confirmed by d.Replicas
// replicas (see Durability) and returns it; with d off, or on an Op that is
// not of KindRedis, it does nothing. Its commands must all address one hash
// slot, named by the first command's first key. The Op's error is then a
// *NotDurableError when its commands succeeded but WAIT counted too few
// replicas; an error of the commands themselves is returned as before.
func (o *Op[T]) Durable(d Durability) *Op[T] {
	if d.On() && o.kind == KindRedis {
		o.redis.durable = &durableOp{d: d}
	}
	return o
}

// durableOp is what a Durable Op needs: its Durability and what its WAIT said.
type durableOp struct {
	d   Durability
	err error
}

func (o *Op[T]) durability() Durability {
	if d := o.redis.durable; d != nil {
		return d.d
	}
	return Durability{}
}

func (o *Op[T]) setWaitErr(err error) { o.redis.durable.err = err }

// execDurable sends the commands of b's Ops on c when at least one of them
// is marked Durable (w is the strongest marking).
func (b *Batch) execDurable(ctx context.Context, c redis.UniversalClient, w Durability) {
	var ops []Pending
	for _, p := range b.ops {
		if p.client() == c {
			ops = append(ops, p)
		}
	}
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		// One connection: the Ops that need no WAIT ride along.
		sendWaiting(ctx, c, ops, w)
		return
	}
	// On a Cluster a keyless WAIT would go to any master: each durable Op
	// goes to its key's master on that node's own pipeline, followed by one
	// WAIT there; the others take the cluster pipeline as usual.
	var (
		plain  []redis.Cmder
		nodes  []*redis.Client
		groups [][]Pending
	)
	for _, p := range ops {
		if !p.durability().On() {
			plain = append(plain, p.commands()...)
			continue
		}
		node, err := nodeOf(ctx, cc, p.commands())
		if err != nil {
			for _, cmd := range p.commands() {
				cmd.SetErr(err)
			}
			continue
		}
		i := 0
		for i < len(nodes) && nodes[i] != node {
			i++
		}
		if i == len(nodes) {
			nodes, groups = append(nodes, node), append(groups, nil)
		}
		groups[i] = append(groups[i], p)
	}
	var wg sync.WaitGroup
	if len(plain) > 0 {
		wg.Go(func() { sendReloading(ctx, c, plain) })
	}
	for i, node := range nodes {
		wg.Go(func() {
			sendWaiting(ctx, node, groups[i], w)
			for _, p := range groups[i] {
				for _, cmd := range p.commands() {
					// The slot moved (a failover or resharding: the
					// command did not run there) or the node is
					// unreachable: reload the slot map, so the next batch
					// asks the right node.
					if err := cmd.Err(); err != nil && !isReplyError(err) || isMoved(err) {
						cc.ReloadState(ctx)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func isMoved(err error) bool {
	_, moved := redis.IsMovedError(err)
	return moved
}

// sendReloading sends cmds on c, and once more those the server refused
// with NOSCRIPT after loading their scripts.
func sendReloading(ctx context.Context, c redis.UniversalClient, cmds []redis.Cmder) {
	send(ctx, c, cmds)
	if lost := noScript(cmds); len(lost) > 0 {
		if err := reload(ctx, c, lost); err == nil {
			send(ctx, c, lost)
		}
	}
}

// sendWaiting sends the commands of ops and a WAIT on one connection of c
// (a Client, or a Cluster node's), and records on each Op marked Durable
// the outcome of the WAIT that followed its commands' last sending.
func sendWaiting(ctx context.Context, c redis.UniversalClient, ops []Pending, w Durability) {
	var cmds []redis.Cmder
	for _, p := range ops {
		cmds = append(cmds, p.commands()...)
	}
	wait := w.waitCmd()
	send(ctx, c, append(cmds, wait))
	first := waitResult(w, wait)
	var again error // the second WAIT's outcome, for Ops sent again
	lost := noScript(cmds)
	if len(lost) > 0 {
		if err := reload(ctx, c, lost); err == nil {
			wait2 := w.waitCmd()
			send(ctx, c, append(lost, wait2))
			again = waitResult(w, wait2)
		}
	}
	for _, p := range ops {
		if !p.durability().On() {
			continue
		}
		err := first
		if len(lost) > 0 && sentAgain(p.commands(), lost) {
			err = again
		}
		p.setWaitErr(err)
	}
}

func sentAgain(cmds, lost []redis.Cmder) bool {
	for _, c := range cmds {
		for _, l := range lost {
			if c == l {
				return true
			}
		}
	}
	return false
}

// nodeOf returns the Cluster master that owns the first key of cmds.
func nodeOf(ctx context.Context, cc *redis.ClusterClient, cmds []redis.Cmder) (*redis.Client, error) {
	key, ok := firstKey(cmds)
	if !ok {
		return nil, errors.New("store: a write marked Durable has no key to route its WAIT by")
	}
	return cc.MasterForKey(ctx, key)
}

// firstKey is the first key of cmds[0]: a script's KEYS[1], else the
// command's first argument (every command a capability marks Durable has its
// key there: SET, DEL, XADD ...).
func firstKey(cmds []redis.Cmder) (string, bool) {
	if len(cmds) == 0 {
		return "", false
	}
	args := cmds[0].Args()
	pos := 1
	if _, ok := cmds[0].(*ScriptCmd); ok {
		if len(args) < 4 || fmt.Sprint(args[2]) == "0" {
			return "", false
		}
		pos = 3
	}
	if len(args) <= pos {
		return "", false
	}
	switch k := args[pos].(type) {
	case string:
		return k, true
	case []byte:
		return string(k), true
	}
	return "", false
}

// TxPipelined runs fn's commands in MULTI/EXEC on c, like
// c.TxPipelined, and with d on then sends WAIT on the same connection (on a
// Cluster, a connection to the master of key, which every command of fn
// must share a slot with). Errors: the transaction's, else a
// *NotDurableError.
func TxPipelined(ctx context.Context, c redis.UniversalClient, key string, d Durability, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	if !d.On() {
		return c.TxPipelined(ctx, fn)
	}
	var node *redis.Client
	switch x := c.(type) {
	case *redis.Client:
		node = x
	case *redis.ClusterClient:
		var err error
		if node, err = x.MasterForKey(ctx, key); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("store: durable transactions need a *redis.Client or *redis.ClusterClient, not %T", c)
	}
	conn := node.Conn()
	defer conn.Close()
	cmds, err := conn.TxPipelined(ctx, fn)
	if err != nil {
		return cmds, err
	}
	wait := d.waitCmd()
	_ = conn.Process(ctx, wait)
	return cmds, waitResult(d, wait)
}
