package lock

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// newRedisBackend returns a Redis backend under a fresh prefix with its own
// bus (closed when the test ends).
func newRedisBackend(t *testing.T, c redis.UniversalClient, opts ...RedisOption) (*Redis, string) {
	prefix := testredis.Prefix(t)
	bus := pubsub.NewRedis(c, "", pubsub.Events{})
	t.Cleanup(func() { bus.Close() })
	return NewRedis(c, prefix, bus, opts...), prefix
}

// TestRedis runs the conformance suite on every Redis deployment:
// standalone, cluster and Sentinel.
func TestRedis(t *testing.T) {
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			runConformance(t, func(t *testing.T) Backend {
				b, _ := newRedisBackend(t, c)
				return b
			}, time.Sleep)
		})
	}
}

// The backend writes exactly the documented layout, every key of a lock in
// one slot, and publishes on store.Keys.LockReleased.
func TestRedisKeyLayout(t *testing.T) {
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			// A service name with ':' and digits: the shared-hold value is
			// still read back whole.
			const service = "boss:42 manager"
			b, prefix := newRedisBackend(t, c, WithServiceName(service))
			k := store.Keys{Prefix: prefix}
			const lock = "boss"

			// A raw subscriber on the documented channel hears the release.
			var sub *redis.PubSub
			if cc, ok := c.(*redis.ClusterClient); ok {
				sub = cc.Subscribe(ctx, k.LockReleased(lock))
			} else {
				sub = c.(*redis.Client).Subscribe(ctx, k.LockReleased(lock))
			}
			defer sub.Close()
			if _, err := sub.Receive(ctx); err != nil {
				t.Fatal(err)
			}

			g, ok, _, err := try(ctx, b, lock, "node-1:7:co9", Exclusive, Options{TTL: time.Minute})
			if !ok || err != nil {
				t.Fatal(ok, err)
			}
			h, err := c.HGetAll(ctx, k.Lock(lock)).Result()
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"owner": "node-1:7:co9", "count": "1",
				"token": strconv.FormatInt(g.Token, 10), "acquired_at": strconv.FormatInt(g.AcquiredAt.UnixMilli(), 10),
				"service": service,
			}
			if len(h) != len(want) {
				t.Fatalf("HGETALL %s = %v; want %v", k.Lock(lock), h, want)
			}
			for f, v := range want {
				if h[f] != v {
					t.Fatalf("HGETALL %s = %v; want %v", k.Lock(lock), h, want)
				}
			}
			if d := c.PTTL(ctx, k.Lock(lock)).Val(); d <= 0 || d > time.Minute {
				t.Fatalf("PTTL %v", d)
			}
			if v := c.Get(ctx, k.LockToken(lock)).Val(); v != strconv.FormatInt(g.Token, 10) {
				t.Fatalf("token key = %q; want %d", v, g.Token)
			}
			if d := c.PTTL(ctx, k.LockToken(lock)).Val(); d != -1 {
				t.Fatalf("token key PTTL = %v; want no expiry", d)
			}
			// The server time is used: acquired_at is close to Redis TIME.
			now, err := c.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if d := now.Sub(g.AcquiredAt); d < 0 || d > time.Minute {
				t.Fatalf("acquired_at %v vs server time %v", g.AcquiredAt, now)
			}

			// A fair waiter is in the queue and the waiters set.
			fair := Options{TTL: time.Minute, Fair: true, Waiting: true, WaiterTTL: 30 * time.Second}
			if _, ok, _, err := try(ctx, b, lock, "w", Exclusive, fair); ok || err != nil {
				t.Fatal(ok, err)
			}
			q := c.ZRangeWithScores(ctx, k.LockQueue(lock), 0, -1).Val()
			w := c.ZRangeWithScores(ctx, k.LockWaiters(lock), 0, -1).Val()
			if len(q) != 1 || q[0].Member != "w" || len(w) != 1 || w[0].Member != "w" || w[0].Score <= q[0].Score {
				t.Fatalf("queue %v, waiters %v", q, w)
			}
			if err := leave(ctx, b, lock, "w"); err != nil {
				t.Fatal(err)
			}
			if n := c.Exists(ctx, k.LockQueue(lock), k.LockWaiters(lock)).Val(); n != 0 {
				t.Fatalf("%d queue keys left after the only waiter left", n)
			}

			// A waiting writer is in the writers set, with its liveness deadline.
			if _, ok, _, err := try(ctx, b, lock, "writer", Exclusive, Options{TTL: time.Minute, Waiting: true, WaiterTTL: 30 * time.Second}); ok || err != nil {
				t.Fatal(ok, err)
			}
			ws := c.ZRangeWithScores(ctx, k.RWLockWriters(lock), 0, -1).Val()
			if len(ws) != 1 || ws[0].Member != "writer" || int64(ws[0].Score) <= g.AcquiredAt.UnixMilli() {
				t.Fatalf("writers %v", ws)
			}
			if d := c.PTTL(ctx, k.RWLockWriters(lock)).Val(); d <= 0 || d > 31*time.Second {
				t.Fatalf("writers PTTL %v; want the writer's liveness", d)
			}
			if err := leave(ctx, b, lock, "writer"); err != nil {
				t.Fatal(err)
			}
			if n := c.Exists(ctx, k.RWLockWriters(lock)).Val(); n != 0 {
				t.Fatal("writers key left after the only waiting writer left")
			}

			if _, err := rel(ctx, b, lock, "node-1:7:co9", Exclusive); err != nil {
				t.Fatal(err)
			}
			msg, err := sub.ReceiveMessage(ctx)
			if err != nil || msg.Channel != k.LockReleased(lock) {
				t.Fatalf("raw subscriber got %v, %v", msg, err)
			}
			if n := c.Exists(ctx, k.Lock(lock)).Val(); n != 0 {
				t.Fatal("lock hash left after release")
			}

			// Shared holds.
			r, ok, _, err := try(ctx, b, lock, "reader", Shared, Options{TTL: time.Minute})
			if !ok || err != nil {
				t.Fatal(ok, err)
			}
			v := c.HGet(ctx, k.RWLock(lock), "reader").Val()
			if want := strconv.FormatInt(1, 10) + ":" + strconv.FormatInt(r.Token, 10) + ":" + strconv.FormatInt(r.AcquiredAt.UnixMilli(), 10) + ":" + service; v != want {
				t.Fatalf("rwlock field = %q; want %q", v, want)
			}
			// A re-entry and a partial release keep the name; Info reports it.
			if _, ok, _, err := try(ctx, b, lock, "reader", Shared, Options{TTL: time.Minute, Reentrant: true, Token: r.Token}); !ok || err != nil {
				t.Fatal("re-entry:", ok, err)
			}
			if _, err := rel(ctx, b, lock, "reader", Shared); err != nil {
				t.Fatal("partial release:", err)
			}
			if info, err := b.Info(lock).Do(ctx); err != nil || len(info.Owners) != 1 || info.Owners[0] != (Holder{Owner: "reader", Count: 1, ServiceName: service}) {
				t.Fatalf("Info after re-entry and partial release = %+v, %v", info, err)
			}
			if d := c.ZScore(ctx, k.RWLockDeadlines(lock), "reader").Val(); int64(d) <= r.AcquiredAt.UnixMilli() {
				t.Fatalf("reader deadline %v", d)
			}
			for _, key := range []string{k.RWLock(lock), k.RWLockDeadlines(lock)} {
				if d := c.PTTL(ctx, key).Val(); d <= 0 || d > time.Minute+time.Second {
					t.Fatalf("PTTL %s = %v; want the reader's lease", key, d)
				}
			}
			if _, err := rel(ctx, b, lock, "reader", Shared); err != nil {
				t.Fatal(err)
			}
			if n := c.Exists(ctx, k.RWLock(lock), k.RWLockDeadlines(lock)).Val(); n != 0 {
				t.Fatal("rwlock keys left after the last reader left")
			}

			if cc, ok := c.(*redis.ClusterClient); ok {
				slot := cc.ClusterKeySlot(ctx, k.Lock(lock)).Val()
				for _, key := range []string{k.RWLock(lock), k.RWLockDeadlines(lock), k.LockQueue(lock), k.LockWaiters(lock), k.LockToken(lock), k.RWLockWriters(lock)} {
					if s := cc.ClusterKeySlot(ctx, key).Val(); s != slot {
						t.Fatalf("%s in slot %d, lock in %d", key, s, slot)
					}
				}
			}
		})
	}
}

// A prefix that would split a lock's keys across slots is refused.
func TestRedisBadPrefix(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, prefix := range []string{"a{b:", "x{}:"} {
		b := NewRedis(c, prefix, nil)
		_, _, _, err := try(t.Context(), b, "l", "A", Exclusive, Options{TTL: time.Second})
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("prefix %q: %v; want ErrInvalid", prefix, err)
		}
	}
	// A prefix with a complete tag is fine (all keys share its slot).
	b := NewRedis(c, "{app}:", nil)
	if _, _, err := b.lockKeys("acquire", "l"); err != nil {
		t.Fatal(err)
	}
}

// LockKeys builds the same names as the single-key builders.
func TestLockKeysMatchTheBuilders(t *testing.T) {
	for _, prefix := range []string{"", "shield:", "{app}:"} {
		k := store.Keys{Prefix: prefix}
		for _, name := range []string{"boss", "a}b", "ключ {tag}", "x"} {
			keys, channel := k.LockKeys(name)
			want := [7]string{k.Lock(name), k.RWLock(name), k.RWLockDeadlines(name), k.LockQueue(name),
				k.LockWaiters(name), k.LockToken(name), k.RWLockWriters(name)}
			if keys != want || channel != k.LockReleased(name) {
				t.Fatalf("LockKeys(%q) with prefix %q = %q, %q; want %q, %q", name, prefix, keys, channel, want, k.LockReleased(name))
			}
		}
	}
}

// On a closed port every operation fails with the connection's error (a
// Session adds the operation and lock: see TestSessionErrorsNameTheOperation),
// never with a sentinel; Watch reports the failure through ready.
func TestRedisErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	bus := pubsub.NewRedis(c, "", pubsub.Events{})
	defer bus.Close()
	b := NewRedis(c, "p:", bus)
	b.watch.timeout = 300 * time.Millisecond
	ctx := t.Context()
	check := func(op string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "connect") {
			t.Fatalf("%s on a closed port: %v; want the connection error", op, err)
		}
		for _, sentinel := range []error{ErrNotHeld, ErrTimeout, ErrLost, ErrInvalid} {
			if errors.Is(err, sentinel) {
				t.Fatalf("%s: I/O error reported as %v", op, err)
			}
		}
	}
	_, _, _, err = try(ctx, b, "l", "A", Exclusive, Options{TTL: time.Second})
	check("acquire", err)
	_, err = rel(ctx, b, "l", "A", Exclusive)
	check("release", err)
	check("extend", ext(ctx, b, "l", "A", Exclusive, time.Second))
	_, _, err = inf(ctx, b, "l")
	check("info", err)
	check("leave queue", leave(ctx, b, "l", "A"))
	if _, err = watchB(ctx, b, "l", func() {}); err == nil || !strings.Contains(err.Error(), `lock: watch "l"`) {
		t.Fatalf("watch on a closed port: %v", err)
	}
	// Without a bus, Watch fails at once.
	if _, err := watchB(ctx, NewRedis(c, "p:", nil), "l", func() {}); err == nil {
		t.Fatal("Watch without a bus succeeded")
	}
}

// Each script starts with a comment listing KEYS, ARGV and the replies.
func TestScriptHeaders(t *testing.T) {
	files, err := filepath.Glob("scripts/*.lua")
	if err != nil || len(files) != 6 {
		t.Fatalf("scripts: %v, %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var header strings.Builder
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "--") {
				break
			}
			header.WriteString(line + "\n")
		}
		h := header.String()
		for _, want := range []string{"KEYS", "ARGV", "Returns"} {
			if !strings.Contains(h, want) {
				t.Fatalf("%s: header does not mention %s:\n%s", f, want, h)
			}
		}
	}
}

// Redlock over three private servers: quorum 2 survives one server down,
// not two.
func TestRedlock(t *testing.T) {
	ctx := t.Context()
	var servers []*testredis.Server
	var nodes []Backend
	for range 3 {
		s := testredis.StartServer(t)
		servers = append(servers, s)
		c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
		t.Cleanup(func() { c.Close() })
		prefix := testredis.Prefix(t)
		bus := pubsub.NewRedis(c, "", pubsub.Events{})
		t.Cleanup(func() { bus.Close() })
		nodes = append(nodes, NewRedis(c, prefix, bus))
	}
	rl := NewRedlock(nodes, 2)
	o := Options{TTL: 10 * time.Second, Reentrant: true}

	acquire := func(owner string) (Grant, bool) {
		t.Helper()
		g, ok, retryIn, err := try(ctx, rl, "l", owner, Exclusive, o)
		if err != nil {
			t.Fatalf("redlock acquire %s: %v", owner, err)
		}
		if !ok && retryIn <= 0 {
			t.Fatalf("refused with retryIn %v", retryIn)
		}
		return g, ok
	}

	g, ok := acquire("A")
	if !ok || g.TTL <= 0 || g.TTL > o.TTL || g.Token <= 0 || g.Count != 1 {
		t.Fatalf("grant %+v ok %v", g, ok)
	}
	if _, ok := acquire("B"); ok {
		t.Fatal("B obtained a lock A holds")
	}
	info, found, err := inf(ctx, rl, "l")
	if err != nil || !found || info.Owners[0].Owner != "A" {
		t.Fatalf("Info %+v %v %v", info, found, err)
	}
	if err := ext(ctx, rl, "l", "A", Exclusive, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := ext(ctx, rl, "l", "B", Exclusive, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("extend by B: %v", err)
	}
	if n, err := rel(ctx, rl, "l", "A", Exclusive); err != nil || n != 0 {
		t.Fatalf("release: %d %v", n, err)
	}

	// A minority holding the lock blocks nobody: B holds node 0 only.
	if _, ok, _, err := try(ctx, nodes[0], "m", "B", Exclusive, o); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, ok, _, err := try(ctx, rl, "m", "A", Exclusive, o); !ok || err != nil {
		t.Fatalf("A with 2 of 3 nodes: %v %v", ok, err)
	}
	// And two owners cannot both reach a quorum.
	if _, ok, _, err := try(ctx, rl, "m", "B", Exclusive, o); ok || err != nil {
		t.Fatalf("B: ok %v err %v; want refused", ok, err)
	}
	// The failed attempt undid what it got (B's re-entry on node 0),
	// leaving A's quorum intact.
	if info, found, _ := inf(ctx, rl, "m"); !found || info.Owners[0].Owner != "A" {
		t.Fatalf("Info m: %+v %v", info, found)
	}
	if info, _, _ := inf(ctx, nodes[0], "m"); len(info.Owners) != 1 || info.Owners[0] != (Holder{Owner: "B", Count: 1}) {
		t.Fatalf("node 0: %+v; want B's own hold back at count 1", info)
	}

	// One server down: quorum 2 still works.
	servers[2].Stop()
	g, ok = acquire("A")
	if !ok {
		t.Fatal("not obtained with 2 of 3 nodes up")
	}
	if _, ok := acquire("B"); ok {
		t.Fatal("B obtained a lock A holds (one node down)")
	}
	if err := ext(ctx, rl, "l", "A", Exclusive, 10*time.Second); err != nil {
		t.Fatalf("extend with 2 of 3: %v", err)
	}
	if _, err := rel(ctx, rl, "l", "A", Exclusive); err != nil {
		t.Fatalf("release with 2 of 3: %v", err)
	}
	if _, ok, _, err := try(ctx, rl, "l", "C", Exclusive, o); !ok || err != nil {
		t.Fatalf("acquire on redlock after the release: %v %v", ok, err)
	}
	if _, err := rel(ctx, rl, "l", "C", Exclusive); err != nil {
		t.Fatal(err)
	}

	// Two servers down: no quorum is possible.
	servers[1].Stop()
	_, ok, _, err = try(ctx, rl, "l", "A", Exclusive, o)
	if ok || err == nil {
		t.Fatalf("with 1 of 3 nodes: ok %v err %v; want an error", ok, err)
	}
	if err := ext(ctx, rl, "l", "A", Exclusive, time.Second); err == nil {
		t.Fatal("extend with 1 of 3 nodes succeeded")
	}
	// The surviving node was released by the failed attempt.
	if _, found, err := inf(ctx, nodes[0], "l"); found || err != nil {
		t.Fatalf("node 0 still holds after a failed attempt: %v %v", found, err)
	}
}

func TestRedlockConfig(t *testing.T) {
	m := []Backend{NewMemory(nil), NewMemory(nil), NewMemory(nil)}
	ctx := t.Context()
	for _, q := range []int{0, 1, 4} {
		_, _, _, err := try(ctx, NewRedlock(m, q), "l", "A", Exclusive, Options{TTL: time.Second})
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("quorum %d of 3: %v; want ErrInvalid", q, err)
		}
	}
	rl := NewRedlock(m, 2)
	if _, _, _, err := try(ctx, rl, "l", "A", Shared, Options{TTL: time.Second}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("shared: %v", err)
	}
	if _, _, _, err := try(ctx, rl, "l", "A", Exclusive, Options{TTL: time.Second, Fair: true}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("fair: %v", err)
	}
	// Watch fires on release through any node.
	ch := make(chan struct{}, 10)
	cancel, err := watchB(ctx, rl, "l", func() { ch <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if _, ok, _, err := try(ctx, rl, "l", "A", Exclusive, Options{TTL: time.Second}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := rel(ctx, rl, "l", "A", Exclusive); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("no wake-up")
	}
	if _, err := rel(ctx, rl, "l", "A", Exclusive); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second release: %v", err)
	}
}
