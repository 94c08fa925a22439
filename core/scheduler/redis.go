package scheduler

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/core/store"
)

// The scripts; each file's header lists its KEYS, ARGV and replies, and
// each starts with scripts/prelude.lua.
var (
	//go:embed scripts/prelude.lua
	preludeSrc string
	//go:embed scripts/register.lua
	registerSrc string
	//go:embed scripts/claim.lua
	claimSrc string
	//go:embed scripts/recover.lua
	recoverSrc string
	//go:embed scripts/heartbeat.lua
	heartbeatSrc string
	//go:embed scripts/finish.lua
	finishSrc string
	//go:embed scripts/control.lua
	controlSrc string
	//go:embed scripts/trigger.lua
	triggerSrc string

	registerScript  = store.NewScript("scheduler/register.lua", preludeSrc+registerSrc)
	claimScript     = store.NewScript("scheduler/claim.lua", preludeSrc+claimSrc)
	recoverScript   = store.NewScript("scheduler/recover.lua", preludeSrc+recoverSrc)
	heartbeatScript = store.NewScript("scheduler/heartbeat.lua", preludeSrc+heartbeatSrc)
	finishScript    = store.NewScript("scheduler/finish.lua", preludeSrc+finishSrc)
	controlScript   = store.NewScript("scheduler/control.lua", preludeSrc+controlSrc)
	triggerScript   = store.NewScript("scheduler/trigger.lua", preludeSrc+triggerSrc)
)

// controlChannel is the bus channel of control messages (the server
// channel is store.Keys.SchedulerControl).
const controlChannel = "scheduler:control"

// Redis is a Store on Redis (standalone, Sentinel or Cluster). Each step
// is one script (scripts/*.lua, EVALSHA) over the keys of one task, which
// share the hash tag {name}:
//
//	k.SchedulerTask(name)       hash   the record: schedule, anchor, cursor, status, counters
//	k.SchedulerRuns(name)       hash   unfinished firings: fire ms -> "attempt|owner"
//	k.SchedulerLeases(name)     zset   unfinished firings: fire ms -> lease deadline (server ms)
//	k.SchedulerRun(name, fire)  string the claim of one firing: owner (then, until the
//	                                   first renewal, what the claim found), PX lease
//
// with k = store.Keys{Prefix: prefix}. Times are the server's (TIME). The
// scripts PUBLISH control messages on k.SchedulerControl(); the Store
// receives them on its own pub/sub connection, opened by the first
// subscribe (an Engine's New) and closed by Close, and reports its
// reconnections to the Engines as ctlResync so that they re-read
// their records.
type Redis struct {
	c    redis.UniversalClient
	keys store.Keys
	now  func() time.Time

	mu   sync.Mutex
	bus  *pubsub.Redis
	sub  pubsub.Subscription
	fns  map[int]func(controlMsg)
	next int
}

var _ Store = (*Redis)(nil)

// RedisOptions configure NewRedis.
type RedisOptions struct {
	// Now replaces the server's TIME in every script (tests drive the
	// Store with a fake clock). nil: TIME.
	Now func() time.Time
}

// NewRedis returns a Store on c with keys under prefix (global.redis.prefix).
// It does no I/O; c stays owned by the caller.
func NewRedis(c redis.UniversalClient, prefix string, o RedisOptions) *Redis {
	return &Redis{c: c, keys: store.Keys{Prefix: prefix}, now: o.Now, fns: make(map[int]func(controlMsg))}
}

// Close closes the control connection. Engines on the Store stop hearing
// other processes' controls.
func (r *Redis) Close() error {
	r.mu.Lock()
	bus := r.bus
	r.bus, r.sub = nil, nil
	r.mu.Unlock()
	if bus != nil {
		return bus.Close()
	}
	return nil
}

func (r *Redis) nowArg() string {
	if r.now == nil {
		return "0"
	}
	return strconv.FormatInt(r.now().UnixMilli(), 10)
}

func (r *Redis) taskKeys(name string) []string {
	k := r.keys
	return []string{k.SchedulerTask(name), k.SchedulerRuns(name), k.SchedulerLeases(name)}
}

func (r *Redis) fireKeys(name string, fire int64) []string {
	return append(r.taskKeys(name), r.keys.SchedulerRun(name, fire))
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func i64(n int64) string { return strconv.FormatInt(n, 10) }

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// script returns a step running s and decoding its reply with decode.
func script[T any](r *Redis, s *store.Script, what string, keys []string, decode func(*store.Reply) (T, error), args ...any) step[T] {
	cmd := s.Cmd(keys, append([]any{r.nowArg()}, args...)...)
	return step[T]{c: r.c, cmds: []redis.Cmder{cmd}, decode: func() (T, error) {
		rep := store.ReadReply(what, cmd.Cmd)
		v, err := decode(rep)
		if err == nil {
			err = rep.End()
		}
		if err != nil {
			var zero T
			return zero, err
		}
		return v, nil
	}}
}

// readRecord reads a nested record (prelude's record()).
func readRecord(what, name string, rep *store.Reply, now int64) (record, error) {
	vals := rep.Array()
	rec := record{Name: name, Now: now}
	if len(vals) == 0 {
		return rec, nil
	}
	r := store.ReplyOf(what+": record", vals)
	str := func() string { s, _ := r.OptStr(); return s }
	n := func() int64 {
		s, ok := r.OptStr()
		if !ok || s == "" {
			return 0
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0
		}
		return v
	}
	rec.Kind, rec.Spec, rec.Text, rec.Timezone = Kind(str()), str(), str(), str()
	rec.Anchor = n()
	rec.Paused = str() == "1"
	rec.Cursor, rec.LastRun, rec.RunCount, rec.Missed, rec.Skipped, rec.Late, rec.Failed = n(), n(), n(), n(), n(), n(), n()
	rec.LastError = str()
	rec.Errored = str() == "1"
	rec.Version = n()
	rec.Done = str() == "1"
	rec.Disabled = str() == "1"
	rec.Orphaned = r.Int() == 1
	rec.Running = r.Int()
	return rec, r.End()
}

func (r *Redis) register(d def) step[registered] {
	what := fmt.Sprintf("scheduler: register %q", d.Name)
	return script(r, registerScript, what, r.taskKeys(d.Name), func(rep *store.Reply) (registered, error) {
		status, now := rep.Int(), rep.Int()
		rec, err := readRecord(what, d.Name, rep, now)
		reg := registered{record: rec, Created: status == 1, Updated: status == 2, Done: status == 3}
		if err != nil {
			return reg, err
		}
		if status == -1 && rep.Err() == nil {
			return reg, fmt.Errorf("%w: task %q is a %s task in the store, not %s", ErrKindConflict, d.Name, reg.Kind, d.Kind)
		}
		return reg, nil
	}, string(d.Kind), d.Spec, d.Text, d.Timezone, i64(d.At), ms(d.Expire), r.keys.SchedulerControl(), d.Name,
		i64(d.Anchor), i64(d.Cursor))
}

func (r *Redis) claim(c claim) step[claimResult] {
	what := fmt.Sprintf("scheduler: claim %q", c.Name)
	return script(r, claimScript, what, r.fireKeys(c.Name, c.Fire), func(rep *store.Reply) (claimResult, error) {
		res := claimResult{Outcome: outcome(rep.Int()), Now: rep.Int(), Cursor: rep.Int(), Recount: rep.Int() == 1,
			RunDeadline: rep.Int(), Wait: time.Duration(rep.Int()) * time.Millisecond, Orphan: rep.Int(),
			Dropped: rep.Int(), DroppedFirst: rep.Int(), DroppedLast: rep.Int(), Version: rep.Int()}
		if rep.Err() == nil && (res.Outcome < outcomeClaimed || res.Outcome > outcomeDisabled) {
			return res, fmt.Errorf("%s: %w: outcome %d", what, store.ErrReply, res.Outcome)
		}
		return res, nil
	}, i64(c.Fire), i64(c.Probe), c.Owner, ms(c.Lease), i64(c.ExpectPrev), i64(c.Missed), flag(c.Skip),
		ms(c.CatchUp), ms(c.Early), flag(c.MissOnly), ms(c.Keep), r.keys.SchedulerControl(), c.Name)
}

func (r *Redis) recover(name string, fire int64, owner string, lease time.Duration) step[recoverResult] {
	what := fmt.Sprintf("scheduler: recover %q", name)
	return script(r, recoverScript, what, r.fireKeys(name, fire), func(rep *store.Reply) (recoverResult, error) {
		return recoverResult{Recovered: rep.Int() == 1, Now: rep.Int(), Attempt: int(rep.Int()), Deadline: rep.Int()}, nil
	}, i64(fire), owner, ms(lease))
}

func (r *Redis) heartbeat(name string, fire int64, owner string, attempt int, lease time.Duration) step[heartbeatResult] {
	what := fmt.Sprintf("scheduler: heartbeat %q", name)
	return script(r, heartbeatScript, what, r.fireKeys(name, fire), func(rep *store.Reply) (heartbeatResult, error) {
		return heartbeatResult{Held: rep.Int() == 1, Now: rep.Int()}, nil
	}, i64(fire), owner, strconv.Itoa(attempt), ms(lease))
}

func (r *Redis) finish(f finish) step[finishResult] {
	what := fmt.Sprintf("scheduler: finish %q", f.Name)
	return script(r, finishScript, what, r.fireKeys(f.Name, f.Fire), func(rep *store.Reply) (finishResult, error) {
		held, found, now := rep.Int() == 1, rep.Int() == 1, rep.Int()
		rec, err := readRecord(what, f.Name, rep, now)
		return finishResult{Held: held, Found: found, Record: rec}, err
	}, i64(f.Fire), f.Owner, flag(f.Manual), i64(f.Started), flag(f.Fail), f.Err, flag(f.Late), flag(f.Once),
		r.keys.SchedulerControl(), f.Name, ms(max(f.Keep, time.Second)))
}

func (r *Redis) addMissed(name string, n int64) step[struct{}] {
	what := fmt.Sprintf("scheduler: count missed %q", name)
	return script(r, controlScript, what, r.taskKeys(name), func(rep *store.Reply) (struct{}, error) {
		rep.Int()
		rep.Int()
		rep.Array()
		return struct{}{}, nil
	}, "missed", r.keys.SchedulerControl(), name, i64(n))
}

func (r *Redis) control(name string, op controlOp) step[controlled] {
	if !op.valid() {
		return step[controlled]{local: func() (controlled, error) {
			return controlled{}, fmt.Errorf("%w: control %q", ErrInvalid, op)
		}}
	}
	what := fmt.Sprintf("scheduler: %s %q", op, name)
	return script(r, controlScript, what, r.taskKeys(name), func(rep *store.Reply) (controlled, error) {
		c := controlled{Found: rep.Int() == 1}
		rep.Int()
		rep.Array()
		if c.Found {
			c.Version = rep.Int()
		}
		return c, nil
	}, string(op), r.keys.SchedulerControl(), name, "0")
}

func (r *Redis) get(name string) step[found] {
	what := fmt.Sprintf("scheduler: get %q", name)
	return script(r, controlScript, what, r.taskKeys(name), func(rep *store.Reply) (found, error) {
		ok, now := rep.Int() == 1, rep.Int()
		rec, err := readRecord(what, name, rep, now)
		return found{record: rec, Found: ok}, err
	}, "get", r.keys.SchedulerControl(), name, "0")
}

func (r *Redis) sendTrigger(name, id string, window time.Duration) step[bool] {
	what := fmt.Sprintf("scheduler: trigger %q", name)
	keys := []string{r.keys.SchedulerTask(name), r.keys.SchedulerTrigger(name, id)}
	return script(r, triggerScript, what, keys, func(rep *store.Reply) (bool, error) {
		ok := rep.Int() == 1
		rep.Int()
		rep.Str()
		return ok, nil
	}, "send", ms(window), r.keys.SchedulerControl(), id, name)
}

func (r *Redis) claimTrigger(name, id, owner string) step[trigReply] {
	return r.trig("claim", name, id, owner)
}

func (r *Redis) triggerState(name, id string) step[trigReply] { return r.trig("state", name, id, "") }

func (r *Redis) trig(op, name, id, owner string) step[trigReply] {
	what := fmt.Sprintf("scheduler: trigger %q: %s", name, op)
	keys := []string{r.keys.SchedulerTask(name), r.keys.SchedulerTrigger(name, id)}
	return script(r, triggerScript, what, keys, func(rep *store.Reply) (trigReply, error) {
		res := trigReply{State: trigState(rep.Int()), Now: rep.Int(), Owner: rep.Str()}
		if rep.Err() == nil && res.State > trigClaimed {
			return res, fmt.Errorf("%s: %w: state %d", what, store.ErrReply, res.State)
		}
		return res, nil
	}, op, owner)
}

// subscribeTimeout bounds the SUBSCRIBE of the control channel.
const subscribeTimeout = 5 * time.Second

func (r *Redis) subscribe(fn func(controlMsg)) (func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bus == nil {
		bus := pubsub.NewRedis(r.c, r.keys.Prefix, pubsub.Events{Up: func() { r.deliver(controlMsg{Op: ctlResync}) }})
		ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
		sub, err := bus.Subscribe(ctx, controlChannel, func(m pubsub.Message) {
			op, name, ok := strings.Cut(string(m.Payload), "\n")
			if !ok {
				return
			}
			c := controlMsg{Op: controlOp(op), Name: name}
			switch c.Op {
			case ctlTrigger:
				if c.ID, c.Name, ok = strings.Cut(name, "\n"); !ok {
					return
				}
			case ctlPause, ctlResume, ctlDisable, ctlEnable:
				// name\nversion; a task name may hold a newline itself
				i := strings.LastIndexByte(name, '\n')
				if i < 0 {
					return
				}
				c.Name = name[:i]
				if c.Version, _ = strconv.ParseInt(name[i+1:], 10, 64); c.Version <= 0 {
					return
				}
			}
			r.deliver(c)
		})
		cancel()
		if err != nil {
			bus.Close()
			return nil, err
		}
		r.bus, r.sub = bus, sub
	}
	id := r.next
	r.next++
	r.fns[id] = fn
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.fns, id)
			r.mu.Unlock()
		})
	}, nil
}

func (r *Redis) deliver(c controlMsg) {
	r.mu.Lock()
	fns := make([]func(controlMsg), 0, len(r.fns))
	for _, fn := range r.fns {
		fns = append(fns, fn)
	}
	r.mu.Unlock()
	for _, fn := range fns {
		fn(c)
	}
}

// clock implements Store: only a test clock (RedisOptions.Now) is in
// reach; the server's TIME is estimated from replies.
func (r *Redis) clock() func() time.Time { return r.now }
