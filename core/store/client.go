package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotConfigured is returned by NewClient when the Options name no
// server (neither URL nor Addrs): global.redis configures none.
var ErrNotConfigured = errors.New("store: global.redis configures no server")

// Options say which Redis server(s) a client connects to and how: what
// global.redis configures (internal/edge builds them from the config). The
// zero value names no server.
type Options struct {
	// URL is redis://[user:pass@]host:port/db or rediss://... (TLS); with
	// Cluster, a cluster URL (go-redis's ParseClusterURL). Username,
	// Password, DB and TLS below override what it says when set. Default ""
	// (use Addrs).
	URL string
	// Addrs lists host:port addresses when URL is "": the Cluster's nodes
	// with Cluster, the Sentinels with MasterName, else exactly one
	// standalone server. Default empty.
	Addrs []string
	// Cluster selects Redis Cluster mode. Default false.
	Cluster bool
	// MasterName is the Sentinel master name (Addrs are the Sentinels).
	// Default "" (no Sentinel).
	MasterName string
	// Username is the ACL user name. Default "" (the URL's, else none).
	Username string
	// Password is the Redis password. Default "" (the URL's, else none).
	Password string
	// DB is the database number. Default 0 (with a URL: the URL's).
	DB int
	// TLS connects with TLS (at least 1.2) when the URL (rediss://) does
	// not already. Default false.
	TLS bool
	// DialTimeout, ReadTimeout and WriteTimeout bound a dial and a socket
	// read or write. Default 0: go-redis's defaults (dial 5 s, read 3 s,
	// write as read).
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// PoolSize is the connection pool size (per node). Default 0:
	// go-redis's default (10 per CPU).
	PoolSize int
}

// NewClient builds the client o describes: a URL, a Sentinel set
// (MasterName), a Cluster (Cluster) or one standalone address. It does not
// connect; see Ping. Errors: ErrNotConfigured; a URL go-redis cannot parse,
// as "global.redis.url: ...".
func NewClient(o Options) (redis.UniversalClient, error) {
	switch {
	case o.URL != "" && o.Cluster:
		opt, err := redis.ParseClusterURL(o.URL)
		if err != nil {
			return nil, fmt.Errorf("global.redis.url: %w", err)
		}
		if o.Username != "" {
			opt.Username = o.Username
		}
		if o.Password != "" {
			opt.Password = o.Password
		}
		if o.TLS && opt.TLSConfig == nil {
			opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = o.DialTimeout, o.ReadTimeout, o.WriteTimeout
		opt.PoolSize = o.PoolSize
		opt.ContextTimeoutEnabled = true
		return newCluster(opt), nil
	case o.URL != "":
		opt, err := redis.ParseURL(o.URL)
		if err != nil {
			return nil, fmt.Errorf("global.redis.url: %w", err)
		}
		if o.Username != "" {
			opt.Username = o.Username
		}
		if o.Password != "" {
			opt.Password = o.Password
		}
		if o.DB != 0 { // a URL without a /db path means 0: Options.DB decides
			opt.DB = o.DB
		}
		if o.TLS && opt.TLSConfig == nil {
			opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = o.DialTimeout, o.ReadTimeout, o.WriteTimeout
		opt.PoolSize = o.PoolSize
		opt.ContextTimeoutEnabled = true
		return redis.NewClient(opt), nil
	case len(o.Addrs) > 0:
		u := &redis.UniversalOptions{
			Addrs: o.Addrs, MasterName: o.MasterName, DB: o.DB,
			Username: o.Username, Password: o.Password,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			PoolSize: o.PoolSize,
			// A caller's deadline bounds its socket reads and writes too,
			// not only the waits between go-redis's attempts: OpTimeout
			// and every blocking call's timeout rely on it.
			ContextTimeoutEnabled: true,
		}
		if o.TLS {
			u.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		switch {
		case o.Cluster:
			return newCluster(u.Cluster()), nil
		case o.MasterName != "":
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

// Describe names where a client of o connects, for error messages and
// logs: the URL with its credentials hidden, else the addresses.
func Describe(o Options) string {
	if o.URL != "" {
		return redactURL(o.URL)
	}
	return strings.Join(o.Addrs, ",")
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
