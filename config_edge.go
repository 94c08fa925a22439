package shieldglobal

import (
	"time"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/ratelimit"
)

// The config is turned into each capability's options here, at the edge,
// so core packages do not import config.

// rateLimiterConfig is the ratelimit.Config of the rate_limiter section
// (durations in milliseconds there).
func rateLimiterConfig(c config.RateLimiter) ratelimit.Config {
	return ratelimit.Config{
		Algorithm:       ratelimit.Algorithm(c.Algorithm),
		SyncInterval:    time.Duration(c.SyncInterval) * time.Millisecond,
		CleanupInterval: time.Duration(c.CleanupInterval) * time.Millisecond,
		Timeout:         time.Duration(c.Timeout) * time.Millisecond,
	}
}
