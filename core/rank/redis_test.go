package rank

import (
	"context"
	"encoding/json"
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
			runConformance(t, harness{
				backend: func(t *testing.T) Backend { return NewRedis(c, testredis.Prefix(t)) },
				archiveTTL: func(t *testing.T, b Backend, name, date string) time.Duration {
					ttl, err := c.PTTL(t.Context(), b.(*Redis).keys.RankArchive(name, date)).Result()
					if err != nil {
						t.Fatal(err)
					}
					return ttl
				},
			})
		})
	}
}

// The backend writes exactly the documented layout, which other services
// can read with plain commands; every key of a board is in one slot.
func TestRedisKeyLayout(t *testing.T) {
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			prefix := testredis.Prefix(t)
			k := store.Keys{Prefix: prefix}
			bd := board(t, NewRedis(c, prefix), "daily", Options{})
			do(t, bd.Update("p1", 1000, ModeSet))
			do(t, bd.Update("p2", 1000, ModeSet))
			do(t, bd.Update("p3", 1<<53, ModeSet))

			zset := prefix + "rank:{daily}"
			if k.Rank("daily") != zset || k.RankMembers("daily") != prefix+"rank:members:{daily}" ||
				k.RankMeta("daily") != prefix+"rank:meta:{daily}" || k.RankArchive("daily", "20250101") != prefix+"rank:archive:{daily}:20250101" {
				t.Fatal("key builders disagree with docs/keys.md")
			}
			// A reader with plain commands: ZREVRANGE, strip 15 bytes.
			zs, err := c.ZRevRangeWithScores(ctx, zset, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, z := range zs {
				m := z.Member.(string)
				if len(m) != 15+2 || strings.Trim(m[:15], "0123456789") != "" {
					t.Fatalf("member %q is not 15 digits + uid", m)
				}
				got = append(got, m[15:])
			}
			if strings.Join(got, ",") != "p3,p1,p2" || zs[0].Score != 1<<53 || zs[1].Score != 1000 {
				t.Fatalf("ZREVRANGE = %v", zs)
			}
			// rank = ZREVRANK(HGET members uid) + 1; score = ZSCORE.
			m, err := c.HGet(ctx, k.RankMembers("daily"), "p2").Result()
			if err != nil {
				t.Fatal(err)
			}
			if r, _ := c.ZRevRank(ctx, zset, m).Result(); r != 2 {
				t.Fatalf("ZREVRANK = %d", r)
			}
			if s, _ := c.ZScore(ctx, zset, m).Result(); s != 1000 {
				t.Fatalf("ZSCORE = %v", s)
			}
			meta, err := c.HGetAll(ctx, k.RankMeta("daily")).Result()
			if err != nil {
				t.Fatal(err)
			}
			if meta["version"] != "3" || meta["seq"] != "3" || meta["ties"] != "reach" {
				t.Fatalf("meta = %v", meta)
			}

			// The archive: the documented JSON in field data, with a TTL.
			do(t, bd.ArchiveAndClear("20250101", 2, time.Hour))
			data, err := c.HGet(ctx, k.RankArchive("daily", "20250101"), "data").Result()
			if err != nil {
				t.Fatal(err)
			}
			if data != `[{"uid":"p3","score":9007199254740992,"rank":1},{"uid":"p1","score":1000,"rank":2}]` {
				t.Fatalf("archive = %s", data)
			}
			var parsed []map[string]any
			if err := json.Unmarshal([]byte(data), &parsed); err != nil {
				t.Fatal(err)
			}
			ttl, err := c.PTTL(ctx, k.RankArchive("daily", "20250101")).Result()
			if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
				t.Fatalf("archive PTTL = %v, %v; want about 1h", ttl, err)
			}
			if n, _ := c.Exists(ctx, zset, k.RankMembers("daily")).Result(); n != 0 {
				t.Fatalf("the board's keys survive the reset: %d", n)
			}
			if r, _ := c.HGet(ctx, k.RankMeta("daily"), "reset").Result(); r != "20250101" {
				t.Fatalf("meta reset = %q", r)
			}

			// Slots: one per board.
			if cc, ok := c.(*redis.ClusterClient); ok {
				slot := func(key string) int64 {
					s, err := cc.ClusterKeySlot(ctx, key).Result()
					if err != nil {
						t.Fatal(err)
					}
					return s
				}
				want := slot(zset)
				for _, key := range []string{k.RankMembers("daily"), k.RankMeta("daily"), k.RankArchive("daily", "20250101")} {
					if slot(key) != want {
						t.Fatalf("%s is in another slot than %s", key, zset)
					}
				}
			}

			// TiesUID: the members are the uids; other services may ZADD.
			u := board(t, NewRedis(c, prefix), "plain", Options{Ties: TiesUID})
			do(t, u.Update("a", 5, ModeSet))
			if err := c.ZAdd(ctx, k.Rank("plain"), redis.Z{Score: 7, Member: "b"}).Err(); err != nil {
				t.Fatal(err)
			}
			wantBoard(t, u, e("b", 7, 1), e("a", 5, 2))
			if n, _ := c.Exists(ctx, k.RankMembers("plain")).Result(); n != 0 {
				t.Fatal("TiesUID wrote a members hash")
			}
		})
	}
}

// A lost script cache (restart, SCRIPT FLUSH, failover) is recovered, and
// server errors name the operation and board.
func TestRedisErrors(t *testing.T) {
	ctx := t.Context()
	c := testredis.Standalone(t)
	prefix := testredis.Prefix(t)
	bd := board(t, NewRedis(c, prefix), "b", Options{})
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	do(t, bd.Update("a", 1, ModeSet))
	fails(t, bd.Swap("a", "a2", nil), ErrNotFound)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	wantBoard(t, bd, e("a", 1, 1))

	// The board's zset holds something else: every operation reports it.
	wrong := board(t, NewRedis(c, prefix), "wrong", Options{})
	if err := c.Set(ctx, prefix+"rank:{wrong}", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := wrong.Update("a", 1, ModeSet).Do(ctx)
	if err == nil || !strings.Contains(err.Error(), `rank: update "wrong"`) || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("Update on a wrong-typed key: %v", err)
	}
	_, err = wrong.Top(3).Do(ctx)
	if err == nil || !strings.Contains(err.Error(), `rank: top "wrong"`) {
		t.Fatalf("Top on a wrong-typed key: %v", err)
	}

	// A dead server: the error says what failed.
	s := testredis.StartServer(t)
	dc := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer dc.Close()
	dead := board(t, NewRedis(dc, prefix), "gone", Options{})
	s.Stop()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// store.Op settles a connection failure with the client's error as it
	// is (the decoder, which would name the operation, does not run).
	_, err = dead.Around("a", 1).Do(cctx)
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Around on a stopped server: %v", err)
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) {
		t.Fatalf("an I/O error matched a sentinel: %v", err)
	}
}

// Archive data another service wrote wrongly is reported, not trusted.
func TestRedisArchiveDecode(t *testing.T) {
	ctx := t.Context()
	c := testredis.Standalone(t)
	prefix := testredis.Prefix(t)
	bd := board(t, NewRedis(c, prefix), "a", Options{})
	key := store.Keys{Prefix: prefix}.RankArchive("a", "20250101")
	for _, data := range []string{`{}`, `[{"uid":"x"}]`, `not json`} {
		c.HSet(ctx, key, "data", data)
		if _, err := bd.Archive("20250101").Do(ctx); !errors.Is(err, store.ErrReply) {
			t.Fatalf("Archive(%s) = %v; want ErrReply", data, err)
		}
	}
}

// Both backends write the same archive bytes (the format in json.go), for
// scores that need every digit and uids that need escapes.
func TestRedisArchiveBytesMatchMemory(t *testing.T) {
	ctx := t.Context()
	c := testredis.Standalone(t)
	prefix := testredis.Prefix(t)
	scores := map[string]float64{
		"int": 1 << 53, "neg": -(1 << 53), "tenth": 0.1, "third": 1.0 / 3, "big": 1 << 60, "huge": 1.7976931348623157e308,
		"tiny": 5e-324, "e": 2.718281828459045, `q"\`: 1e-7, "ctl\x00\x01\x1f\x7f": 123.456, "utf8 é ✓": -0.5, "slash/": 42,
	}
	var data [2]string
	for i, b := range []Backend{NewMemory(nil), NewRedis(c, prefix)} {
		bd := board(t, b, "bytes", Options{})
		do(t, bd.MUpdate(scores))
		do(t, bd.ArchiveAndClear("20250101", 100, time.Hour))
		if i == 0 {
			data[0] = b.(*Memory).boards["bytes"].archives["20250101"].data
			continue
		}
		var err error
		if data[1], err = c.HGet(ctx, store.Keys{Prefix: prefix}.RankArchive("bytes", "20250101"), "data").Result(); err != nil {
			t.Fatal(err)
		}
	}
	if data[0] != data[1] {
		t.Fatalf("archives differ:\nmemory %s\nredis  %s", data[0], data[1])
	}
	var parsed []any
	if err := json.Unmarshal([]byte(data[1]), &parsed); err != nil || len(parsed) != len(scores) {
		t.Fatalf("archive is not valid JSON of %d entries: %v", len(scores), err)
	}
}
