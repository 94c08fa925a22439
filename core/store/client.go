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
		return redis.NewClusterClient(opt), nil
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
		return redis.NewClient(opt), nil
	case len(r.Addrs) > 0:
		u := &redis.UniversalOptions{
			Addrs: r.Addrs, MasterName: r.MasterName, DB: r.DB,
			Username: r.Username, Password: r.Password,
			DialTimeout: millis(r.DialTimeout), ReadTimeout: millis(r.ReadTimeout), WriteTimeout: millis(r.WriteTimeout),
			PoolSize: r.PoolSize,
		}
		if r.TLS {
			u.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		switch {
		case r.Cluster:
			return redis.NewClusterClient(u.Cluster()), nil
		case r.MasterName != "":
			return redis.NewFailoverClient(u.Failover()), nil
		default:
			return redis.NewClient(u.Simple()), nil
		}
	}
	return nil, ErrNotConfigured
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
