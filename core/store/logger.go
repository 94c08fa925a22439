package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// go-redis logs through one process-wide logger (redis.SetLogger). RouteLogs
// sends those lines to l instead of go-redis's own stderr logger, at Warn
// level ("redis: " prefix kept). The last call wins; the logger of a Module
// that closed keeps receiving them until another is routed.
func RouteLogs(l *slog.Logger) {
	if l == nil {
		return
	}
	redisLog.Store(l)
	routeOnce.Do(func() { redis.SetLogger(slogPrinter{}) })
}

var (
	redisLog  atomic.Pointer[slog.Logger]
	routeOnce sync.Once
)

type slogPrinter struct{}

func (slogPrinter) Printf(ctx context.Context, format string, v ...any) {
	if l := redisLog.Load(); l != nil {
		l.WarnContext(ctx, "redis: "+strings.TrimSpace(fmt.Sprintf(format, v...)))
	}
}
