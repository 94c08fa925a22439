package edge

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/core/store"
)

// TestSchedulerDefaults: the options of the default config are the
// defaults an Engine without Config.Defaults uses (core/scheduler's
// Options documents them without importing config).
func TestSchedulerDefaults(t *testing.T) {
	want := SchedulerOptions(config.Default().Scheduler)
	e, err := scheduler.New(scheduler.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if got := e.DefaultOptions(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Engine defaults %+v, the default config's %+v", got, want)
	}
	c := config.Default().Scheduler
	c.Timezone, c.Distributed.LockTTL, c.Retry.MaxRetries, c.Retry.RetryDelay = "Asia/Tokyo", 1500, 7, 250
	o := SchedulerOptions(c)
	if o.Timezone != "Asia/Tokyo" || o.LockTTL != 1500*time.Millisecond || o.MaxRetries != 7 || o.RetryDelay != 250*time.Millisecond {
		t.Fatalf("SchedulerOptions(%+v) = %+v", c, o)
	}
}

// TestRedisOptions: every client key of global.redis reaches store.Options,
// milliseconds become durations, and the errors stay those of the config's
// keys.
func TestRedisOptions(t *testing.T) {
	r := config.Redis{URL: "redis://u:secret@h:1/2", Addrs: []string{"a:1", "b:2"}, Cluster: true, MasterName: "m",
		Username: "u2", Password: "p2", DB: 3, TLS: true, DialTimeout: 1, ReadTimeout: 2, WriteTimeout: 3, PoolSize: 4,
		Prefix: "x:", Inherit: false}
	want := store.Options{URL: r.URL, Addrs: r.Addrs, Cluster: true, MasterName: "m", Username: "u2", Password: "p2", DB: 3,
		TLS: true, DialTimeout: time.Millisecond, ReadTimeout: 2 * time.Millisecond, WriteTimeout: 3 * time.Millisecond, PoolSize: 4}
	if got := RedisOptions(r); !reflect.DeepEqual(got, want) {
		t.Fatalf("RedisOptions = %+v, want %+v", got, want)
	}
	// Every field of config.Redis is a client option of the same name or
	// read by the Module itself: a new key must be mapped in RedisOptions.
	notClient := map[string]bool{"Inherit": true, "Prefix": true, "WaitReplicas": true, "WaitTimeout": true}
	ct, ot := reflect.TypeOf(config.Redis{}), reflect.TypeOf(store.Options{})
	for i := range ct.NumField() {
		name := ct.Field(i).Name
		if _, ok := ot.FieldByName(name); ok == notClient[name] {
			t.Errorf("config.Redis.%s: a client option is %v, in store.Options %v", name, !notClient[name], ok)
		}
	}
	if n := ct.NumField() - len(notClient); n != ot.NumField() {
		t.Errorf("store.Options has %d fields, config.Redis %d client keys", ot.NumField(), n)
	}

	if got := DescribeRedis(config.Redis{URL: "redis://u:secret@h:1/2"}); got != "redis://***@h:1/2" {
		t.Errorf("DescribeRedis(url) = %q", got)
	}
	if got := DescribeRedis(config.Redis{Addrs: []string{"a:1", "b:2"}}); got != "a:1,b:2" {
		t.Errorf("DescribeRedis(addrs) = %q", got)
	}
	if got := DescribeRedis(config.Redis{Inherit: true}); got != "the host's client (global.redis.inherit)" {
		t.Errorf("DescribeRedis(inherit) = %q", got)
	}

	if _, err := store.NewClient(RedisOptions(config.Redis{})); !errors.Is(err, store.ErrNotConfigured) {
		t.Errorf("no server: %v, want ErrNotConfigured", err)
	}
	if _, err := store.NewClient(RedisOptions(config.Redis{URL: "http://h:1"})); err == nil || !strings.HasPrefix(err.Error(), "global.redis.url: ") {
		t.Errorf("bad URL: %v, want a global.redis.url error", err)
	}
	if _, err := store.NewClient(RedisOptions(config.Redis{URL: "http://h:1", Cluster: true})); err == nil || !strings.HasPrefix(err.Error(), "global.redis.url: ") {
		t.Errorf("bad cluster URL: %v, want a global.redis.url error", err)
	}
}
