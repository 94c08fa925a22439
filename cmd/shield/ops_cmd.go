package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/lock"
	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/core/rank"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/edge"
	"github.com/shieldrt/shieldglobal/ops"
)

// shield ops: the admin CLI. It talks to Redis directly (no running shield
// process needed) with the same core operations the console's actions and
// the Lua API use. docs/ops.md#the-admin-cli documents it.

const opsSynopsis = "[--config FILE] [--json] queues | dead QUEUE [--limit N] | requeue QUEUE (ID...|--all) | tasks | " +
	"pause|resume|disable|enable|trigger|remove TASK | board NAME [--top N] | lock NAME"

// opsTimeout bounds one ops command (every Redis call it makes).
const opsTimeout = 10 * time.Second

// errOpsUsage is a command line that does not parse (exit status 2).
var errOpsUsage = errors.New("usage")

func cmdOps(argv []string, stdout, stderr io.Writer) int {
	fs, cfgPath := newFlags("ops", stderr)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	all := fs.Bool("all", false, "requeue: every dead letter of the queue")
	limit := fs.Int("limit", 50, "dead: how many dead letters to show (oldest first)")
	top := fs.Int("top", 10, "board: how many of the best entries to show")
	fs.Usage = func() { fmt.Fprintf(stderr, "usage: shield ops %s\n", opsSynopsis) }
	// Flags may come before or after the subcommand and its arguments.
	var args []string
	rest := argv
	for {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		args = append(args, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(args) == 0 {
		fs.Usage()
		return 2
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "shield: %v\n", err)
		return 2
	}
	a, err := openAdmin(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "shield ops: %v\n", err)
		return 1
	}
	defer a.close()
	ctx, cancel := context.WithTimeout(context.Background(), opsTimeout)
	defer cancel()
	out := &opsOut{w: stdout, json: *asJSON}
	err = a.run(ctx, out, args, opsFlags{all: *all, limit: *limit, top: *top})
	switch {
	case errors.Is(err, errOpsUsage):
		fmt.Fprintf(stderr, "shield ops: %v\n", err)
		fs.Usage()
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "shield ops: %v\n", err)
		return 1
	}
	return 0
}

type opsFlags struct {
	all        bool
	limit, top int
}

// admin holds the Redis client and the core backends of one ops command.
type admin struct {
	cfg    config.Config
	client redis.UniversalClient
	queues *queue.Redis
	sstore *scheduler.Redis
	sched  *scheduler.Engine
}

// openAdmin connects to the Redis the config names. Errors: no Redis
// configured (the memory backend lives inside a process: nothing to reach),
// Redis unreachable.
func openAdmin(cfg config.Config) (*admin, error) {
	r := cfg.Global.Redis
	if !r.Configured() {
		return nil, errors.New("no Redis configured: the memory backend lives inside its process, there is nothing to reach " +
			"(give --config with global.redis, or SHIELD_REDIS_URL)")
	}
	c, err := store.NewClient(edge.RedisOptions(r))
	if err != nil {
		return nil, err
	}
	if err := store.Ping(context.Background(), c, edge.DescribeRedis(r), 5*time.Second); err != nil {
		c.Close()
		return nil, err
	}
	prefix := r.Prefix
	return &admin{cfg: cfg, client: c, queues: queue.NewRedis(c, prefix, nil, queue.RedisOptions{Consumer: "shield-ops"}),
		sstore: scheduler.NewRedis(c, prefix, scheduler.RedisOptions{})}, nil
}

func (a *admin) close() {
	if a.sched != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		a.sched.Close(ctx)
		cancel()
	}
	a.queues.Close()
	a.sstore.Close()
	a.client.Close()
}

// engine is a scheduler Engine on the Store that registers nothing: its
// Get, Pause, Resume and Remove of a name it does not know go to Redis.
func (a *admin) engine() (*scheduler.Engine, error) {
	if a.sched == nil {
		e, err := scheduler.New(scheduler.Config{Store: a.sstore, Defaults: edge.SchedulerOptions(a.cfg.Scheduler), Instance: "shield-ops"})
		if err != nil {
			return nil, err
		}
		a.sched = e
	}
	return a.sched, nil
}

func (a *admin) run(ctx context.Context, out *opsOut, args []string, f opsFlags) error {
	cmd, args := args[0], args[1:]
	want := func(n int, what string) error {
		if len(args) != n {
			return fmt.Errorf("%w: shield ops %s takes %s", errOpsUsage, cmd, what)
		}
		return nil
	}
	switch cmd {
	case "queues":
		if err := want(0, "no arguments"); err != nil {
			return err
		}
		return a.listQueues(ctx, out)
	case "dead":
		if err := want(1, "QUEUE"); err != nil {
			return err
		}
		return a.dead(ctx, out, args[0], f.limit)
	case "requeue":
		if len(args) == 0 || f.all == (len(args) > 1) {
			return fmt.Errorf("%w: shield ops requeue takes QUEUE and dead-letter ids, or QUEUE --all", errOpsUsage)
		}
		return a.requeue(ctx, out, args[0], args[1:])
	case "tasks":
		if err := want(0, "no arguments"); err != nil {
			return err
		}
		return a.tasks(ctx, out)
	case "pause", "resume", "disable", "enable", "trigger", "remove":
		if err := want(1, "TASK"); err != nil {
			return err
		}
		return a.taskAction(ctx, out, cmd, args[0])
	case "board":
		if err := want(1, "NAME"); err != nil {
			return err
		}
		if f.top < 1 || f.top > 10000 {
			return fmt.Errorf("%w: --top %d must be in [1, 10000]", errOpsUsage, f.top)
		}
		return a.board(ctx, out, args[0], f.top)
	case "lock":
		if err := want(1, "NAME"); err != nil {
			return err
		}
		return a.lock(ctx, out, args[0])
	}
	return fmt.Errorf("%w: unknown ops command %q", errOpsUsage, cmd)
}

// open finds queue name in Redis and opens it as its kind with the
// configured defaults. Errors: the queue does not exist.
func (a *admin) open(ctx context.Context, name string) (queue.Handle, error) {
	kind, err := a.client.HGet(ctx, store.Keys{Prefix: a.cfg.Global.Redis.Prefix}.QueueMeta(name), "kind").Result()
	if errors.Is(err, redis.Nil) {
		return queue.Handle{}, fmt.Errorf("queue %q: %w (no such queue in Redis)", name, queue.ErrNotFound)
	}
	if err != nil {
		return queue.Handle{}, fmt.Errorf("queue %q: %w", name, err)
	}
	k, err := queue.ParseKind(kind)
	if err != nil {
		return queue.Handle{}, err
	}
	return queue.Open(a.queues, k, name, edge.QueueOptions(a.cfg.Queue))
}

func (a *admin) listQueues(ctx context.Context, out *opsOut) error {
	found, err := a.queues.Discover(ctx)
	if err != nil {
		return err
	}
	views := make([]ops.QueueView, 0, len(found))
	for _, q := range found {
		h, err := queue.Open(a.queues, q.Kind, q.Name, edge.QueueOptions(a.cfg.Queue))
		if err != nil {
			return err
		}
		st, err := h.Stats().Do(ctx)
		if err != nil {
			return err
		}
		oldest, err := h.Oldest().Do(ctx)
		if err != nil {
			return err
		}
		st.Name, st.Kind = q.Name, q.Kind // as found
		views = append(views, ops.QueueViewOf(st, 0, ops.AgeMs(oldest, time.Now())))
	}
	age := func(ms *int64) string {
		if ms == nil {
			return "-"
		}
		return (time.Duration(*ms) * time.Millisecond).Round(time.Millisecond).String()
	}
	return out.print(map[string]any{"queues": views}, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "QUEUE\tKIND\tLENGTH\tIN FLIGHT\tREADY\tPENDING\tRETRYING\tCONSUMERS\tOLDEST\tDEAD")
		for _, q := range views {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\n", q.Name, q.Kind, q.Length, q.InFlight, q.Ready, q.Pending,
				q.Retrying, q.Consumers, age(q.OldestAgeMs), q.DeadLetters)
		}
	})
}

func (a *admin) deadLetters(ctx context.Context, name string) (queue.DeadLetters, error) {
	h, err := a.open(ctx, name)
	if err != nil {
		return nil, err
	}
	return h.DeadLetters()
}

func (a *admin) dead(ctx context.Context, out *opsOut, name string, limit int) error {
	if limit < 1 {
		return fmt.Errorf("%w: --limit %d must be >= 1", errOpsUsage, limit)
	}
	d, err := a.deadLetters(ctx, name)
	if err != nil {
		return err
	}
	dls, err := d.Range(0, limit).Do(ctx)
	if err != nil {
		return err
	}
	views := make([]ops.DeadLetterView, 0, len(dls))
	for _, dl := range dls {
		p, cut := ops.Preview(dl.Body)
		views = append(views, ops.DeadLetterView{ID: dl.ID, MessageID: dl.MessageID, Group: dl.Group, Deliveries: dl.Deliveries,
			At: ops.DeadAt(dl.At), Preview: p, Size: len(dl.Body), Truncated: cut})
	}
	return out.print(map[string]any{"queue": name, "dead_letters": views}, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "ID\tMESSAGE ID\tGROUP\tDELIVERIES\tAT\tPAYLOAD")
		for _, v := range views {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", v.ID, v.MessageID, v.Group, v.Deliveries, v.At, oneLine(v.Preview, 60))
		}
	})
}

func (a *admin) requeue(ctx context.Context, out *opsOut, name string, ids []string) error {
	d, err := a.deadLetters(ctx, name)
	if err != nil {
		return err
	}
	var moved int
	if len(ids) == 0 {
		moved, err = d.RequeueAll().Do(ctx)
	} else {
		for _, id := range ids {
			if _, err = d.Requeue(id).Do(ctx); err != nil {
				break
			}
			moved++
		}
	}
	if perr := out.print(map[string]any{"queue": name, "requeued": moved}, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "requeued %d dead letters to %s\n", moved, name)
	}); perr != nil {
		return perr
	}
	return err
}

func (a *admin) tasks(ctx context.Context, out *opsOut) error {
	names, err := a.sstore.Names(ctx)
	if err != nil {
		return err
	}
	e, err := a.engine()
	if err != nil {
		return err
	}
	views := make([]ops.TaskView, 0, len(names))
	for _, n := range names {
		i, err := e.Get(n).Do(ctx)
		if errors.Is(err, scheduler.ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return err
		}
		views = append(views, ops.TaskViewOf(i))
	}
	str := func(p *string) string {
		if p == nil {
			return "-"
		}
		return *p
	}
	return out.print(map[string]any{"tasks": views}, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "TASK\tSCHEDULE\tSTATUS\tNEXT RUN\tLAST RUN\tRUNS\tFAILURES\tMISSED\tSKIPPED\tLAST ERROR")
		for _, v := range views {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", v.Name, v.Schedule, v.Status, str(v.NextRun), str(v.LastRun),
				v.Runs, v.Failures, v.Missed, v.Skipped, oneLine(v.LastError, 50))
		}
	})
}

func (a *admin) taskAction(ctx context.Context, out *opsOut, action, name string) error {
	if action == "trigger" {
		return a.trigger(ctx, out, name)
	}
	e, err := a.engine()
	if err != nil {
		return err
	}
	switch action {
	case "pause":
		_, err = e.Pause(name).Do(ctx)
	case "resume":
		_, err = e.Resume(name).Do(ctx)
	case "disable":
		_, err = e.Disable(name).Do(ctx)
	case "enable":
		_, err = e.Enable(name).Do(ctx)
	case "remove":
		_, err = e.Remove(name).Do(ctx)
	}
	if err != nil {
		return err
	}
	return out.print(map[string]any{"task": name, "action": action, "ok": true}, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%s: %s done\n", name, action)
	})
}

// triggerWindow is how long a trigger from the CLI may be claimed by a
// process holding the task; the CLI waits for the claim up to then.
const triggerWindow = 5 * time.Second

// trigger asks the processes that registered distributed task name to run
// it once (Engine.TriggerAny) and waits until one of them claims it, or
// the window passes and none did (then none will: a trigger is not kept).
func (a *admin) trigger(ctx context.Context, out *opsOut, name string) error {
	e, err := a.engine()
	if err != nil {
		return err
	}
	id, err := e.TriggerAny(name, triggerWindow).Do(ctx)
	if errors.Is(err, scheduler.ErrNotFound) {
		return fmt.Errorf("%w (only distributed tasks are in Redis; a local task runs now from its own process: "+
			"its console or scheduler:trigger)", err)
	}
	if err != nil {
		return err
	}
	for {
		st, err := e.TriggerStatus(name, id).Do(ctx)
		if err != nil {
			return err
		}
		if st.Runner != "" {
			return out.print(map[string]any{"task": name, "action": "trigger", "ok": true, "runner": st.Runner}, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "%s: trigger done, run by %s\n", name, st.Runner)
			})
		}
		if !st.Pending {
			return fmt.Errorf("task %q: no process that registered it took the trigger within %v, so it did not run "+
				"(none is up, or none heard it; a trigger is not kept for a process that starts later)", name, triggerWindow)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("task %q: waiting for a process to take the trigger: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (a *admin) board(ctx context.Context, out *opsOut, name string, top int) error {
	b, err := rank.NewRedis(a.client, a.cfg.Global.Redis.Prefix).Board(name, rank.Options{})
	if err != nil {
		return err
	}
	snap, err := b.Snapshot(1, top).Do(ctx)
	if err != nil {
		return err
	}
	d := ops.BoardDetail{BoardView: ops.BoardView{Name: name, Count: snap.Count, Version: snap.Version},
		Top: make([]ops.EntryView, 0, len(snap.Entries)), Around: []ops.EntryView{}}
	for _, e := range snap.Entries {
		d.Top = append(d.Top, ops.EntryView{Rank: e.Rank, UID: e.UID, Score: e.Score})
	}
	return out.print(d, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "board %s: %d members, version %d\n", name, d.Count, d.Version)
		fmt.Fprintln(w, "RANK\tUID\tSCORE")
		for _, e := range d.Top {
			fmt.Fprintf(w, "%d\t%s\t%v\n", e.Rank, e.UID, e.Score)
		}
	})
}

func (a *admin) lock(ctx context.Context, out *opsOut, name string) error {
	i, err := lock.NewRedis(a.client, a.cfg.Global.Redis.Prefix, nil).Info(name).Do(ctx)
	if err != nil {
		return err
	}
	v := ops.LockInfo(name, i)
	return out.print(v, func(w *tabwriter.Writer) {
		if !v.Held {
			fmt.Fprintf(w, "lock %s: free (%d waiting)\n", name, v.Waiting)
			return
		}
		at := "-"
		if v.AcquiredAt != nil {
			at = *v.AcquiredAt
		}
		fmt.Fprintf(w, "lock %s: held, %s, ttl %d ms, acquired %s, token %d, %d waiting\n", name, v.Mode, v.TTLMs, at, v.Token, v.Waiting)
		fmt.Fprintln(w, "OWNER\tCOUNT\tSERVICE")
		for _, o := range v.Owners {
			fmt.Fprintf(w, "%s\t%d\t%s\n", o.Owner, o.Count, o.Service)
		}
	})
}

// opsOut prints a result as indented JSON or as a table.
type opsOut struct {
	w    io.Writer
	json bool
}

func (o *opsOut) print(v any, table func(w *tabwriter.Writer)) error {
	if o.json {
		enc := json.NewEncoder(o.w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// oneLine shortens s to one line of at most n runes for a table cell.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
