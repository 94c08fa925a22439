package store

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ScanKeys returns every key matching pattern (SCAN MATCH), on every master
// of a Cluster. It is for operator tools (the admin CLI lists queues and
// tasks with it), never for a hot path: SCAN walks the whole key space.
func ScanKeys(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var found []string
		for it.Next(ctx) {
			found = append(found, it.Val())
		}
		if err := it.Err(); err != nil {
			return err
		}
		mu.Lock()
		keys = append(keys, found...)
		mu.Unlock()
		return nil
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, c)
	}
	return keys, err
}
