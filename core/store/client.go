package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/config"
)

// ErrNotConfigured is returned by NewClient when global.redis names no server.
var ErrNotConfigured = errors.New("store: global.redis configures no server")

// NewClient builds the client global.redis describes: a URL, a Sentinel set
// (master_name), a Cluster (cluster: true) or one standalone address. It does
// not connect; see Ping. Errors name the offending key.
func NewClient(r config.Redis) (redis.UniversalClient, error) {
	millis := func(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
	switch {
	case r.URL != "" && r.Cluster:
		opt, err := redis.ParseClusterURL(r.URL)
		if err != nil {
			return nil, fmt.Errorf("global.redis.url: %w", err)
		}
		if r.Username != "" {
			opt.Username = r.Username
		}
		if r.Password != "" {
			opt.Password = r.Password
		}
		if r.TLS && opt.TLSConfig == nil {
			opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = millis(r.DialTimeout), millis(r.ReadTimeout), millis(r.WriteTimeout)
		opt.PoolSize = r.PoolSize
		opt.ContextTimeoutEnabled = true
		return newCluster(opt), nil
	case r.URL != "":
		opt, err := redis.ParseURL(r.URL)
		if err != nil {
			return nil, fmt.Errorf("global.redis.url: %w", err)
		}
		if r.Username != "" {
			opt.Username = r.Username
		}
		if r.Password != "" {
			opt.Password = r.Password
		}
		if r.DB != 0 { // a URL without a /db path means 0: global.redis.db decides
			opt.DB = r.DB
		}
		if r.TLS && opt.TLSConfig == nil {
			opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = millis(r.DialTimeout), millis(r.ReadTimeout), millis(r.WriteTimeout)
		opt.PoolSize = r.PoolSize
		opt.ContextTimeoutEnabled = true
		return redis.NewClient(opt), nil
	case len(r.Addrs) > 0:
		u := &redis.UniversalOptions{
			Addrs: r.Addrs, MasterName: r.MasterName, DB: r.DB,
			Username: r.Username, Password: r.Password,
			DialTimeout: millis(r.DialTimeout), ReadTimeout: millis(r.ReadTimeout), WriteTimeout: millis(r.WriteTimeout),
			PoolSize: r.PoolSize,
			// A caller's deadline bounds its socket reads and writes too,
			// not only the waits between go-redis's attempts: OpTimeout
			// and every blocking call's timeout rely on it.
			ContextTimeoutEnabled: true,
		}
		if r.TLS {
			u.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		switch {
		case r.Cluster:
			return newCluster(u.Cluster()), nil
		case r.MasterName != "":
			return redis.NewFailoverClient(u.Failover()), nil
		default:
			return redis.NewClient(u.Simple()), nil
		}
	}
	return nil, ErrNotConfigured
}

// newCluster is a Cluster client that reloads the slot map (in the
// background, coalesced by go-redis) whenever a command fails on the
// connection rather than with a reply. go-redis reloads it on MOVED and
// every ClusterStateReloadInterval (60 s) only, so after a master died and
// its replica was promoted the client kept sending that master's slots to
// the dead address until a timer or a redirect told it otherwise (5–9 s
// seen); the first failure after the promotion now finds the new master.
func newCluster(opt *redis.ClusterOptions) *redis.ClusterClient {
	c := redis.NewClusterClient(opt)
	c.AddHook(reloadOnFailure{c})
	return c
}

// reloadOnFailure is newCluster's hook.
type reloadOnFailure struct{ c *redis.ClusterClient }

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if connFailure(err) {
			h.c.ReloadState(ctx)
		}
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		failed := connFailure(err)
		for _, cmd := range cmds {
			failed = failed || connFailure(cmd.Err())
		}
		if failed {
			h.c.ReloadState(ctx)
		}
		return err
	}
}

// connFailure reports an error of the connection (refused, reset, timed
// out), not a reply and not the caller giving up.
func connFailure(err error) bool {
	return err != nil && !isReplyError(err) && !errors.Is(err, context.Canceled)
}

// Describe names where a client connects, for error messages and logs.
func Describe(r config.Redis) string {
	switch {
	case r.Inherit:
		return "the host's client (global.redis.inherit)"
	case r.URL != "":
		return redactURL(r.URL)
	default:
		return strings.Join(r.Addrs, ",")
	}
}

func redactURL(u string) string {
	at := strings.LastIndex(u, "@")
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return u
	}
	return u[:scheme+3] + "***" + u[at:]
}

// Ping checks that Redis answers within timeout, saying what failed.
func Ping(ctx context.Context, c redis.UniversalClient, where string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach Redis at %s: %w", where, err)
	}
	return nil
}
