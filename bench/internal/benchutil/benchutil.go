// Package benchutil holds what the benchmark commands share: medians and
// ratios of rounds, number formatting, the connection to a loopback Redis,
// the server's version, key cleanup, random prefixes and fatal errors.
package benchutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Median returns the middle of xs (the upper one of an even count), 0 for
// none. xs is left as it was.
func Median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// Case is a throughput case of an interleaved run: Run does its work for
// the duration given and returns the operations done; Rates collects its
// ops/s, one per round.
type Case struct {
	Name  string
	Run   func(d time.Duration) int
	Rates []float64
}

// Interleave runs every case once for slice/5 (a warm-up), then rounds
// rounds of every case in turn for slice each, appending each round's
// rate to the case's Rates and logging it on stderr.
func Interleave(cases []*Case, rounds int, slice time.Duration) {
	for _, c := range cases {
		c.Run(slice / 5)
	}
	for r := range rounds {
		for _, c := range cases {
			ops := c.Run(slice)
			c.Rates = append(c.Rates, float64(ops)/slice.Seconds())
			fmt.Fprintf(os.Stderr, "round %d: %s: %.0f/s\n", r+1, c.Name, c.Rates[r])
		}
	}
}

// Ratio returns the median of the per-round ratios of a's rates to b's.
func Ratio(a, b *Case) float64 { return MedianRatio(a.Rates, b.Rates) }

// MedianRatio returns the median of the per-round ratios a[i] / b[i] (the
// rounds of two cases interleaved in one run).
func MedianRatio(a, b []float64) float64 {
	rs := make([]float64, 0, len(a))
	for i := range min(len(a), len(b)) {
		rs = append(rs, a[i]/b[i])
	}
	return Median(rs)
}

// Connect returns a client of the Redis at url, which must be a loopback
// address (benchmarks talk only to this machine), after a PING, and the
// options it was made with; it exits with what failed otherwise. The caller
// closes the client.
func Connect(ctx context.Context, url string) (*redis.Client, *redis.Options) {
	opt, err := redis.ParseURL(url)
	if err != nil || url == "" {
		Fatalf("-redis %q: %v (set SHIELD_TEST_REDIS_URL or pass -redis; bash scripts/with-redis.sh starts a throwaway server)", url, err)
	}
	if host, _, _ := net.SplitHostPort(opt.Addr); host != "127.0.0.1" && host != "localhost" && host != "::1" {
		Fatalf("-redis %s: loopback only (127.0.0.1, localhost, ::1)", opt.Addr)
	}
	c := redis.NewClient(opt)
	if err := c.Ping(ctx).Err(); err != nil {
		Fatalf("Redis at %s does not answer: %v", opt.Addr, err)
	}
	return c, opt
}

// FmtOps renders a rate with thin thousands groups: 12 345.
func FmtOps(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

// RedisVersion returns the server's redis_version, or "unknown (...)".
func RedisVersion(ctx context.Context, c *redis.Client) string {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}

// Cleanup deletes the keys under prefix (within 10 s).
func Cleanup(c *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cursor uint64
	for i := 0; i < 10000; i++ {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return
		}
		if len(keys) > 0 {
			c.Unlink(ctx, keys...)
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}

// RandHex returns n random bytes in hex: no glob metacharacters, so it is
// safe in a key prefix that Cleanup scans for.
func RandHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Fatalf prints the command's name and the message, and exits 1.
func Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, filepath.Base(os.Args[0])+": "+format+"\n", args...)
	os.Exit(1)
}
