package queue

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/clock"
)

// The stream scripts; stream_prelude.lua is prepended after prelude.lua.
var (
	//go:embed scripts/stream_prelude.lua
	streamPreludeSrc string
	//go:embed scripts/stream_push.lua
	streamPushSrc string
	//go:embed scripts/stream_pop.lua
	streamPopSrc string
	//go:embed scripts/stream_ack.lua
	streamAckSrc string
	//go:embed scripts/stream_nack.lua
	streamNackSrc string
	//go:embed scripts/stream_extend.lua
	streamExtendSrc string
	//go:embed scripts/stream_stats.lua
	streamStatsSrc string
	//go:embed scripts/dead_read.lua
	deadReadSrc string
	//go:embed scripts/dead_requeue.lua
	deadRequeueSrc string
	//go:embed scripts/group.lua
	groupSrc string

	streamPushScript   = streamScript("stream_push.lua", streamPushSrc)
	streamPopScript    = streamScript("stream_pop.lua", streamPopSrc)
	streamAckScript    = streamScript("stream_ack.lua", streamAckSrc)
	streamNackScript   = streamScript("stream_nack.lua", streamNackSrc)
	streamExtendScript = streamScript("stream_extend.lua", streamExtendSrc)
	streamStatsScript  = streamScript("stream_stats.lua", streamStatsSrc)
	deadReadScript     = streamScript("dead_read.lua", deadReadSrc)
	deadRequeueScript  = streamScript("dead_requeue.lua", deadRequeueSrc)
	groupScript        = streamScript("group.lua", groupSrc)
)

func streamScript(name, src string) *store.Script {
	return store.NewScript("queue/"+name, preludeSrc+"\n"+streamPreludeSrc+"\n"+src)
}

// redisStream is a reliable or broadcast queue on Redis.
type redisStream struct {
	r    *Redis
	kind Kind
	name string
	o    Options

	key, meta, flag, dead, channel string

	mu        sync.Mutex
	receivers map[string]*redisReceiver
}

func newRedisStream(r *Redis, kind Kind, name string, o Options) *redisStream {
	k := r.keys
	return &redisStream{r: r, kind: kind, name: name, o: o,
		key: k.Queue(name), meta: k.QueueMeta(name), flag: k.QueueWaiting(name),
		dead: k.QueueDead(name), channel: k.QueueNotify(name), receivers: map[string]*redisReceiver{}}
}

// receiver returns the one receiver of group, with its notifier.
func (s *redisStream) receiver(group string) *redisReceiver {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rc := s.receivers[group]; rc != nil {
		return rc
	}
	k := s.r.keys
	rc := &redisReceiver{s: s, group: group, label: s.name,
		retry: k.QueueRetry(s.name, group), consumers: k.QueueConsumers(s.name, group)}
	if s.kind == KindBroadcast {
		rc.label = s.name + "/" + group
	}
	// Idle waiters re-pop often enough to reclaim a silent consumer's
	// messages soon after their visibility timeout.
	recheck := min(max(s.o.VisibilityTimeout/4, 50*time.Millisecond), s.r.t.streamRecheck)
	rc.n = newNotifier(rc.label, s.r.bus, s.r.channel(s.name), s.r.t, recheck, &s.r.wg,
		func(ctx context.Context, n int, wait bool) (popResult[*Delivery], error) {
			return rc.popN(n, wait).Do(ctx)
		},
		rc.releaseAll)
	s.receivers[group] = rc
	return rc
}

func (s *redisStream) close() {
	s.mu.Lock()
	rcs := make([]*redisReceiver, 0, len(s.receivers))
	for _, rc := range s.receivers {
		rcs = append(rcs, rc)
	}
	s.mu.Unlock()
	for _, rc := range rcs {
		rc.n.close()
	}
}

func (s *redisStream) kindArg() string { return s.kind.String() }

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// push runs stream_push.lua.
func (s *redisStream) push(op string, bodies [][]byte) *store.Op[[]string] {
	cmd, decode := s.pushCmd(op, bodies)
	return store.Commands(s.r.c, decode, cmd).Durable(s.r.durable)
}

// pushOne pushes one body and returns its id.
func (s *redisStream) pushOne(body []byte) *store.Op[string] {
	cmd, decode := s.pushCmd("push", [][]byte{body})
	return store.Commands(s.r.c, func() (string, error) {
		ids, err := decode()
		if err != nil {
			return "", err
		}
		return ids[0], nil
	}, cmd).Durable(s.r.durable)
}

func (s *redisStream) pushCmd(op string, bodies [][]byte) (*store.ScriptCmd, func() ([]string, error)) {
	cmd := streamPushScript.Cmd([]string{s.key, s.meta, s.flag},
		bodiesArgs([]any{s.kindArg(), s.o.MaxLength, s.channel, reliableGroup, millis(s.o.MessageTTL)}, bodies)...)
	return cmd, func() ([]string, error) {
		if err := cmd.Err(); err != nil {
			return nil, scriptErr(op, s.name, err)
		}
		rep := store.ReadReply("queue: "+op+" "+strconv.Quote(s.name), cmd.Cmd)
		if rep.Int() == 0 {
			return nil, opErr(op, s.name, ErrFull)
		}
		ids := make([]string, 0, len(bodies))
		for rep.Len() > 0 && rep.Err() == nil {
			ids = append(ids, rep.Str())
		}
		return ids, rep.End()
	}
}

// redisReceiver is the consuming side of one group.
type redisReceiver struct {
	s                *redisStream
	group, label     string
	retry, consumers string
	n                *notifier[*Delivery]
	seen             seenGate
}

func (rc *redisReceiver) popCmd(n int, wait bool) (*store.ScriptCmd, func() (popResult[*Delivery], error)) {
	s := rc.s
	flagTTL := int64(0)
	if wait {
		flagTTL = s.r.t.flagTTL.Milliseconds()
	}
	gate := min(max(s.o.VisibilityTimeout/10, 10*time.Millisecond), s.r.t.reclaimGate)
	cmd := streamPopScript.Cmd([]string{s.key, s.meta, s.flag, rc.retry, rc.consumers, s.dead},
		s.kindArg(), rc.group, s.r.consumer, n, millis(s.o.VisibilityTimeout), millis(s.o.MessageTTL),
		1+s.o.MaxRetries, boolArg(s.o.DeadLetter.Enabled), s.o.DeadLetter.MaxLength, millis(s.o.DeadLetter.TTL),
		flagTTL, gate.Milliseconds(), parkedConsumer, boolArg(rc.seen.due()))
	return cmd, func() (popResult[*Delivery], error) {
		if err := cmd.Err(); err != nil {
			return popResult[*Delivery]{}, scriptErr("pop", rc.label, err)
		}
		rep := store.ReadReply("queue: pop "+strconv.Quote(rc.label), cmd.Cmd)
		res := popResult[*Delivery]{serverNow: rep.Int(), next: rep.Int()}
		for rep.Len() > 0 && rep.Err() == nil {
			id, body, n := rep.Str(), rep.Str(), rep.Int()
			res.items = append(res.items, rc.delivery(id, body, int(n)))
		}
		return res, rep.End()
	}
}

func (rc *redisReceiver) delivery(id, body string, n int) *Delivery {
	d := &Delivery{Message: Message{ID: id, Body: []byte(body)}, Deliveries: n, r: rc}
	if k, ok := parseKey(id); ok {
		d.EnqueuedAt = fromMs(k.ms)
	}
	if rc.s.kind == KindBroadcast {
		d.Group = rc.group
	}
	return d
}

func (rc *redisReceiver) popN(n int, wait bool) *store.Op[popResult[*Delivery]] {
	cmd, decode := rc.popCmd(n, wait)
	return store.Commands(rc.s.r.c, decode, cmd)
}

func (rc *redisReceiver) Pop() *store.Op[*Delivery] {
	cmd, decode := rc.popCmd(1, false)
	return store.Commands(rc.s.r.c, func() (*Delivery, error) {
		res, err := decode()
		if err != nil {
			return nil, err
		}
		if len(res.items) == 0 {
			return nil, opErr("pop", rc.label, ErrEmpty)
		}
		return res.items[0], nil
	}, cmd)
}

func (rc *redisReceiver) PopWait(timeout time.Duration, done func(*Delivery, error)) func() bool {
	if rc.s.r.isClosed() {
		done(nil, opErr("pop", rc.label, ErrClosed))
		return func() bool { return false }
	}
	return rc.n.PopWait(timeout, done)
}

// releaseAll gives deliveries no waiter took back, uncounted.
func (rc *redisReceiver) releaseAll(ctx context.Context, ds []*Delivery) error {
	var b store.Batch
	ops := make([]*store.Op[struct{}], len(ds))
	for i, d := range ds {
		ops[i] = rc.Release(d)
		if ops[i].Kind() == store.KindRedis {
			b.Add(ops[i])
		}
	}
	b.Exec(ctx)
	for _, op := range ops {
		if _, err := op.Result(); err != nil && !isNotHeld(err) {
			return err
		}
	}
	return nil
}

func (rc *redisReceiver) Ack(d *Delivery) *store.Op[struct{}] {
	if err := d.begin(rc, "ack", rc.label, true); err != nil {
		return store.Failed[struct{}](err)
	}
	cmd, decode := rc.ackCmd([]*Delivery{d})
	return store.Commands(rc.s.r.c, func() (struct{}, error) {
		errs, err := decode()
		if err == nil {
			err = errs[0]
		}
		return struct{}{}, err
	}, cmd).Durable(rc.s.r.durable)
}

// ackMany acknowledges every delivery of ds in one script call; each must
// have passed begin. The result has one error per delivery.
func (rc *redisReceiver) ackMany(ds []*Delivery) *store.Op[[]error] {
	var keep []*Delivery
	errs := make([]error, len(ds))
	for i, d := range ds {
		if errs[i] = d.begin(rc, "ack", rc.label, true); errs[i] == nil {
			keep = append(keep, d)
		}
	}
	if len(keep) == 0 {
		return done(errs)
	}
	cmd, decode := rc.ackCmd(keep)
	return store.Commands(rc.s.r.c, func() ([]error, error) {
		kerrs, err := decode()
		j := 0
		for i := range ds {
			if errs[i] != nil {
				continue
			}
			if err != nil {
				errs[i] = err
			} else {
				errs[i] = kerrs[j]
			}
			j++
		}
		return errs, nil
	}, cmd).Durable(rc.s.r.durable)
}

// ackCmd is stream_ack.lua for ds (marked settling) and its decoder, which
// settles each delivery.
func (rc *redisReceiver) ackCmd(ds []*Delivery) (*store.ScriptCmd, func() ([]error, error)) {
	args := []any{rc.s.kindArg(), rc.group}
	for _, d := range ds {
		args = append(args, d.ID)
	}
	cmd := streamAckScript.Cmd([]string{rc.s.key}, args...)
	return cmd, func() ([]error, error) {
		finish := func(err error) {
			for _, d := range ds {
				d.finish(err)
			}
		}
		if err := cmd.Err(); err != nil {
			err = opErr("ack", rc.label, err)
			finish(err)
			return nil, err
		}
		rep := store.ReadReply("queue: ack "+strconv.Quote(rc.label), cmd.Cmd)
		errs := make([]error, len(ds))
		for i, d := range ds {
			if rep.Int() != 1 {
				errs[i] = opErr("ack", rc.label, fmt.Errorf("message %s: %w", d.ID, ErrNotHeld))
			}
		}
		if err := rep.End(); err != nil {
			finish(err)
			return nil, err
		}
		for i, d := range ds {
			d.finish(errs[i])
		}
		return errs, nil
	}
}

// nackCmd is stream_nack.lua in mode nack or release, and its decoder.
func (rc *redisReceiver) nackCmd(op string, d *Delivery, delay time.Duration) (*store.ScriptCmd, func() (NackResult, error), error) {
	if err := d.begin(rc, op, rc.label, true); err != nil {
		return nil, nil, err
	}
	s := rc.s
	cmd := streamNackScript.Cmd([]string{s.key, s.meta, s.flag, rc.retry, s.dead},
		s.kindArg(), rc.group, s.r.consumer, d.ID, d.Deliveries, millis(delay), 1+s.o.MaxRetries,
		boolArg(s.o.DeadLetter.Enabled), s.o.DeadLetter.MaxLength, millis(s.o.DeadLetter.TTL),
		s.channel, parkedConsumer, op)
	return cmd, func() (NackResult, error) {
		var res NackResult
		rep := store.ReadReply("queue: "+op+" "+strconv.Quote(rc.label), cmd.Cmd)
		code := rep.Int()
		err := rep.End()
		switch {
		case err != nil:
			if cmd.Err() != nil {
				err = opErr(op, rc.label, cmd.Err())
			}
		case code == -1:
			err = opErr(op, rc.label, fmt.Errorf("message %s: %w", d.ID, ErrNotHeld))
		case code == 2:
			res.DeadLettered, res.Dropped = true, !s.o.DeadLetter.Enabled
		}
		d.finish(err)
		return res, err
	}, nil
}

func (rc *redisReceiver) Nack(d *Delivery, delay time.Duration) *store.Op[NackResult] {
	if err := checkDelay("nack", rc.label, delay); err != nil {
		return store.Failed[NackResult](err)
	}
	cmd, decode, err := rc.nackCmd("nack", d, delay)
	if err != nil {
		return store.Failed[NackResult](err)
	}
	return store.Commands(rc.s.r.c, decode, cmd)
}

func (rc *redisReceiver) Release(d *Delivery) *store.Op[struct{}] {
	cmd, decode, err := rc.nackCmd("release", d, 0)
	if err != nil {
		return store.Failed[struct{}](err)
	}
	return store.Commands(rc.s.r.c, func() (struct{}, error) {
		_, err := decode()
		return struct{}{}, err
	}, cmd)
}

func (rc *redisReceiver) Extend(d *Delivery) *store.Op[struct{}] {
	if err := d.begin(rc, "extend", rc.label, false); err != nil {
		return store.Failed[struct{}](err)
	}
	cmd, decode := rc.extendCmd([]*Delivery{d})
	return store.Commands(rc.s.r.c, func() (struct{}, error) {
		errs, err := decode()
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, errs[0]
	}, cmd)
}

func (rc *redisReceiver) extendCmd(ds []*Delivery) (*store.ScriptCmd, func() ([]error, error)) {
	args := []any{rc.group, rc.s.r.consumer}
	for _, d := range ds {
		args = append(args, d.ID, d.Deliveries)
	}
	cmd := streamExtendScript.Cmd([]string{rc.s.key, rc.consumers}, args...)
	return cmd, func() ([]error, error) {
		if err := cmd.Err(); err != nil {
			return nil, opErr("extend", rc.label, err)
		}
		rep := store.ReadReply("queue: extend "+strconv.Quote(rc.label), cmd.Cmd)
		errs := make([]error, len(ds))
		for i, d := range ds {
			if rep.Int() != 1 {
				errs[i] = opErr("extend", rc.label, fmt.Errorf("message %s: %w", d.ID, ErrNotHeld))
			}
		}
		return errs, rep.End()
	}
}

func (rc *redisReceiver) extendMany(ds []*Delivery) *store.Op[[]error] {
	cmd, decode := rc.extendCmd(ds)
	return store.Commands(rc.s.r.c, decode, cmd)
}

func (rc *redisReceiver) options() Options              { return rc.s.o }
func (rc *redisReceiver) queueLabel() string            { return rc.label }
func (rc *redisReceiver) clock() Clock                  { return clock.Real }
func (rc *redisReceiver) register(stop StopFunc) func() { return rc.s.r.register(stop) }

func (rc *redisReceiver) Consume(o ConsumeOptions, h Handler) (StopFunc, error) {
	if rc.s.r.isClosed() {
		return nil, opErr("consume", rc.label, ErrClosed)
	}
	return consume(receiverSource{r: rc, queue: rc.label}, o, h)
}

// stats is stream_stats.lua for one group ("" = all) and its decoder.
func (s *redisStream) stats(group string) (*store.ScriptCmd, func() (Stats, error)) {
	k := s.r.keys
	cmd := streamStatsScript.Cmd([]string{s.key, s.meta, s.dead}, s.kindArg(),
		strings.TrimSuffix(k.QueueRetry(s.name, "g"), "g"), strings.TrimSuffix(k.QueueConsumers(s.name, "g"), "g"),
		ConsumerLiveness.Milliseconds(), group)
	return cmd, func() (Stats, error) {
		if err := cmd.Err(); err != nil {
			return Stats{}, opErr("stats", s.name, err)
		}
		rep := store.ReadReply("queue: stats "+strconv.Quote(s.name), cmd.Cmd)
		st := Stats{Name: s.name, Kind: s.kind, Length: rep.Int(), DeadLetters: rep.Int(), Trimmed: rep.Int(), DeadDropped: rep.Int()}
		n := rep.Int()
		for i := int64(0); i < n && rep.Err() == nil; i++ {
			g := Stats{Name: rep.Str(), Kind: s.kind}
			pending, retrying := rep.Int(), rep.Int()
			g.Retrying = retrying
			g.InFlight = pending - retrying
			g.Ready = rep.Int()
			g.Consumers = rep.Int()
			g.Expired, g.Reclaimed, g.Nacked, g.DeadLettered = rep.Int(), rep.Int(), rep.Int(), rep.Int()
			st.Groups = append(st.Groups, g)
		}
		if err := rep.End(); err != nil {
			return Stats{}, err
		}
		return st, nil
	}
}

// redisReliable is a Redis reliable queue.
type redisReliable struct {
	*redisReceiver
}

func (q *redisReliable) Name() string { return q.s.name }

func (q *redisReliable) Push(body []byte) *store.Op[string] { return q.s.pushOne(body) }

func (q *redisReliable) PushBatch(bodies [][]byte) *store.Op[[]string] {
	if len(bodies) == 0 {
		return done([]string{})
	}
	return q.s.push("push_batch", bodies)
}

func (q *redisReliable) Length() *store.Op[int64] {
	cmd := redis.NewIntCmd(context.Background(), "xlen", q.s.key)
	return store.Commands(q.s.r.c, func() (int64, error) {
		n, err := cmd.Result()
		if err != nil {
			return 0, opErr("length", q.s.name, err)
		}
		return n, nil
	}, cmd)
}

func (q *redisReliable) Purge() *store.Op[int64] {
	cmd := purgeScript.Cmd([]string{q.s.key, q.retry})
	return store.Commands(q.s.r.c, func() (int64, error) {
		n, err := cmd.Int64()
		if err != nil {
			return 0, opErr("purge", q.s.name, err)
		}
		return n, nil
	}, cmd)
}

func (q *redisReliable) Stats() *store.Op[Stats] {
	cmd, decode := q.s.stats(reliableGroup)
	return store.Commands(q.s.r.c, func() (Stats, error) {
		st, err := decode()
		if err != nil {
			return st, err
		}
		out := Stats{Name: st.Name, Kind: KindReliable, Length: st.Length, DeadLetters: st.DeadLetters, DeadDropped: st.DeadDropped}
		if len(st.Groups) == 1 {
			g := st.Groups[0]
			out.Ready, out.InFlight, out.Retrying, out.Consumers = g.Ready, g.InFlight, g.Retrying, g.Consumers
			out.Expired, out.Reclaimed, out.Nacked, out.DeadLettered = g.Expired, g.Reclaimed, g.Nacked, g.DeadLettered
		}
		return out, nil
	}, cmd)
}

func (q *redisReliable) DeadLetters() DeadLetters { return &redisDeadLetters{s: q.s} }

// redisBroadcast is a Redis broadcast queue.
type redisBroadcast struct {
	s *redisStream
}

func (q *redisBroadcast) Name() string { return q.s.name }

func (q *redisBroadcast) Push(body []byte) *store.Op[string] { return q.s.pushOne(body) }

func (q *redisBroadcast) Group(name string) (Group, error) {
	if err := checkName("group", name); err != nil {
		return nil, err
	}
	if q.s.r.isClosed() {
		return nil, opErr("group", q.s.name, ErrClosed)
	}
	return &redisGroupView{q.s.receiver(name)}, nil
}

func (q *redisBroadcast) Subscribe(ctx context.Context, group string, o ConsumeOptions, h Handler) (StopFunc, error) {
	return subscribe(ctx, q, group, o, h)
}

func (q *redisBroadcast) RemoveGroup(name string) *store.Op[bool] {
	if err := checkName("group", name); err != nil {
		return store.Failed[bool](err)
	}
	k := q.s.r.keys
	cmd := groupScript.Cmd([]string{q.s.key, k.QueueRetry(q.s.name, name), k.QueueConsumers(q.s.name, name)}, "remove", name)
	return store.Commands(q.s.r.c, func() (bool, error) {
		n, err := cmd.Int64()
		if err != nil {
			return false, opErr("remove group", q.s.name, err)
		}
		return n == 1, nil
	}, cmd)
}

func (q *redisBroadcast) Length() *store.Op[int64] {
	cmd := redis.NewIntCmd(context.Background(), "xlen", q.s.key)
	return store.Commands(q.s.r.c, func() (int64, error) {
		n, err := cmd.Result()
		if err != nil {
			return 0, opErr("length", q.s.name, err)
		}
		return n, nil
	}, cmd)
}

func (q *redisBroadcast) Stats() *store.Op[Stats] {
	cmd, decode := q.s.stats("")
	return store.Commands(q.s.r.c, func() (Stats, error) {
		st, err := decode()
		if err != nil {
			return st, err
		}
		for _, g := range st.Groups {
			sumGroup(&st, g)
		}
		sortGroups(st.Groups)
		return st, nil
	}, cmd)
}

func (q *redisBroadcast) DeadLetters() DeadLetters { return &redisDeadLetters{s: q.s} }

// redisGroupView is a broadcast group's public face.
type redisGroupView struct {
	*redisReceiver
}

func (g *redisGroupView) Name() string { return g.group }

func (g *redisGroupView) Join() *store.Op[struct{}] {
	cmd := groupScript.Cmd([]string{g.s.key, g.retry, g.consumers}, "join", g.group)
	return store.Commands(g.s.r.c, func() (struct{}, error) {
		if err := cmd.Err(); err != nil {
			return struct{}{}, opErr("join", g.label, err)
		}
		return struct{}{}, nil
	}, cmd)
}

func (g *redisGroupView) Stats() *store.Op[Stats] {
	cmd, decode := g.s.stats(g.group)
	return store.Commands(g.s.r.c, func() (Stats, error) {
		st, err := decode()
		if err != nil {
			return st, err
		}
		if len(st.Groups) == 1 {
			return st.Groups[0], nil
		}
		return Stats{Name: g.group, Kind: KindBroadcast}, nil
	}, cmd)
}

// redisDeadLetters are a Redis queue's dead letters.
type redisDeadLetters struct {
	s *redisStream
}

func (l *redisDeadLetters) read(start, count int) *store.ScriptCmd {
	return deadReadScript.Cmd([]string{l.s.dead, l.s.meta}, millis(l.s.o.DeadLetter.TTL), start, count)
}

func (l *redisDeadLetters) Range(start, count int) *store.Op[[]DeadLetter] {
	if start < 0 || count < 0 {
		return store.Failed[[]DeadLetter](invalid("dead_letter range", l.s.name, "start %d and count %d must be >= 0", start, count))
	}
	cmd := l.read(start, count)
	return store.Commands(l.s.r.c, func() ([]DeadLetter, error) {
		if err := cmd.Err(); err != nil {
			return nil, opErr("dead_letter range", l.s.name, err)
		}
		rep := store.ReadReply("queue: dead_letter range "+strconv.Quote(l.s.name), cmd.Cmd)
		out := []DeadLetter{}
		for rep.Len() > 0 && rep.Err() == nil {
			dl := DeadLetter{ID: rep.Str(), MessageID: rep.Str(), Body: []byte(rep.Str()), Deliveries: int(rep.Int()), Group: rep.Str()}
			if k, ok := parseKey(dl.ID); ok {
				dl.At = fromMs(k.ms)
			}
			out = append(out, dl)
		}
		return out, rep.End()
	}, cmd)
}

func (l *redisDeadLetters) Length() *store.Op[int64] {
	cmd := l.read(-1, 0)
	return store.Commands(l.s.r.c, func() (int64, error) {
		if err := cmd.Err(); err != nil {
			return 0, opErr("dead_letter length", l.s.name, err)
		}
		rep := store.ReadReply("queue: dead_letter length "+strconv.Quote(l.s.name), cmd.Cmd)
		n := rep.Int()
		return n, rep.End()
	}, cmd)
}

func (l *redisDeadLetters) requeue(op, id string) (*store.ScriptCmd, func() (int, error)) {
	s := l.s
	cmd := deadRequeueScript.Cmd([]string{s.dead, s.key, s.meta, s.flag}, s.kindArg(), id, s.o.MaxLength,
		s.channel, reliableGroup, millis(s.o.MessageTTL), millis(s.o.DeadLetter.TTL))
	return cmd, func() (int, error) {
		if err := cmd.Err(); err != nil {
			return 0, opErr(op, s.name, err)
		}
		rep := store.ReadReply("queue: "+op+" "+strconv.Quote(s.name), cmd.Cmd)
		moved, left := rep.Int(), rep.Int()
		if err := rep.End(); err != nil {
			return 0, err
		}
		switch {
		case moved < 0:
			return 0, opErr(op, s.name, fmt.Errorf("dead letter %q: %w", id, ErrNotFound))
		case left > 0:
			return int(moved), opErr(op, s.name, ErrFull)
		}
		return int(moved), nil
	}
}

func (l *redisDeadLetters) Requeue(id string) *store.Op[struct{}] {
	if id == "" {
		return store.Failed[struct{}](invalid("dead_letter requeue", l.s.name, "empty id"))
	}
	cmd, decode := l.requeue("dead_letter requeue", id)
	return store.Commands(l.s.r.c, func() (struct{}, error) {
		_, err := decode()
		return struct{}{}, err
	}, cmd).Durable(l.s.r.durable)
}

func (l *redisDeadLetters) RequeueAll() *store.Op[int] {
	cmd, decode := l.requeue("dead_letter requeue_all", "")
	return store.Commands(l.s.r.c, decode, cmd).Durable(l.s.r.durable)
}

func (l *redisDeadLetters) Purge() *store.Op[int64] {
	cmd := purgeScript.Cmd([]string{l.s.dead})
	return store.Commands(l.s.r.c, func() (int64, error) {
		n, err := cmd.Int64()
		if err != nil {
			return 0, opErr("dead_letter purge", l.s.name, err)
		}
		return n, nil
	}, cmd)
}

func (l *redisDeadLetters) Delete(ids ...string) *store.Op[int64] {
	if err := checkDeadIDs(l.s.name, ids); err != nil {
		return store.Failed[int64](err)
	}
	cmd := redis.NewIntCmd(context.Background(), append([]any{"XDEL", l.s.dead}, toAny(ids)...)...)
	return store.Commands(l.s.r.c, func() (int64, error) {
		n, err := cmd.Result()
		if err != nil {
			return 0, opErr("dead_letter delete", l.s.name, err)
		}
		return n, nil
	}, cmd)
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
