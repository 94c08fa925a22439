package ops

import (
	"context"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisHook returns a go-redis hook that observes every round trip of the
// client it is added to in shield_redis_roundtrip_seconds: a command by its
// name ("evalsha", "get", "brpop", ...), a pipeline as "pipeline", a
// transaction as "multi". Blocking commands are observed too (their time
// includes the wait), under their own names.
func (m *Metrics) RedisHook() redis.Hook { return redisHook{m} }

type redisHook struct{ m *Metrics }

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		h.m.RedisRoundTrip(cmd.Name(), time.Since(start))
		return err
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		op := "pipeline"
		if len(cmds) > 0 && cmds[0].Name() == "multi" {
			op = "multi"
		}
		h.m.RedisRoundTrip(op, time.Since(start))
		return err
	}
}
