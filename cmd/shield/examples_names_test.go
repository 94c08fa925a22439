package main

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// Every examples/*.lua keeps its data under names of its own
// ("example:<file>:"), so examples sharing one Redis never read each
// other's data (examples/embed on Redis reported another example's boss).
// Each runs on Redis under a fresh prefix; every key it leaves carries its
// namespace.
func TestExamplesUseTheirOwnNames(t *testing.T) {
	examples, err := filepath.Glob("../../examples/*.lua")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	opt, err := redis.ParseURL(testredis.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	for _, ex := range examples {
		name := strings.TrimSuffix(filepath.Base(ex), ".lua")
		t.Run(name, func(t *testing.T) {
			cfg, prefix := redisConfigFile(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if r := runShield(t, ctx, "run", "--config", cfg, ex, "demo"); r.code != 0 {
				t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
			}
			keys, err := c.Keys(ctx, prefix+"*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) == 0 {
				t.Fatal("the example left no key: nothing was checked")
			}
			sort.Strings(keys)
			ns := "example:" + name + ":"
			for _, k := range keys {
				if !strings.Contains(strings.TrimPrefix(k, prefix), ns) {
					t.Errorf("key %q is not under the example's names %q (all keys: %q)", k, ns, keys)
				}
			}
		})
	}
}
