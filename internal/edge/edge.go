// Package edge turns the config into each capability's options, so the
// core packages do not import config. The Module, the bindings and the
// admin CLI (cmd/shield) all build their options here, once.
package edge

import (
	"time"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/core/ratelimit"
)

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// QueueOptions are the queue options of the queue config section.
func QueueOptions(c config.Queue) queue.Options {
	d := c.Defaults
	return queue.Options{
		MaxLength:         d.MaxLength,
		MessageTTL:        ms(d.MessageTTL),
		MaxRetries:        d.MaxRetries,
		RetryDelay:        ms(d.RetryDelay),
		VisibilityTimeout: ms(d.VisibilityTimeout),
		DeadLetter: queue.DeadLetterOptions{
			Enabled:   c.DeadLetter.Enabled,
			MaxLength: c.DeadLetter.MaxLength,
			TTL:       ms(c.DeadLetter.TTL),
		},
	}
}

// RateLimiterConfig is the ratelimit.Config of the rate_limiter section
// (durations in milliseconds there).
func RateLimiterConfig(c config.RateLimiter) ratelimit.Config {
	return ratelimit.Config{
		Algorithm:       ratelimit.Algorithm(c.Algorithm),
		SyncInterval:    ms(c.SyncInterval),
		CleanupInterval: ms(c.CleanupInterval),
		Timeout:         ms(c.Timeout),
	}
}
