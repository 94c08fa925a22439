package shieldglobal

import (
	"context"
	"errors"
	"fmt"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/core/rank"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/ops"
)

// opsConsole is the Module's side of the ops web console (ops.Console): its
// pages read, and its admin actions call, the same core operations the Lua
// API and the admin CLI use (queue.Find + DeadLetters, scheduler.Engine's
// Pause/Resume/Trigger/Remove, rank.Board.Clear).
type opsConsole struct{ m *Module }

var _ ops.Console = opsConsole{}

// consoleErr maps the core packages' sentinel errors to the console's, so
// that the API answers 404 or 400 instead of 503.
func consoleErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, scheduler.ErrNotFound), errors.Is(err, rank.ErrNotFound):
		return fmt.Errorf("%w: %w", ops.ErrNotFound, err)
	case errors.Is(err, queue.ErrInvalid), errors.Is(err, scheduler.ErrInvalid), errors.Is(err, rank.ErrInvalid),
		errors.Is(err, lock.ErrInvalid):
		return fmt.Errorf("%w: %w", ops.ErrInvalid, err)
	}
	return err
}

var errQueuesOff = fmt.Errorf("%w: queues are disabled (queue.enabled: false)", ops.ErrNotFound)

func (c opsConsole) Queues(ctx context.Context) ([]ops.QueueView, error) {
	qs, err := c.m.QueueStats(ctx)
	out := make([]ops.QueueView, 0, len(qs))
	ages, aerr := c.m.oldestAges(ctx, qs)
	for i, q := range qs {
		out = append(out, ops.QueueViewOf(q.Stats, q.LocalConsumers, ages[i]))
	}
	return out, errors.Join(err, aerr)
}

// oldestAges returns, for each queue of qs, how long its oldest message has
// waited in ms (queue.Handle.Oldest), or nil for an empty queue or one whose
// query failed (the errors are joined), in one pipeline.
func (m *Module) oldestAges(ctx context.Context, qs []QueueInfo) ([]*int64, error) {
	oldest := make([]*store.Op[time.Time], 0, len(qs))
	for _, q := range qs {
		h, err := queue.Find(m.queueBackend, q.Name)
		if err != nil {
			oldest = append(oldest, store.Failed[time.Time](err))
			continue
		}
		oldest = append(oldest, h.Oldest())
	}
	ts, failed := store.DoAll(ctx, oldest)
	ages := make([]*int64, len(qs))
	var errs error
	now := time.Now()
	for i := range qs {
		if failed[i] != nil {
			errs = errors.Join(errs, failed[i])
			continue
		}
		ages[i] = ops.AgeMs(ts[i], now)
	}
	return ages, errs
}

// deadLetters finds name among the queues this process opened.
func (c opsConsole) deadLetters(name string) (queue.DeadLetters, error) {
	if c.m.queueBackend == nil {
		return nil, errQueuesOff
	}
	h, err := queue.Find(c.m.queueBackend, name)
	if err != nil {
		return nil, consoleErr(err)
	}
	d, err := h.DeadLetters()
	return d, consoleErr(err)
}

func (c opsConsole) DeadLetters(ctx context.Context, name string, limit int) ([]ops.DeadLetterView, error) {
	d, err := c.deadLetters(name)
	if err != nil {
		return nil, err
	}
	dls, err := d.Range(0, limit).Do(ctx)
	if err != nil {
		return nil, consoleErr(err)
	}
	out := make([]ops.DeadLetterView, 0, len(dls))
	for _, dl := range dls {
		p, cut := ops.Preview(dl.Body)
		out = append(out, ops.DeadLetterView{ID: dl.ID, MessageID: dl.MessageID, Group: dl.Group, Deliveries: dl.Deliveries,
			At: ops.DeadAt(dl.At), Preview: p, Size: len(dl.Body), Truncated: cut})
	}
	return out, nil
}

func (c opsConsole) Requeue(ctx context.Context, name string, ids []string) (int64, error) {
	d, err := c.deadLetters(name)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		n, err := d.RequeueAll().Do(ctx)
		return int64(n), consoleErr(err)
	}
	var moved int64
	for _, id := range ids {
		if _, err := d.Requeue(id).Do(ctx); err != nil {
			return moved, consoleErr(err)
		}
		moved++
	}
	return moved, nil
}

func (c opsConsole) DeleteDead(ctx context.Context, name string, ids []string) (int64, error) {
	d, err := c.deadLetters(name)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		n, err := d.Purge().Do(ctx)
		return n, consoleErr(err)
	}
	n, err := d.Delete(ids...).Do(ctx)
	return n, consoleErr(err)
}

func (c opsConsole) Purge(ctx context.Context, name string) (int64, error) {
	if c.m.queueBackend == nil {
		return 0, errQueuesOff
	}
	h, err := queue.Find(c.m.queueBackend, name)
	if err != nil {
		return 0, consoleErr(err)
	}
	n, err := h.Purge().Do(ctx)
	return n, consoleErr(err)
}

func (c opsConsole) Tasks(ctx context.Context) ([]ops.TaskView, error) {
	if c.m.sched == nil {
		return nil, nil
	}
	infos, err := c.m.sched.List().Do(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ops.TaskView, 0, len(infos))
	for _, i := range infos {
		out = append(out, ops.TaskViewOf(i))
	}
	return out, nil
}

func (c opsConsole) TaskAction(ctx context.Context, name, action string) error {
	if c.m.sched == nil {
		return fmt.Errorf("%w: the scheduler is disabled (scheduler.enabled: false)", ops.ErrNotFound)
	}
	var err error
	switch action {
	case "pause":
		_, err = c.m.sched.Pause(name).Do(ctx)
	case "resume":
		_, err = c.m.sched.Resume(name).Do(ctx)
	case "disable":
		_, err = c.m.sched.Disable(name).Do(ctx)
	case "enable":
		_, err = c.m.sched.Enable(name).Do(ctx)
	case "trigger":
		_, err = c.m.sched.Trigger(name).Do(ctx)
	case "remove":
		_, err = c.m.sched.Remove(name).Do(ctx)
	default:
		err = fmt.Errorf("%w: unknown task action %q", ops.ErrInvalid, action)
	}
	return consoleErr(err)
}

func (c opsConsole) Boards(ctx context.Context) ([]ops.BoardView, error) {
	if c.m.ranks == nil {
		return nil, nil
	}
	boards := c.m.ranks.Opened()
	snaps := make([]*store.Op[rank.Snapshot], len(boards))
	for i, b := range boards {
		snaps[i] = b.Snapshot(1, 1) // the count and version in one read
	}
	res, failed := store.DoAll(ctx, snaps)
	out := make([]ops.BoardView, 0, len(boards))
	var errs error
	for i, b := range boards {
		if failed[i] != nil {
			errs = errors.Join(errs, failed[i])
			continue
		}
		out = append(out, ops.BoardView{Name: b.Name(), Count: res[i].Count, Version: res[i].Version})
	}
	return out, errs
}

func (c opsConsole) board(name string) (rank.Board, error) {
	if c.m.ranks == nil {
		return nil, fmt.Errorf("%w: leaderboards are disabled (rank.enabled: false)", ops.ErrNotFound)
	}
	b, ok := c.m.ranks.Board(name)
	if !ok {
		return nil, fmt.Errorf("%w: board %q (not opened in this process)", ops.ErrNotFound, name)
	}
	return b, nil
}

func (c opsConsole) Board(ctx context.Context, name string, top int, member string, around int) (ops.BoardDetail, error) {
	b, err := c.board(name)
	if err != nil {
		return ops.BoardDetail{}, err
	}
	snap, err := b.Snapshot(1, top).Do(ctx)
	if err != nil {
		return ops.BoardDetail{}, consoleErr(err)
	}
	d := ops.BoardDetail{BoardView: ops.BoardView{Name: name, Count: snap.Count, Version: snap.Version},
		Top: entries(snap.Entries), Around: []ops.EntryView{}, Member: member}
	if member != "" {
		a, err := b.Around(member, around).Do(ctx)
		if err != nil {
			return ops.BoardDetail{}, consoleErr(err)
		}
		if d.Found = a.Found; a.Found {
			d.Around = append(append(entries(a.Above), entries([]rank.Entry{a.Target})...), entries(a.Below)...)
		}
	}
	return d, nil
}

func entries(es []rank.Entry) []ops.EntryView {
	out := make([]ops.EntryView, len(es))
	for i, e := range es {
		out[i] = ops.EntryView{Rank: e.Rank, UID: e.UID, Score: e.Score}
	}
	return out
}

func (c opsConsole) ClearBoard(ctx context.Context, name string) (int64, error) {
	b, err := c.board(name)
	if err != nil {
		return 0, err
	}
	w, err := b.Clear().Do(ctx)
	return int64(w.Changed), consoleErr(err)
}

func (c opsConsole) Lock(ctx context.Context, name string) (ops.LockView, error) {
	if c.m.distLocks == nil {
		return ops.LockView{}, fmt.Errorf("%w: locks are disabled (lock.enabled: false)", ops.ErrNotFound)
	}
	i, err := c.m.distLocks.Info(name).Do(ctx)
	if err != nil {
		return ops.LockView{}, consoleErr(err)
	}
	return ops.LockInfo(name, i), nil
}

func (c opsConsole) HeldLocks(ctx context.Context) (ops.HeldLocksView, error) {
	if c.m.localLocks == nil {
		return ops.HeldLocksOf(lock.HeldLocks{}, nil, nil, time.Now()), nil
	}
	held := lock.ListHeld(c.m.localLocks, ops.HeldLimit, ops.HeldOwners)
	// The backend's side of the distributed ones (token, lease, holders in
	// other processes): one pipeline, bounded.
	var names []string
	var reads []*store.Op[lock.Info]
	for _, l := range held.Locks {
		if !l.Distributed || len(reads) == ops.HeldBackendReads || c.m.distLocks == nil {
			continue
		}
		be := c.m.distLocks
		if l.Kind == "distributed_mutex" && c.m.locks.Redlock != nil {
			be = c.m.locks.Redlock // distributed mutexes live on the Redlock nodes
		}
		names = append(names, l.Name)
		reads = append(reads, be.Info(l.Name))
	}
	infos, errs := store.DoAll(ctx, reads)
	backend, failed := make(map[string]lock.Info, len(names)), map[string]error{}
	for i, n := range names {
		if errs[i] != nil {
			failed[n] = errs[i]
			continue
		}
		backend[n] = infos[i]
	}
	return ops.HeldLocksOf(held, backend, failed, c.m.clock.Now()), nil
}

func (c opsConsole) LoopLag() ops.LagView {
	if c.m.metrics == nil {
		return ops.LagView{}
	}
	var pb dto.Metric
	if err := c.m.metrics.LoopLag.Write(&pb); err != nil || pb.Histogram == nil {
		return ops.LagView{}
	}
	h := pb.Histogram
	v := ops.LagView{Samples: h.GetSampleCount()}
	if v.Samples == 0 {
		return v
	}
	v.MeanMs = h.GetSampleSum() / float64(v.Samples) * 1000
	want := uint64(float64(v.Samples)*0.99 + 0.5)
	v.P99Ms = -1 // past the last bucket
	for _, b := range h.Bucket {
		if b.GetCumulativeCount() >= want {
			v.P99Ms = b.GetUpperBound() * 1000
			break
		}
	}
	return v
}
