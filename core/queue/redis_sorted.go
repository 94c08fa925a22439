package queue

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/clock"
)

// redisSorted is a plain (list), delay or priority (sorted set) queue on
// Redis, with its notifier.
type redisSorted struct {
	r    *Redis
	kind Kind
	name string
	o    Options

	key, meta, flag, consumers, channel string
	n                                   *notifier[Message]
	seen                                seenGate
}

func newRedisSorted(r *Redis, kind Kind, name string, o Options) *redisSorted {
	k := r.keys
	s := &redisSorted{r: r, kind: kind, name: name, o: o,
		key: k.Queue(name), meta: k.QueueMeta(name), flag: k.QueueWaiting(name),
		consumers: k.QueueConsumers(name, ""), channel: k.QueueNotify(name)}
	s.n = newNotifier(name, r.bus, r.channel(name), r.t, r.t.recheck, &r.wg,
		func(ctx context.Context, n int, wait bool) (popResult[Message], error) {
			return s.popN(n, wait).Do(ctx)
		},
		func(ctx context.Context, items []Message) error {
			_, err := s.unpop(items).Do(ctx)
			return err
		})
	return s
}

func (s *redisSorted) Name() string { return s.name }

// pushResult decodes the {ok, length} reply of the push scripts.
func pushResult(op, name string, cmd *store.ScriptCmd) func() (struct{}, error) {
	return func() (struct{}, error) {
		if err := cmd.Err(); err != nil {
			return struct{}{}, scriptErr(op, name, err)
		}
		rep := store.ReadReply("queue: "+op+" "+strconv.Quote(name), cmd.Cmd)
		ok, _ := rep.Int(), rep.Int()
		if err := rep.End(); err != nil {
			return struct{}{}, err
		}
		if ok == 0 {
			return struct{}{}, opErr(op, name, ErrFull)
		}
		return struct{}{}, nil
	}
}

func bodiesArgs(head []any, bodies [][]byte) []any {
	args := make([]any, 0, len(head)+len(bodies))
	args = append(args, head...)
	for _, b := range bodies {
		args = append(args, b)
	}
	return args
}

// pushZset runs zset_push.lua.
func (s *redisSorted) pushZset(op, mode, value string, bodies [][]byte) *store.Op[struct{}] {
	cmd := zsetPushScript.Cmd([]string{s.key, s.meta, s.flag},
		bodiesArgs([]any{s.kind.String(), s.o.MaxLength, s.channel, mode, value}, bodies)...)
	return store.Commands(s.r.c, pushResult(op, s.name, cmd), cmd).Durable(s.r.durable)
}

// popN pops up to n messages; wait marks the caller as a waiter.
func (s *redisSorted) popN(n int, wait bool) *store.Op[popResult[Message]] {
	cmd, decode := s.popCmd(n, wait)
	return store.Commands(s.r.c, decode, cmd)
}

// popCmd is the pop script command and its decoder.
func (s *redisSorted) popCmd(n int, wait bool) (*store.ScriptCmd, func() (popResult[Message], error)) {
	flagTTL := int64(0)
	if wait {
		flagTTL = s.r.t.flagTTL.Milliseconds()
	}
	what := "queue: pop " + strconv.Quote(s.name)
	if s.kind == KindPlain {
		cmd := listPopScript.Cmd([]string{s.key, s.meta, s.flag, s.consumers},
			n, millis(s.o.MessageTTL), flagTTL, s.seen.consumer(s.r.consumer))
		return cmd, func() (popResult[Message], error) {
			if err := cmd.Err(); err != nil {
				return popResult[Message]{}, scriptErr("pop", s.name, err)
			}
			rep := store.ReadReply(what, cmd.Cmd)
			res := popResult[Message]{serverNow: rep.Int(), next: rep.Int()}
			for rep.Len() > 0 && rep.Err() == nil {
				raw := rep.Str()
				msg, ok := parseListElement(raw)
				if !ok {
					msg = Message{Body: []byte(raw), raw: raw} // not ours: deliver as is
				}
				msg.from = s
				res.items = append(res.items, msg)
			}
			return res, rep.End()
		}
	}
	cmd := zsetPopScript.Cmd([]string{s.key, s.meta, s.flag, s.consumers},
		s.kind.String(), n, millis(s.o.MessageTTL), flagTTL, s.seen.consumer(s.r.consumer))
	return cmd, func() (popResult[Message], error) {
		if err := cmd.Err(); err != nil {
			return popResult[Message]{}, scriptErr("pop", s.name, err)
		}
		rep := store.ReadReply(what, cmd.Cmd)
		res := popResult[Message]{serverNow: rep.Int(), next: rep.Int()}
		for rep.Len() > 0 && rep.Err() == nil {
			member, score := rep.Str(), rep.Str()
			msg, err := parseZsetMember(member, score, s.kind)
			if err != nil {
				return res, opErr("pop", s.name, err)
			}
			msg.from = s
			res.items = append(res.items, msg)
		}
		return res, rep.End()
	}
}

// parseListElement splits "<enqueued_ms>:<body>".
func parseListElement(raw string) (Message, bool) {
	head, body, ok := strings.Cut(raw, ":")
	if !ok {
		return Message{}, false
	}
	enq, err := strconv.ParseInt(head, 10, 64)
	if err != nil {
		return Message{}, false
	}
	return Message{Body: []byte(body), EnqueuedAt: fromMs(enq), raw: raw}, true
}

// parseZsetMember splits "<16 hex seq><enqueued_ms>:<body>" and its score.
func parseZsetMember(member, score string, kind Kind) (Message, error) {
	bad := func() (Message, error) {
		return Message{}, store.ErrReply
	}
	if len(member) < 17 {
		return bad()
	}
	msg, ok := parseListElement(member[16:])
	if !ok {
		return bad()
	}
	sc, err := strconv.ParseFloat(score, 64)
	if err != nil {
		return bad()
	}
	if kind == KindDelay {
		msg.Due = fromMs(int64(sc))
	} else {
		msg.Priority = sc
	}
	msg.raw = score + "\x00" + member
	return msg, nil
}

// Unpop puts m back unchanged: a plain message at the head of the list, a
// delay or priority message with its score and member (so its sequence
// number keeps its place among equal scores).
func (s *redisSorted) Unpop(m Message) *store.Op[struct{}] {
	if m.raw == "" {
		return store.Failed[struct{}](invalid("unpop", s.name, "a message no pop returned"))
	}
	if m.from != s {
		return store.Failed[struct{}](opErr("unpop", s.name, ErrForeign))
	}
	if s.r.isClosed() {
		return store.Failed[struct{}](opErr("unpop", s.name, ErrClosed))
	}
	return s.unpop([]Message{m})
}

// unpop puts popped messages back.
func (s *redisSorted) unpop(items []Message) *store.Op[struct{}] {
	args := []any{s.channel}
	sc := listUnpopScript
	if s.kind != KindPlain {
		sc = zsetUnpopScript
	}
	for _, m := range items {
		if s.kind == KindPlain {
			args = append(args, m.raw)
			continue
		}
		score, member, _ := strings.Cut(m.raw, "\x00")
		args = append(args, score, member)
	}
	cmd := sc.Cmd([]string{s.key, s.flag}, args...)
	return store.Commands(s.r.c, func() (struct{}, error) {
		return struct{}{}, scriptErr("unpop", s.name, cmd.Err())
	}, cmd)
}

func (s *redisSorted) pop() *store.Op[Message] {
	cmd, decode := s.popCmd(1, false)
	return store.Commands(s.r.c, func() (Message, error) {
		res, err := decode()
		if err != nil {
			return Message{}, err
		}
		if len(res.items) == 0 {
			return Message{}, opErr("pop", s.name, ErrEmpty)
		}
		return res.items[0], nil
	}, cmd)
}

func (s *redisSorted) PopWait(timeout time.Duration, done func(Message, error)) func() bool {
	if s.r.isClosed() {
		done(Message{}, opErr("pop", s.name, ErrClosed))
		return func() bool { return false }
	}
	return s.n.PopWait(timeout, done)
}

func (s *redisSorted) Length() *store.Op[int64] {
	var cmd *redis.IntCmd
	if s.kind == KindPlain {
		cmd = redis.NewIntCmd(context.Background(), "llen", s.key)
	} else {
		cmd = redis.NewIntCmd(context.Background(), "zcard", s.key)
	}
	return store.Commands(s.r.c, func() (int64, error) {
		n, err := cmd.Result()
		if err != nil {
			return 0, opErr("length", s.name, err)
		}
		return n, nil
	}, cmd)
}

func (s *redisSorted) Purge() *store.Op[int64] {
	cmd := purgeScript.Cmd([]string{s.key})
	return store.Commands(s.r.c, func() (int64, error) {
		n, err := cmd.Int64()
		if err != nil {
			return 0, opErr("purge", s.name, err)
		}
		return n, nil
	}, cmd)
}

func (s *redisSorted) Stats() *store.Op[Stats] {
	cmd := statsScript.Cmd([]string{s.key, s.meta, s.consumers}, s.kind.String(), ConsumerLiveness.Milliseconds())
	return store.Commands(s.r.c, func() (Stats, error) {
		if err := cmd.Err(); err != nil {
			return Stats{}, opErr("stats", s.name, err)
		}
		rep := store.ReadReply("queue: stats "+strconv.Quote(s.name), cmd.Cmd)
		st := Stats{Name: s.name, Kind: s.kind, Length: rep.Int(), Pending: rep.Int(), Consumers: rep.Int(), Expired: rep.Int()}
		st.Ready = st.Length - st.Pending
		return st, rep.End()
	}, cmd)
}

func (s *redisSorted) Consume(o ConsumeOptions, h Handler) (StopFunc, error) {
	if s.r.isClosed() {
		return nil, opErr("consume", s.name, ErrClosed)
	}
	return consume(messageSource{w: s, up: s, clk: clock.Real, reg: s.r.register, queue: s.name}, o, h)
}

// redisPlain is a Redis FIFO queue.
type redisPlain struct{ *redisSorted }

func (q *redisPlain) Push(body []byte) *store.Op[struct{}] { return q.PushBatch([][]byte{body}) }

func (q *redisPlain) PushBatch(bodies [][]byte) *store.Op[struct{}] {
	cmd := listPushScript.Cmd([]string{q.key, q.meta, q.flag}, bodiesArgs([]any{q.o.MaxLength, q.channel}, bodies)...)
	return store.Commands(q.r.c, pushResult("push", q.name, cmd), cmd).Durable(q.r.durable)
}

func (q *redisPlain) Pop() *store.Op[Message] { return q.pop() }

// redisDelay is a Redis delay queue.
type redisDelay struct{ *redisSorted }

func (q *redisDelay) Push(body []byte, delay time.Duration) *store.Op[struct{}] {
	if err := checkDelay("push", q.name, delay); err != nil {
		return store.Failed[struct{}](err)
	}
	return q.pushZset("push", "d", strconv.FormatInt(millis(delay), 10), [][]byte{body})
}

func (q *redisDelay) PushAt(body []byte, at time.Time) *store.Op[struct{}] {
	return q.pushZset("push_at", "a", strconv.FormatInt(ms(at), 10), [][]byte{body})
}

func (q *redisDelay) Pop() *store.Op[Message] { return q.pop() }

func (q *redisDelay) count(which string) *store.Op[int64] {
	cmd := zsetCountScript.Cmd([]string{q.key}, which)
	return store.Commands(q.r.c, func() (int64, error) {
		n, err := cmd.Int64()
		if err != nil {
			return 0, opErr(which, q.name, err)
		}
		return n, nil
	}, cmd)
}

func (q *redisDelay) Pending() *store.Op[int64] { return q.count("pending") }
func (q *redisDelay) Ready() *store.Op[int64]   { return q.count("ready") }

// redisPriority is a Redis priority queue.
type redisPriority struct{ *redisSorted }

func (q *redisPriority) Push(body []byte, priority float64) *store.Op[struct{}] {
	if err := checkPriority("push", q.name, priority); err != nil {
		return store.Failed[struct{}](err)
	}
	return q.pushZset("push", "s", formatScore(priority), [][]byte{body})
}

func (q *redisPriority) Pop() *store.Op[Message] { return q.pop() }

// formatScore writes a priority exactly (shortest round-trip form; Redis
// parses "inf" and "-inf").
func formatScore(p float64) string {
	switch {
	case math.IsInf(p, 1):
		return "+inf"
	case math.IsInf(p, -1):
		return "-inf"
	}
	return strconv.FormatFloat(p, 'g', -1, 64)
}

// seenGate lets a queue record its consumer in the consumers set about once
// a second instead of on every pop.
type seenGate struct{ next atomic.Int64 }

// due reports whether this pop should record the consumer.
func (g *seenGate) due() bool {
	now := time.Now().UnixNano()
	n := g.next.Load()
	return now >= n && g.next.CompareAndSwap(n, now+int64(time.Second))
}

// consumer is consumer when due, else "".
func (g *seenGate) consumer(consumer string) string {
	if g.due() {
		return consumer
	}
	return ""
}
