package kv

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// TestRedis runs the conformance suite on every Redis deployment:
// standalone, cluster and Sentinel.
func TestRedis(t *testing.T) {
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			runConformance(t, func(t *testing.T) Store {
				return NewRedis(c, testredis.Prefix(t))
			}, time.Sleep)
		})
	}
}

func TestRedisOpsAreBatchable(t *testing.T) {
	s := NewRedis(redis.NewClient(&redis.Options{}), "p:")
	if s.Get("k").Kind() != store.KindRedis || s.IncrBy("k", 1).Kind() != store.KindRedis {
		t.Fatal("single-command Redis ops must be KindRedis (batched by the runtime)")
	}
}

// The store writes exactly store.Keys{Prefix: p}.Global(key), as plain
// strings, so other tools (and docs/keys.md) can rely on the layout.
func TestRedisKeyLayout(t *testing.T) {
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			prefix := testredis.Prefix(t)
			s := NewRedis(c, prefix)
			if err := syncOf(s).Set(ctx, "player:1", []byte(`{"hp":10}`), time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := syncOf(s).MSet(ctx, []Pair{{"a", []byte("1")}, {"b", []byte("2")}}, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := syncOf(s).IncrBy(ctx, "n", 2); err != nil {
				t.Fatal(err)
			}
			keys := store.Keys{Prefix: prefix}
			for key, want := range map[string]string{"player:1": `{"hp":10}`, "a": "1", "b": "2", "n": "2"} {
				got, err := c.Get(ctx, keys.Global(key)).Result()
				if err != nil || got != want {
					t.Fatalf("raw GET %q = %q, %v; want %q", keys.Global(key), got, err, want)
				}
			}
			if d := c.PTTL(ctx, keys.Global("player:1")).Val(); d <= 0 || d > time.Hour {
				t.Fatalf("raw PTTL = %v; want the hour set through the store", d)
			}
			// A raw write is visible through the store and vice versa.
			c.Set(ctx, keys.Global("raw"), "7", 0)
			if v, err := syncOf(s).IncrBy(ctx, "raw", 1); err != nil || v != 8 {
				t.Fatalf("IncrBy on a raw key = %v, %v", v, err)
			}
			if existed, _ := syncOf(s).Delete(ctx, "raw"); !existed {
				t.Fatal("Delete did not find the raw key")
			}
			if n := c.Exists(ctx, keys.Global("raw")).Val(); n != 0 {
				t.Fatal("Delete left the raw key")
			}
		})
	}
}

func TestKeySlotMatchesCluster(t *testing.T) {
	c := testredis.Cluster(t)
	keys := []string{
		"", "a", "123456789", "{user1}.following", "{user1}.followers",
		"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}", "{", "}", "a{b", "a}b{c}",
		"ключ", "\x00\xff\x80", "shield:global:{tag}x", "shield:global:{tag}y",
	}
	for i := range 200 {
		keys = append(keys, "test:0123456789ab:global:key-"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("9", i/26))
	}
	for _, k := range keys {
		want, err := c.ClusterKeySlot(t.Context(), k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := keySlot(k); int64(got) != want {
			t.Fatalf("keySlot(%q) = %d; CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}

// A store whose Redis cannot be reached returns errors naming the operation
// and the key, for every method, on both client kinds.
func TestRedisUnreachable(t *testing.T) {
	clients := map[string]redis.UniversalClient{
		"standalone": redis.NewClient(&redis.Options{Addr: "127.0.0.1:1",
			MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1}),
		"cluster": redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"},
			MaxRetries: -1, MaxRedirects: -1, DialTimeout: time.Second, DialerRetries: 1}),
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			defer c.Close()
			s := NewRedis(c, "p:")
			ctx := t.Context()
			check := func(err error, want string) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s: no error from an unreachable server", want)
				}
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not contain %q", err, want)
				}
				if errors.Is(err, ErrNotNumber) || errors.Is(err, ErrNotFinite) {
					t.Fatalf("connection error %q classified as a value error", err)
				}
			}
			_, found, err := syncOf(s).Get(ctx, "the-key")
			check(err, `kv: get "the-key"`)
			if found {
				t.Fatal("Get found a key on an unreachable server")
			}
			vals, err := syncOf(s).MGet(ctx, []string{"k1", "k2"})
			check(err, `kv: mget "k1"`)
			if vals != nil {
				t.Fatalf("MGet returned values with an error: %q", vals)
			}
			check(syncOf(s).Set(ctx, "the-key", []byte("1"), 0), `kv: set "the-key"`)
			check(syncOf(s).Set(ctx, "the-key", []byte("1"), time.Second), `kv: set "the-key"`)
			check(syncOf(s).MSet(ctx, []Pair{{"m1", nil}}, 0), `kv: mset "m1"`)
			err = syncOf(s).MSet(ctx, []Pair{{"m1", nil}, {"m2", nil}, {"m3", nil}}, time.Second)
			check(err, `kv: mset "m`)
			_, err = syncOf(s).Delete(ctx, "the-key")
			check(err, `kv: delete "the-key"`)
			_, err = syncOf(s).IncrBy(ctx, "the-key", 1)
			check(err, `kv: incrby "the-key"`)
			_, _, err = syncOf(s).TTL(ctx, "the-key")
			check(err, `kv: ttl "the-key"`)
		})
	}
}
