// Package benchutil holds what the benchmark commands share: medians,
// number formatting, the Redis server's version, key cleanup, random
// prefixes and fatal errors.
package benchutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
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
