package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Validate checks every value and every relation between values. It returns
// nil, an *[Error], or several joined with errors.Join. Errors from Validate
// name key paths but no lines; [Parse] and [Load] validate too and add the
// line of each key that came from the file.
func (c Config) Validate() error {
	v := validator{}
	return v.run(&c)
}

// validator collects validation errors, locating each at the line of its key
// when the key came from the file.
type validator struct {
	source string
	lines  map[string]int    // key path -> line, for keys present in the file
	env    map[string]string // key path -> environment variable that set it
	errs   []error           // all *Error
}

// failAt records an error about the first of paths that has a known origin
// (a line in the file or an environment variable); paths[0] otherwise.
func (v *validator) failAt(paths []string, format string, args ...any) {
	e := &Error{Source: v.source, Path: paths[0], Msg: fmt.Sprintf(format, args...)}
	for _, p := range paths {
		if name, ok := v.env[p]; ok {
			e.Path = p
			e.Msg += " (set by environment variable " + name + ")"
			break
		}
		if line, ok := v.lines[p]; ok {
			e.Path, e.Line = p, line
			break
		}
	}
	v.errs = append(v.errs, e)
}

func (v *validator) fail(path, format string, args ...any) {
	v.failAt([]string{path}, format, args...)
}

// positive requires 0 < n (<= limit when limit > 0; the limits keep
// millisecond and second values convertible to time.Duration).
func (v *validator) positive(path string, n int64, limit int64) {
	if n <= 0 {
		v.fail(path, "%s must be > 0, got %d", path, n)
	} else if limit > 0 && n > limit {
		v.fail(path, "%s must be <= %d, got %d", path, limit, n)
	}
}

// nonNegative requires 0 <= n (<= limit when limit > 0).
func (v *validator) nonNegative(path string, n int64, limit int64) {
	if n < 0 {
		v.fail(path, "%s must be >= 0, got %d", path, n)
	} else if limit > 0 && n > limit {
		v.fail(path, "%s must be <= %d, got %d", path, limit, n)
	}
}

func (v *validator) run(c *Config) error {
	v.global(&c.Global)
	v.lock(&c.Lock)
	v.rank(&c.Rank)
	v.queue(&c.Queue)
	v.rateLimiter(&c.RateLimiter)
	v.scheduler(&c.Scheduler)
	v.ops(&c.Ops)
	// Report in file order; problems without a line (defaults, environment)
	// come last, in section order.
	sort.SliceStable(v.errs, func(i, j int) bool {
		li, lj := v.errs[i].(*Error).Line, v.errs[j].(*Error).Line
		return li != 0 && (lj == 0 || li < lj)
	})
	return joinErrors(v.errs)
}

func (v *validator) global(g *Global) {
	v.redis(&g.Redis)
	c := g.Cache
	v.positive("global.cache.max_size", int64(c.MaxSize), 0)
	v.positive("global.cache.default_ttl", c.DefaultTTL, maxMillis)
	v.nonNegative("global.runtime.slow_task", g.Runtime.SlowTask, maxMillis)
	v.nonNegative("global.runtime.shutdown_grace", g.Runtime.ShutdownGrace, maxMillis)
	switch g.Log.Level {
	case LogDebug, LogInfo, LogWarn, LogError:
	default:
		v.fail("global.log.level", "global.log.level: unknown value %q (want %s, %s, %s or %s)", g.Log.Level, LogDebug, LogInfo, LogWarn, LogError)
	}
	switch g.Log.Format {
	case LogText, LogJSON:
	default:
		v.fail("global.log.format", "global.log.format: unknown value %q (want %s or %s)", g.Log.Format, LogText, LogJSON)
	}
}

func (v *validator) redis(r *Redis) {
	const p = "global.redis."
	if r.Inherit && (r.URL != "" || len(r.Addrs) > 0) {
		v.failAt([]string{p + "inherit", p + "url", p + "addrs"},
			"global.redis.inherit uses the host's client; global.redis.url and global.redis.addrs must be empty")
	}
	// The host's client already has its database; the module cannot switch
	// it (SELECT on a pooled client would move the host's own commands).
	if r.Inherit && r.DB != 0 {
		v.failAt([]string{p + "db", p + "inherit"},
			"global.redis.db (%d) cannot be used with global.redis.inherit: the host's client keeps its own database; select it when creating that client", r.DB)
	}
	if r.URL != "" && len(r.Addrs) > 0 {
		v.failAt([]string{p + "url", p + "addrs"},
			"global.redis.url and global.redis.addrs are mutually exclusive; set one of them")
	}
	if r.Cluster && r.MasterName != "" {
		v.failAt([]string{p + "master_name", p + "cluster"},
			"global.redis.cluster and global.redis.master_name are mutually exclusive (Redis Cluster or Sentinel)")
	}
	if r.MasterName != "" && len(r.Addrs) == 0 && !r.Inherit {
		v.failAt([]string{p + "master_name"},
			"global.redis.master_name needs the Sentinel addresses in global.redis.addrs")
	}
	if r.Cluster && r.URL == "" && len(r.Addrs) == 0 && !r.Inherit {
		v.failAt([]string{p + "cluster"},
			"global.redis.cluster needs the cluster nodes in global.redis.addrs (or global.redis.url)")
	}
	if len(r.Addrs) > 1 && !r.Cluster && r.MasterName == "" {
		v.failAt([]string{p + "addrs"},
			"global.redis.addrs has %d entries: set global.redis.cluster: true for a Redis Cluster or global.redis.master_name for Sentinel, or list one address",
			len(r.Addrs))
	}
	v.hostPorts(p+"addrs", r.Addrs, false)

	urlDB := -1
	if r.URL != "" {
		urlDB = v.redisURL(p+"url", []string{p + "url"}, r.URL)
	}
	if r.DB < 0 {
		v.fail(p+"db", "global.redis.db must be >= 0, got %d", r.DB)
	} else if r.DB != 0 && r.Cluster {
		v.fail(p+"db", "global.redis.db must be 0 with global.redis.cluster (Redis Cluster has only database 0), got %d", r.DB)
	} else if r.DB != 0 && urlDB > 0 && urlDB != r.DB {
		v.failAt([]string{p + "db", p + "url"},
			"global.redis.db (%d) conflicts with database %d in global.redis.url", r.DB, urlDB)
	}
	if r.Cluster && urlDB > 0 {
		v.failAt([]string{p + "url"}, "global.redis.url selects database %d but Redis Cluster has only database 0", urlDB)
	}
	v.nonNegative(p+"dial_timeout", r.DialTimeout, maxMillis)
	v.nonNegative(p+"read_timeout", r.ReadTimeout, maxMillis)
	v.nonNegative(p+"write_timeout", r.WriteTimeout, maxMillis)
	v.nonNegative(p+"pool_size", int64(r.PoolSize), 0)
	v.nonNegative(p+"wait_replicas", int64(r.WaitReplicas), maxWaitReplicas)
	v.positive(p+"wait_timeout", r.WaitTimeout, maxMillis)
	// WAIT holds its connection up to wait_timeout: a read timeout that ends
	// first would fail every write the replicas are slow to confirm with an
	// i/o timeout instead of the documented error.
	read := r.ReadTimeout
	if read == 0 {
		read = 3000 // the go-redis default
	}
	if r.WaitReplicas > 0 && r.WaitTimeout >= read {
		v.failAt([]string{p + "wait_timeout", p + "read_timeout"},
			"global.redis.wait_timeout (%d ms) must be below global.redis.read_timeout (%d ms): WAIT holds the connection that long",
			r.WaitTimeout, read)
	}
}

// maxWaitReplicas bounds global.redis.wait_replicas (a Redis master serves
// far fewer replicas in practice).
const maxWaitReplicas = 100

// redisURL checks a redis:// or rediss:// URL and returns the database number
// in its path (0 when absent), or -1 if the URL is invalid. name is the key
// path used in messages; locate lists the paths whose line locates the error
// (see failAt). Messages never echo the URL, which may hold a password.
func (v *validator) redisURL(name string, locate []string, raw string) int {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // *url.Error repeats the URL, password included
		}
		v.failAt(locate, "%s is not a valid URL: %v", name, err)
		return -1
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		v.failAt(locate, "%s: unsupported scheme %q (want redis:// or rediss://)", name, u.Scheme)
		return -1
	}
	if u.Hostname() == "" {
		v.failAt(locate, "%s has no host (want %s://[user:pass@]host:port/db)", name, u.Scheme)
		return -1
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			v.failAt(locate, "%s: invalid port %q", name, port)
			return -1
		}
	}
	dbPart := strings.TrimPrefix(u.Path, "/")
	if dbPart == "" {
		return 0
	}
	db, err := strconv.Atoi(dbPart)
	if err != nil || db < 0 {
		v.failAt(locate, "%s: the path must be a database number, got %q", name, u.Path)
		return -1
	}
	return db
}

// hostPorts checks a list of host:port addresses (or redis URLs when
// allowURL) and rejects duplicates.
func (v *validator) hostPorts(path string, addrs []string, allowURL bool) {
	seen := map[string]int{}
	for i, a := range addrs {
		ip := fmt.Sprintf("%s[%d]", path, i)
		if first, dup := seen[a]; dup {
			v.failAt([]string{ip, path}, "%s: %q is listed twice (also %s[%d])", path, a, path, first)
			continue
		}
		seen[a] = i
		if allowURL && strings.Contains(a, "://") {
			v.redisURL(ip, []string{ip, path}, a)
			continue
		}
		if msg := checkHostPort(a, false); msg != "" {
			v.failAt([]string{ip, path}, "%s: %q %s", ip, a, msg)
		}
	}
}

// checkHostPort returns "" if s is host:port with a numeric port, or a
// description of the problem. emptyHost allows ":port".
func checkHostPort(s string, emptyHost bool) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return "is not host:port (" + ae.Err + ")"
		}
		return "is not host:port"
	}
	if host == "" && !emptyHost {
		return "has no host"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || (n == 0 && !emptyHost) {
		return fmt.Sprintf("has an invalid port %q", port)
	}
	return ""
}

func (v *validator) lock(l *Lock) {
	v.positive("lock.default_ttl", l.DefaultTTL, maxMillis)
	v.positive("lock.max_ttl", l.MaxTTL, maxMillis)
	if l.DefaultTTL > 0 && l.MaxTTL > 0 && l.MaxTTL < l.DefaultTTL {
		v.failAt([]string{"lock.max_ttl", "lock.default_ttl"},
			"lock.max_ttl (%d) must be >= lock.default_ttl (%d)", l.MaxTTL, l.DefaultTTL)
	}
	v.positive("lock.retry", l.Retry, maxMillis)
	v.nonNegative("lock.max_retries", int64(l.MaxRetries), 0)
	v.nonNegative("lock.wait", l.Wait, maxMillis)

	v.positive("lock.auto_extend.interval", l.AutoExtend.Interval, maxMillis)
	if l.AutoExtend.Interval > 0 && l.DefaultTTL > 0 && l.AutoExtend.Interval >= l.DefaultTTL {
		v.failAt([]string{"lock.auto_extend.interval", "lock.default_ttl"},
			"lock.auto_extend.interval (%d) must be < lock.default_ttl (%d), or locks expire before they are extended",
			l.AutoExtend.Interval, l.DefaultTTL)
	}

	r := l.Redlock
	if r.Quorum < 1 {
		v.fail("lock.redlock.quorum", "lock.redlock.quorum must be >= 1, got %d", r.Quorum)
	}
	if r.Enabled {
		if len(r.Addrs) == 0 {
			v.failAt([]string{"lock.redlock.addrs", "lock.redlock.enabled"},
				"lock.redlock.addrs must list the independent Redis nodes when lock.redlock.enabled is true")
		} else if r.Quorum > len(r.Addrs) {
			v.failAt([]string{"lock.redlock.quorum", "lock.redlock.addrs"},
				"lock.redlock.quorum (%d) must be <= the number of lock.redlock.addrs (%d)", r.Quorum, len(r.Addrs))
		} else if r.Quorum <= len(r.Addrs)/2 {
			v.failAt([]string{"lock.redlock.quorum", "lock.redlock.addrs"},
				"lock.redlock.quorum (%d) must be a majority of the %d lock.redlock.addrs: a smaller quorum could grant one lock to two owners",
				r.Quorum, len(r.Addrs))
		}
	}
	v.hostPorts("lock.redlock.addrs", r.Addrs, true)
}

func (v *validator) rank(r *Rank) {
	v.positive("rank.max_members", int64(r.MaxMembers), 0)
	if r.Reset.Enabled && r.Reset.ArchiveTable == "" {
		v.failAt([]string{"rank.reset.archive_table", "rank.reset.enabled"},
			"rank.reset.archive_table must not be empty when rank.reset.enabled is true")
	}
	v.positive("rank.reset.archive_ttl", r.Reset.ArchiveTTL, maxSeconds)
}

func (v *validator) queue(q *Queue) {
	d := q.Defaults
	v.positive("queue.defaults.max_length", int64(d.MaxLength), 0)
	v.positive("queue.defaults.message_ttl", d.MessageTTL, maxMillis)
	v.nonNegative("queue.defaults.max_retries", int64(d.MaxRetries), 0)
	v.nonNegative("queue.defaults.retry_delay", d.RetryDelay, maxMillis)
	v.positive("queue.defaults.visibility_timeout", d.VisibilityTimeout, maxMillis)
	v.positive("queue.dead_letter.max_length", int64(q.DeadLetter.MaxLength), 0)
	v.positive("queue.dead_letter.ttl", q.DeadLetter.TTL, maxMillis)
}

func (v *validator) rateLimiter(r *RateLimiter) {
	switch r.Algorithm {
	case AlgorithmTokenBucket, AlgorithmSlidingWindow:
	default:
		v.fail("rate_limiter.algorithm", "rate_limiter.algorithm: unknown value %q (want %s or %s)",
			r.Algorithm, AlgorithmTokenBucket, AlgorithmSlidingWindow)
	}
	v.positive("rate_limiter.sync_interval", r.SyncInterval, maxMillis)
	v.positive("rate_limiter.cleanup_interval", r.CleanupInterval, maxMillis)
	v.positive("rate_limiter.timeout", r.Timeout, maxMillis)
}

func (v *validator) scheduler(s *Scheduler) {
	if s.Timezone == "" {
		v.fail("scheduler.timezone", `scheduler.timezone must not be empty (use "UTC" or an IANA name such as "Asia/Shanghai")`)
	} else if _, err := time.LoadLocation(s.Timezone); err != nil {
		v.fail("scheduler.timezone", "scheduler.timezone: unknown time zone %q", s.Timezone)
	}
	v.positive("scheduler.distributed.lock_ttl", s.Distributed.LockTTL, maxMillis)
	v.nonNegative("scheduler.retry.max_retries", int64(s.Retry.MaxRetries), 0)
	v.nonNegative("scheduler.retry.retry_delay", s.Retry.RetryDelay, maxMillis)
	switch s.Persistence.Storage {
	case StorageRedis, StorageMemory:
	default:
		v.fail("scheduler.persistence.storage", "scheduler.persistence.storage: unknown value %q (want %s or %s)",
			s.Persistence.Storage, StorageRedis, StorageMemory)
	}
}

func (v *validator) ops(o *Ops) {
	if msg := checkHostPort(o.Listen, true); msg != "" {
		v.fail("ops.listen", "ops.listen: %q %s", o.Listen, msg)
	}
	v.positive("ops.metrics.label_cap", int64(o.Metrics.LabelCap), 0)
	v.positive("ops.metrics.idle_after", o.Metrics.IdleAfter, maxMillis)
}
