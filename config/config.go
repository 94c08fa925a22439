// Package config loads and validates the YAML configuration of shield_global.
//
// The configuration is strict: unknown keys, duplicate keys, values of the
// wrong YAML type and impossible values are all errors, and every error names
// the source file, the line and the dotted key path, for example
//
//	config.yaml:7: unknown key "global.cache.max_sise" (known keys: enabled, max_size, default_ttl, sync); did you mean "max_size"?
//	config.yaml:4: global.cache.max_size: expected an integer, got string "big"
//	config.yaml:4: global.cache.max_size must be > 0, got 0
//
// Keys absent from the file keep the values of [Default]; an empty file is the
// default configuration. The documented default file is config/global.yaml in
// the source tree; a test keeps it identical to [Default].
//
// Durations and TTLs are integer milliseconds unless a field says otherwise
// (rank.reset.archive_ttl is in seconds); see [Millis] and [Seconds].
//
// Every section is validated whether or not it is enabled, so a file that is
// accepted today stays accepted when a section is switched on.
package config

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"time"

	// Time zone data is embedded so scheduler.timezone validates (and later
	// loads) the same way on hosts and containers without /usr/share/zoneinfo.
	_ "time/tzdata"
)

// EnvRedisURL is the environment variable that, when non-empty, overrides
// global.redis.url (see [Config.ApplyEnv]).
const EnvRedisURL = "SHIELD_REDIS_URL"

// EnvOpsToken is the environment variable that, when non-empty, overrides
// ops.token (see [Config.ApplyEnv]).
const EnvOpsToken = "SHIELD_OPS_TOKEN"

// Values accepted by rate_limiter.algorithm.
const (
	AlgorithmTokenBucket   = "token_bucket"
	AlgorithmSlidingWindow = "sliding_window"
)

// Values accepted by scheduler.persistence.storage.
const (
	StorageRedis  = "redis"
	StorageMemory = "memory"
)

// DefaultServiceName is the service name used when global.service_name is "".
const DefaultServiceName = "shield"

// Config is the whole shield_global configuration file.
type Config struct {
	// Global holds the module switch, node identity, Redis connection and
	// local cache settings.
	Global Global `yaml:"global"`
	// Lock configures distributed locks (shield.global locks).
	Lock Lock `yaml:"lock"`
	// Rank configures leaderboards.
	Rank Rank `yaml:"rank"`
	// Queue configures message queues.
	Queue Queue `yaml:"queue"`
	// RateLimiter configures the distributed rate limiter.
	RateLimiter RateLimiter `yaml:"rate_limiter"`
	// Scheduler configures the distributed task scheduler.
	Scheduler Scheduler `yaml:"scheduler"`
	// Ops configures the local operations HTTP endpoint.
	Ops Ops `yaml:"ops"`
}

// Global is the "global" section.
type Global struct {
	// Enabled is the module switch. When false no capability is registered,
	// no Redis connection is made and no goroutine is started. Default true.
	Enabled bool `yaml:"enabled"`
	// NodeID identifies this process as a lock owner. "" means the host name
	// (see [Global.EffectiveNodeID]). Default "".
	NodeID string `yaml:"node_id"`
	// ServiceID is the numeric service identifier. Default 0.
	ServiceID int64 `yaml:"service_id"`
	// ServiceName is the service name; "" means "shield" (see
	// [Global.EffectiveServiceName]). Default "".
	ServiceName string `yaml:"service_name"`
	// Redis is the Redis connection. Default: not configured (memory backend).
	Redis Redis `yaml:"redis"`
	// Cache is the process-local cache in front of Redis.
	Cache Cache `yaml:"cache"`
	// Runtime configures the Lua runtime of every Lua state.
	Runtime Runtime `yaml:"runtime"`
	// Log is the log level and format of the shield command.
	Log Log `yaml:"log"`
}

// Values accepted by global.log.level.
const (
	LogDebug = "debug"
	LogInfo  = "info"
	LogWarn  = "warn"
	LogError = "error"
)

// Values accepted by global.log.format.
const (
	LogText = "text"
	LogJSON = "json"
)

// Log is the "global.log" section. It sets up the logger of the shield
// command (run, test, repl); its --log-level and --log-format flags
// override it. A host that embeds the module logs through the logger it
// hands to New, and this section has no effect there.
type Log struct {
	// Level is the lowest level logged: debug, info, warn or error.
	// Default info.
	Level string `yaml:"level"`
	// Format is text (log/slog's key=value lines) or json (one JSON object
	// per line). Default text.
	Format string `yaml:"format"`
}

// Runtime is the "global.runtime" section.
type Runtime struct {
	// SlowTask is how long a task may run without yielding, in
	// milliseconds, before it is logged (once per run, with its name and
	// line): every other task of its Lua state waits meanwhile. 0 disables
	// the check; must be >= 0. Default 1000.
	SlowTask int64 `yaml:"slow_task"`
	// ShutdownGrace is how long running tasks get to finish when `shield run`
	// stops (SIGINT, SIGTERM, or after its main chunk raised), in
	// milliseconds; Lua still running after it is interrupted. Module.Close
	// gives the scheduler's runs in progress the same time. `shield test`
	// does not use it: tasks a spec file leaves running are stopped when the
	// file ends, without a grace. Must be >= 0. Default 5000.
	ShutdownGrace int64 `yaml:"shutdown_grace"`
}

// Redis is the "global.redis" section.
//
// Exactly one way of reaching Redis may be configured: Inherit (the client
// handed to shieldglobal.New by the host), URL, or Addrs. When none is set the
// module runs on its in-memory backend.
type Redis struct {
	// Inherit uses the redis.UniversalClient handed to shieldglobal.New by the
	// host instead of dialing. Default false.
	Inherit bool `yaml:"inherit"`
	// URL is redis://[user:pass@]host:port/db or rediss://... . The
	// environment variable SHIELD_REDIS_URL overrides it. "" together with no
	// Addrs means the memory backend. Default "".
	URL string `yaml:"url"`
	// Addrs lists host:port addresses: a Redis Cluster with Cluster, a
	// Sentinel set with MasterName, otherwise exactly one standalone server.
	// Default empty.
	Addrs []string `yaml:"addrs"`
	// Cluster selects Redis Cluster mode. Default false.
	Cluster bool `yaml:"cluster"`
	// MasterName is the Sentinel master name; Addrs are then the Sentinels.
	// Default "".
	MasterName string `yaml:"master_name"`
	// Username is the ACL user name. Default "".
	Username string `yaml:"username"`
	// Password is the Redis password. Default "".
	Password string `yaml:"password"`
	// DB is the database number; must be >= 0, and 0 in cluster mode.
	// Default 0.
	DB int `yaml:"db"`
	// Prefix is prepended to every key the module writes. Default "shield:".
	Prefix string `yaml:"prefix"`
	// TLS enables TLS for Addrs connections (a rediss:// URL implies TLS).
	// Default false.
	TLS bool `yaml:"tls"`
	// DialTimeout in milliseconds; 0 means the go-redis default.
	// Default 5000.
	DialTimeout int64 `yaml:"dial_timeout"`
	// ReadTimeout in milliseconds; 0 means the go-redis default.
	// Default 3000.
	ReadTimeout int64 `yaml:"read_timeout"`
	// WriteTimeout in milliseconds; 0 means the go-redis default.
	// Default 3000.
	WriteTimeout int64 `yaml:"write_timeout"`
	// PoolSize is the connection pool size; 0 means the go-redis default.
	// Default 0.
	PoolSize int `yaml:"pool_size"`
	// WaitReplicas is how many replicas must confirm a write before it is
	// acknowledged (Redis WAIT after the write; docs/durability.md lists the
	// writes). A write they do not confirm within WaitTimeout raises an
	// error although the master applied it. 0 turns it off. Default 0.
	WaitReplicas int `yaml:"wait_replicas"`
	// WaitTimeout bounds that wait, in milliseconds: > 0, and below the read
	// timeout (WAIT holds the connection that long). Default 1000.
	WaitTimeout int64 `yaml:"wait_timeout"`
}

// Cache is the "global.cache" section.
type Cache struct {
	// Enabled switches the local cache on. Default true.
	Enabled bool `yaml:"enabled"`
	// MaxSize caps the local cache entries; must be > 0. Default 10000.
	MaxSize int `yaml:"max_size"`
	// DefaultTTL is the entry TTL in milliseconds; must be > 0.
	// Default 60000.
	DefaultTTL int64 `yaml:"default_ttl"`
	// Sync enables cross-process invalidation through Redis pub/sub.
	// Default true.
	Sync bool `yaml:"sync"`
}

// Lock is the "lock" section.
type Lock struct {
	// Enabled registers the lock capability. Default true.
	Enabled bool `yaml:"enabled"`
	// DefaultTTL is the lock TTL in milliseconds when the caller gives none;
	// must be > 0. Default 30000.
	DefaultTTL int64 `yaml:"default_ttl"`
	// MaxTTL caps any requested TTL, in milliseconds; must be >= DefaultTTL.
	// Default 300000.
	MaxTTL int64 `yaml:"max_ttl"`
	// Reentrant is the default of the locks' reentrant option: the task
	// that holds a lock may acquire it again. Default true.
	Reentrant bool `yaml:"reentrant"`
	// Retry is the acquire retry interval in milliseconds; must be > 0.
	// Default 100.
	Retry int64 `yaml:"retry"`
	// MaxRetries caps acquire retries; 0 means unlimited; must be >= 0.
	// Default 0.
	MaxRetries int `yaml:"max_retries"`
	// Wait is how long an acquire given no timeout (and no wait option)
	// waits before it gives up with "timeout", in milliseconds; 0 means no
	// limit; must be >= 0. Default 10000 (the spec's example).
	Wait int64 `yaml:"wait"`
	// AutoExtend is the watchdog that extends held locks.
	AutoExtend AutoExtend `yaml:"auto_extend"`
	// Fair selects FIFO (fair) locks.
	Fair Fair `yaml:"fair"`
	// Redlock selects the Redlock algorithm over independent Redis nodes.
	Redlock Redlock `yaml:"redlock"`
}

// AutoExtend is the "lock.auto_extend" section.
type AutoExtend struct {
	// Enabled turns the watchdog on. Default true.
	Enabled bool `yaml:"enabled"`
	// Interval between extensions in milliseconds; must be > 0 and
	// < lock.default_ttl. Default 10000.
	Interval int64 `yaml:"interval"`
}

// Fair is the "lock.fair" section.
type Fair struct {
	// Enabled makes locks fair (first come, first served). Default false.
	Enabled bool `yaml:"enabled"`
}

// Redlock is the "lock.redlock" section.
type Redlock struct {
	// Enabled turns Redlock on. Default false.
	Enabled bool `yaml:"enabled"`
	// Quorum is the number of nodes that must grant a lock; must be >= 1, and
	// <= len(Addrs) when Enabled. Default 3.
	Quorum int `yaml:"quorum"`
	// Addrs are the independent Redis nodes (host:port or redis:// URLs);
	// required when Enabled. Default empty.
	Addrs []string `yaml:"addrs"`
}

// Rank is the "rank" section.
type Rank struct {
	// Enabled registers the leaderboard capability. Default true.
	Enabled bool `yaml:"enabled"`
	// MaxMembers caps the members of one leaderboard; must be > 0.
	// Default 10000.
	MaxMembers int `yaml:"max_members"`
	// Reset configures periodic leaderboard resets.
	Reset RankReset `yaml:"reset"`
}

// RankReset is the "rank.reset" section.
type RankReset struct {
	// Enabled archives a leaderboard when it is reset. Default true.
	Enabled bool `yaml:"enabled"`
	// ArchiveTable is not used: archives of reset leaderboards live under
	// <prefix>rank:archive:{<name>}:<YYYYMMDD> (store.Keys.RankArchive). It
	// is kept because the spec lists it; must not be empty when Enabled.
	// Default "rank_archive".
	ArchiveTable string `yaml:"archive_table"`
	// ArchiveTTL is how long archives are kept, in SECONDS; must be > 0.
	// Default 2592000 (30 days).
	ArchiveTTL int64 `yaml:"archive_ttl"`
}

// Queue is the "queue" section.
type Queue struct {
	// Enabled registers the queue capability. Default true.
	Enabled bool `yaml:"enabled"`
	// Defaults apply to queues created without explicit options.
	Defaults QueueDefaults `yaml:"defaults"`
	// DeadLetter configures the dead-letter queue.
	DeadLetter DeadLetter `yaml:"dead_letter"`
}

// QueueDefaults is the "queue.defaults" section.
type QueueDefaults struct {
	// MaxLength caps the messages in one queue; must be > 0. Default 100000.
	MaxLength int `yaml:"max_length"`
	// MessageTTL in milliseconds; must be > 0. Default 86400000 (1 day).
	MessageTTL int64 `yaml:"message_ttl"`
	// MaxRetries before a message goes to the dead-letter queue; must be
	// >= 0. Default 3.
	MaxRetries int `yaml:"max_retries"`
	// RetryDelay in milliseconds; must be >= 0. Default 60000.
	RetryDelay int64 `yaml:"retry_delay"`
	// VisibilityTimeout of the reliable queue in milliseconds; must be > 0.
	// Default 30000.
	VisibilityTimeout int64 `yaml:"visibility_timeout"`
}

// DeadLetter is the "queue.dead_letter" section.
type DeadLetter struct {
	// Enabled keeps messages that ran out of retries. Default true.
	Enabled bool `yaml:"enabled"`
	// MaxLength caps the dead-letter queue; must be > 0. Default 10000.
	MaxLength int `yaml:"max_length"`
	// TTL of dead letters in milliseconds; must be > 0.
	// Default 604800000 (7 days).
	TTL int64 `yaml:"ttl"`
}

// RateLimiter is the "rate_limiter" section.
type RateLimiter struct {
	// Enabled registers the rate limiter capability. Default true.
	Enabled bool `yaml:"enabled"`
	// Algorithm is "token_bucket" or "sliding_window".
	// Default "token_bucket".
	Algorithm string `yaml:"algorithm"`
	// SyncInterval in milliseconds; must be > 0. Default 1000.
	SyncInterval int64 `yaml:"sync_interval"`
	// CleanupInterval in milliseconds; must be > 0. Default 60000.
	CleanupInterval int64 `yaml:"cleanup_interval"`
	// Timeout in milliseconds: how long a sliding window's allow (and each
	// try of its wait) waits for Redis before it answers "unavailable";
	// must be > 0. Default 300.
	Timeout int64 `yaml:"timeout"`
}

// Scheduler is the "scheduler" section.
type Scheduler struct {
	// Enabled registers the scheduler capability. Default true.
	Enabled bool `yaml:"enabled"`
	// Timezone is an IANA zone name accepted by time.LoadLocation (see
	// [Scheduler.Location]). Default "UTC".
	Timezone string `yaml:"timezone"`
	// Distributed makes one node run each firing.
	Distributed SchedulerDistributed `yaml:"distributed"`
	// Retry configures retries of failed jobs.
	Retry SchedulerRetry `yaml:"retry"`
	// Persistence configures where schedules are stored.
	Persistence SchedulerPersistence `yaml:"persistence"`
}

// SchedulerDistributed is the "scheduler.distributed" section.
type SchedulerDistributed struct {
	// Enabled takes a lock per firing so one node runs it. Default true.
	Enabled bool `yaml:"enabled"`
	// LockTTL in milliseconds; must be > 0. Default 30000.
	LockTTL int64 `yaml:"lock_ttl"`
}

// SchedulerRetry is the "scheduler.retry" section.
type SchedulerRetry struct {
	// MaxRetries of a failed job; must be >= 0. Default 3.
	MaxRetries int `yaml:"max_retries"`
	// RetryDelay in milliseconds; must be >= 0. Default 60000.
	RetryDelay int64 `yaml:"retry_delay"`
}

// SchedulerPersistence is the "scheduler.persistence" section.
type SchedulerPersistence struct {
	// Enabled persists schedules. Default true.
	Enabled bool `yaml:"enabled"`
	// Storage is "redis" or "memory". Default "redis".
	Storage string `yaml:"storage"`
}

// Ops is the "ops" section.
type Ops struct {
	// Enabled starts the operations HTTP endpoint (GET /ops/global,
	// /ops/scheduler, /metrics). Default false.
	Enabled bool `yaml:"enabled"`
	// Listen is the host:port to listen on; port 0 picks a free one.
	// Default "127.0.0.1:9190" (loopback: set another host deliberately).
	Listen string `yaml:"listen"`
	// Token, when not "", is required as "Authorization: Bearer <token>" on
	// every request (401 otherwise). The environment variable
	// SHIELD_OPS_TOKEN, when non-empty, overrides it. Default "".
	Token string `yaml:"token"`
	// Admin enables the console's write actions (requeue and delete dead
	// letters, purge a queue, pause/resume/trigger/remove a task, clear a
	// leaderboard; docs/ops.md). Default false: the console is read-only.
	Admin bool `yaml:"admin"`
	// HealthAuth requires the token on GET /healthz and /readyz too; by
	// default they answer anyone, so that probes need no secret. Default
	// false.
	HealthAuth bool `yaml:"health_auth"`
	// Metrics bounds the labels of /metrics.
	Metrics OpsMetrics `yaml:"metrics"`
}

// OpsMetrics is the "ops.metrics" section.
type OpsMetrics struct {
	// LabelCap is how many distinct names (queue, task, Redis command) one
	// metric family keeps as label values; names beyond it are counted
	// under the value "other". Must be > 0. Default 100.
	LabelCap int `yaml:"label_cap"`
	// IdleAfter: the series of a queue that has been empty, without
	// consumers and unchanged for this long (ms) leave /metrics until it is
	// used again, and free their place under LabelCap. Must be > 0.
	// Default 300000 (5 min).
	IdleAfter int64 `yaml:"idle_after"`
}

// Default returns the default configuration, identical to config/global.yaml.
func Default() Config {
	return Config{
		Global: Global{
			Enabled:     true,
			NodeID:      "",
			ServiceID:   0,
			ServiceName: "",
			Redis: Redis{
				Inherit:      false,
				URL:          "",
				Addrs:        nil,
				Cluster:      false,
				MasterName:   "",
				Username:     "",
				Password:     "",
				DB:           0,
				Prefix:       "shield:",
				TLS:          false,
				DialTimeout:  5000,
				ReadTimeout:  3000,
				WriteTimeout: 3000,
				PoolSize:     0,
				WaitReplicas: 0,
				WaitTimeout:  1000,
			},
			Cache: Cache{
				Enabled:    true,
				MaxSize:    10000,
				DefaultTTL: 60000,
				Sync:       true,
			},
			Runtime: Runtime{SlowTask: 1000, ShutdownGrace: 5000},
			Log:     Log{Level: LogInfo, Format: LogText},
		},
		Lock: Lock{
			Enabled:    true,
			DefaultTTL: 30000,
			MaxTTL:     300000,
			Reentrant:  true,
			Retry:      100,
			MaxRetries: 0,
			Wait:       10000,
			AutoExtend: AutoExtend{Enabled: true, Interval: 10000},
			Fair:       Fair{Enabled: false},
			Redlock:    Redlock{Enabled: false, Quorum: 3, Addrs: nil},
		},
		Rank: Rank{
			Enabled:    true,
			MaxMembers: 10000,
			Reset: RankReset{
				Enabled:      true,
				ArchiveTable: "rank_archive",
				ArchiveTTL:   2592000,
			},
		},
		Queue: Queue{
			Enabled: true,
			Defaults: QueueDefaults{
				MaxLength:         100000,
				MessageTTL:        86400000,
				MaxRetries:        3,
				RetryDelay:        60000,
				VisibilityTimeout: 30000,
			},
			DeadLetter: DeadLetter{
				Enabled:   true,
				MaxLength: 10000,
				TTL:       604800000,
			},
		},
		RateLimiter: RateLimiter{
			Enabled:         true,
			Algorithm:       AlgorithmTokenBucket,
			SyncInterval:    1000,
			CleanupInterval: 60000,
			Timeout:         300,
		},
		Scheduler: Scheduler{
			Enabled:     true,
			Timezone:    "UTC",
			Distributed: SchedulerDistributed{Enabled: true, LockTTL: 30000},
			Retry:       SchedulerRetry{MaxRetries: 3, RetryDelay: 60000},
			Persistence: SchedulerPersistence{Enabled: true, Storage: StorageRedis},
		},
		Ops: Ops{
			Enabled: false,
			Listen:  "127.0.0.1:9190",
			Metrics: OpsMetrics{LabelCap: 100, IdleAfter: 300000},
		},
	}
}

// Load reads the file at path and parses it with [Parse], using path as the
// source name in error messages.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		cause := err
		var pe *fs.PathError
		if errors.As(err, &pe) {
			cause = pe.Err // Source already names the path
		}
		return Config{}, &Error{Source: path, Msg: "cannot read config file: " + cause.Error(), Err: err}
	}
	return Parse(data, path)
}

// Parse builds a configuration from YAML: it starts from [Default], overlays
// the keys present in data, applies the environment ([Config.ApplyEnv] with
// os.Getenv; SHIELD_<SECTION>_... variables that name no key are errors) and
// validates the result. source names the input in error
// messages (usually the file name).
//
// On failure the returned error is an *[Error], or several joined with
// errors.Join (one per line of the message); the returned Config is then the
// zero value.
func Parse(data []byte, source string) (Config, error) {
	return parseEnv(data, source, os.Getenv, os.Environ())
}

// ApplyEnv applies the environment: every key whose variable (see
// [EnvVars]: SHIELD_ and the key path, e.g. SHIELD_OPS_LISTEN) is non-empty
// takes its value, parsed with the file's rules; SHIELD_REDIS_URL and
// SHIELD_OPS_TOKEN set global.redis.url and ops.token too. getenv looks
// variables up; nil means os.Getenv. Errors (each an *[Error] naming the
// variable, joined): a value of the wrong type, or an alias and its derived
// variable set to different values; the keys that could be set are set.
// It does not validate: [Parse], [Load] and [FromEnv] do.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	_, errs := c.applyEnv(getenv, nil)
	return joinErrors(errs)
}

// FromEnv is the configuration without a file: [Default] with the
// environment applied ([Config.ApplyEnv]), SHIELD_<SECTION>_... variables
// that name no key rejected, and validated; errors name the variables.
func FromEnv() (Config, error) {
	return parseEnv(nil, "", os.Getenv, os.Environ())
}

// Configured reports whether a Redis connection is configured (URL, Addrs or
// Inherit). When it is false the module uses its in-memory backend.
func (r Redis) Configured() bool {
	return r.URL != "" || len(r.Addrs) > 0 || r.Inherit
}

// EffectiveNodeID returns NodeID, or the host name when NodeID is "".
func (g Global) EffectiveNodeID() (string, error) {
	if g.NodeID != "" {
		return g.NodeID, nil
	}
	return os.Hostname()
}

// EffectiveServiceName returns ServiceName, or "shield" when it is "".
func (g Global) EffectiveServiceName() string {
	if g.ServiceName != "" {
		return g.ServiceName
	}
	return DefaultServiceName
}

// Location loads Timezone with time.LoadLocation.
func (s Scheduler) Location() (*time.Location, error) {
	return time.LoadLocation(s.Timezone)
}

// maxMillis is the largest millisecond count that fits in a time.Duration.
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

// maxSeconds is the largest second count that fits in a time.Duration.
const maxSeconds = math.MaxInt64 / int64(time.Second)

// Millis converts a millisecond setting to a time.Duration. Values that would
// overflow saturate (validated configurations never do).
func Millis(ms int64) time.Duration {
	switch {
	case ms > maxMillis:
		return time.Duration(math.MaxInt64)
	case ms < -maxMillis:
		return time.Duration(math.MinInt64)
	}
	return time.Duration(ms) * time.Millisecond
}

// Seconds converts a second setting (rank.reset.archive_ttl) to a
// time.Duration. Values that would overflow saturate.
func Seconds(s int64) time.Duration {
	switch {
	case s > maxSeconds:
		return time.Duration(math.MaxInt64)
	case s < -maxSeconds:
		return time.Duration(math.MinInt64)
	}
	return time.Duration(s) * time.Second
}
