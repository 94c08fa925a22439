package bindings

import (
	"context"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/codec"
	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

const subscriptionType = "shield.subscription"

// maxPending bounds the messages a slow subscriber may have queued; beyond
// it the oldest are dropped (pub/sub is at-most-once) and the drop is logged.
const maxPending = 10000

// subscribeTimeout bounds how long g:subscribe waits for Redis to confirm.
const subscribeTimeout = 10 * time.Second

// subscription delivers one channel's (or pattern's) messages to a Lua
// function, one message at a time, each call a task of its own: fn may block,
// and the next message waits until it returns. Loop-only except deliver.
type subscription struct {
	rt      *runtime.Runtime
	fn      *lua.LFunction
	name    string // channel or pattern, for logs
	bus     pubsub.Subscription
	pending []pubsub.Message
	running bool
	closed  bool
	inline  bool // the bus is in-process: unsubscribing does no I/O
	dropped int
	forget  func() // drops the runtime's closer once unsubscribed
}

// handler is called by the bus on its own goroutine: hand over to the loop.
func (s *subscription) handler(m pubsub.Message) {
	s.rt.Post(func() { s.deliver(m) })
}

func (s *subscription) deliver(m pubsub.Message) {
	if s.closed {
		return
	}
	if len(s.pending) >= maxPending {
		s.pending = s.pending[1:]
		s.dropped++
		if s.dropped == 1 || s.dropped%1000 == 0 {
			s.rt.Log().Warn("shield: subscriber too slow, dropped messages", "channel", s.name, "dropped", s.dropped)
		}
	}
	s.pending = append(s.pending, m)
	if !s.running {
		s.next()
	}
}

func (s *subscription) next() {
	if s.closed || len(s.pending) == 0 {
		s.running = false
		return
	}
	m := s.pending[0]
	s.pending = s.pending[1:]
	s.running = true
	args := []lua.LValue{lua.LString(m.Channel), decode(m.Payload)}
	if m.Pattern != "" {
		args = append(args, lua.LString(m.Pattern))
	}
	s.rt.Spawn("subscriber "+s.name, s.fn, args, func(err error) {
		if err != nil {
			s.rt.CallbackFailed("subscriber", s.name, err)
		}
		s.next()
	})
}

// stop ends delivery at once and returns the bus subscription to cancel
// (nil when there is none or it was already stopped).
func (s *subscription) stop() pubsub.Subscription {
	if s.closed {
		return nil
	}
	s.closed = true
	s.pending = nil
	s.rt.Unref()
	if s.forget != nil {
		s.forget()
	}
	return s.bus
}

// close stops delivery and unsubscribes off the loop (used at shutdown).
func (s *subscription) close() {
	if bs := s.stop(); bs != nil {
		go bs.Unsubscribe()
	}
}

func installSubscriptionType(rt *runtime.Runtime) {
	L := rt.L
	mt := L.NewTypeMetatable(subscriptionType)
	mt.RawSetString("__name", lua.LString(subscriptionType))
	methods := L.NewTable()
	methods.RawSetString("unsubscribe", rt.Blocking(func(L *lua.LState) int { return unsubscribe(rt, L) }))
	runtime.SetMethods(L, mt, methods)
}

// sub:unsubscribe(): no message is delivered after it returns; the server
// side is unsubscribed too. Idempotent.
func unsubscribe(rt *runtime.Runtime, L *lua.LState) int {
	s := runtime.SelfAs[*subscription](runtime.ArgsOf(L, subscriptionType, "unsubscribe"), 1, subscriptionType)
	bs := s.stop()
	if bs == nil {
		return 0
	}
	if s.inline {
		bs.Unsubscribe()
		return 0
	}
	return runtime.Run(rt, L, subscriptionType+":unsubscribe", store.Work(func(context.Context) (struct{}, error) {
		bs.Unsubscribe()
		return struct{}{}, nil
	}), func(*lua.LState, struct{}) []lua.LValue { return nil })
}

// g:subscribe(channel, fn) -> subscription; fn(channel, message) runs as a task.
func (b *globalBinding) subscribe(L *lua.LState) int { return b.sub(L, "subscribe", false) }

// g:psubscribe(pattern, fn) -> subscription; fn(channel, message, pattern).
func (b *globalBinding) psubscribe(L *lua.LState) int { return b.sub(L, "psubscribe", true) }

func (b *globalBinding) sub(L *lua.LState, fn string, pattern bool) int {
	a := b.args(L, fn)
	what := "channel"
	if pattern {
		what = "pattern"
	}
	name := a.Name(2, what)
	s := &subscription{rt: b.rt, fn: a.Function(3), name: name, inline: b.g.Inline}
	b.rt.Ref()
	s.forget = b.rt.OnClose(s.close)
	subscribe := func(ctx context.Context) (pubsub.Subscription, error) {
		// Never wait forever for Redis: a subscription that cannot be
		// confirmed in time is an error the script sees.
		ctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
		defer cancel()
		var bs pubsub.Subscription
		var err error
		if pattern {
			bs, err = b.g.Bus.PSubscribe(ctx, name, s.handler)
		} else {
			bs, err = b.g.Bus.Subscribe(ctx, name, s.handler)
		}
		if err != nil {
			b.rt.Post(s.close)
			return nil, err
		}
		return bs, nil
	}
	op := store.Work(subscribe)
	if s.inline {
		op = store.Local(func() (pubsub.Subscription, error) { return subscribe(b.rt.Context()) })
	}
	return runtime.Run(b.rt, L, b.name(fn), op, func(L *lua.LState, bs pubsub.Subscription) []lua.LValue {
		s.bus = bs
		if s.closed { // the runtime closed while subscribing
			go s.bus.Unsubscribe()
		}
		ud := L.NewUserData()
		ud.Value = s
		ud.Metatable = L.GetTypeMetatable(subscriptionType)
		return []lua.LValue{ud}
	})
}

// g:publish(channel, message) -> number of receivers.
func (b *globalBinding) publish(L *lua.LState) int {
	a := b.args(L, "publish")
	ch := a.Name(2, "channel")
	data, err := codec.Encode(L.Get(3))
	if err != nil {
		a.Bad(3, err.Error())
	}
	return runtime.Run(b.rt, L, b.name("publish"), b.g.Bus.PublishOp(ch, data), func(_ *lua.LState, n int64) []lua.LValue {
		return []lua.LValue{lua.LNumber(n)}
	})
}
