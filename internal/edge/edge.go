// Package edge turns the config into each capability's options, so the
// core packages do not import config. The Module, the bindings and the
// admin CLI (cmd/shield) all build their options here, once; the defaults
// live in config (Default), the meaning of each option in its core package.
package edge

import (
	"time"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/core/ratelimit"
	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/core/store"
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

// RedisOptions are the client options of the global.redis section
// (durations in milliseconds there). Inherit and Prefix are not client
// options: the Module reads them itself.
func RedisOptions(r config.Redis) store.Options {
	return store.Options{
		URL:          r.URL,
		Addrs:        r.Addrs,
		Cluster:      r.Cluster,
		MasterName:   r.MasterName,
		Username:     r.Username,
		Password:     r.Password,
		DB:           r.DB,
		TLS:          r.TLS,
		DialTimeout:  ms(r.DialTimeout),
		ReadTimeout:  ms(r.ReadTimeout),
		WriteTimeout: ms(r.WriteTimeout),
		PoolSize:     r.PoolSize,
	}
}

// DescribeRedis names where global.redis connects, for error messages and
// logs (credentials hidden).
func DescribeRedis(r config.Redis) string {
	if r.Inherit {
		return "the host's client (global.redis.inherit)"
	}
	return store.Describe(RedisOptions(r))
}

// SchedulerOptions are the options a task gets from the scheduler section
// (lock_ttl, max_retries, retry_delay and timezone; durations in
// milliseconds there), with overlap "skip", catch_up 60 s, on_redis_down
// "wait" and distributed off: Engine.DefaultOptions.
func SchedulerOptions(c config.Scheduler) scheduler.Options {
	return scheduler.Options{
		Timezone:    c.Timezone,
		LockTTL:     ms(c.Distributed.LockTTL),
		MaxRetries:  c.Retry.MaxRetries,
		RetryDelay:  ms(c.Retry.RetryDelay),
		Overlap:     scheduler.OverlapSkip,
		CatchUp:     scheduler.DefaultCatchUp,
		OnRedisDown: scheduler.RedisDownWait,
	}
}
