package config

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

//go:embed global.yaml
var globalYAML []byte

// noEnv is an environment with no variables set, so tests do not depend on
// the environment of the machine running them.
func noEnv(string) string { return "" }

func mustParse(t *testing.T, src string) Config {
	t.Helper()
	cfg, err := parse([]byte(src), "config.yaml", noEnv)
	if err != nil {
		t.Fatalf("parse failed: %v\ninput:\n%s", err, src)
	}
	return cfg
}

func parseErr(t *testing.T, src string) error {
	t.Helper()
	_, err := parse([]byte(src), "config.yaml", noEnv)
	if err == nil {
		t.Fatalf("parse succeeded, want an error\ninput:\n%s", src)
	}
	return err
}

func wantErrContains(t *testing.T, src string, subs ...string) error {
	t.Helper()
	err := parseErr(t, src)
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q\ndoes not contain %q\ninput:\n%s", err, s, src)
		}
	}
	return err
}

func TestDefaults(t *testing.T) {
	d := Default()
	if err := d.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"global.enabled", d.Global.Enabled, true},
		{"global.node_id", d.Global.NodeID, ""},
		{"global.service_id", d.Global.ServiceID, int64(0)},
		{"global.service_name", d.Global.ServiceName, ""},
		{"global.redis.inherit", d.Global.Redis.Inherit, false},
		{"global.redis.url", d.Global.Redis.URL, ""},
		{"global.redis.addrs", len(d.Global.Redis.Addrs), 0},
		{"global.redis.prefix", d.Global.Redis.Prefix, "shield:"},
		{"global.redis.dial_timeout", d.Global.Redis.DialTimeout, int64(5000)},
		{"global.redis.read_timeout", d.Global.Redis.ReadTimeout, int64(3000)},
		{"global.redis.write_timeout", d.Global.Redis.WriteTimeout, int64(3000)},
		{"global.redis.pool_size", d.Global.Redis.PoolSize, 0},
		{"global.redis.wait_replicas", d.Global.Redis.WaitReplicas, 0},
		{"global.redis.wait_timeout", d.Global.Redis.WaitTimeout, int64(1000)},
		{"global.cache.enabled", d.Global.Cache.Enabled, true},
		{"global.cache.max_size", d.Global.Cache.MaxSize, 10000},
		{"global.cache.default_ttl", d.Global.Cache.DefaultTTL, int64(60000)},
		{"global.cache.sync", d.Global.Cache.Sync, true},
		{"lock.default_ttl", d.Lock.DefaultTTL, int64(30000)},
		{"lock.max_ttl", d.Lock.MaxTTL, int64(300000)},
		{"lock.reentrant", d.Lock.Reentrant, true},
		{"lock.retry", d.Lock.Retry, int64(100)},
		{"lock.max_retries", d.Lock.MaxRetries, 0},
		{"lock.wait", d.Lock.Wait, int64(10000)},
		{"lock.auto_extend.enabled", d.Lock.AutoExtend.Enabled, true},
		{"lock.auto_extend.interval", d.Lock.AutoExtend.Interval, int64(10000)},
		{"lock.fair.enabled", d.Lock.Fair.Enabled, false},
		{"lock.redlock.enabled", d.Lock.Redlock.Enabled, false},
		{"lock.redlock.quorum", d.Lock.Redlock.Quorum, 3},
		{"rank.max_members", d.Rank.MaxMembers, 10000},
		{"rank.reset.archive_table", d.Rank.Reset.ArchiveTable, "rank_archive"},
		{"rank.reset.archive_ttl", d.Rank.Reset.ArchiveTTL, int64(2592000)},
		{"queue.defaults.max_length", d.Queue.Defaults.MaxLength, 100000},
		{"queue.defaults.message_ttl", d.Queue.Defaults.MessageTTL, int64(86400000)},
		{"queue.defaults.max_retries", d.Queue.Defaults.MaxRetries, 3},
		{"queue.defaults.retry_delay", d.Queue.Defaults.RetryDelay, int64(60000)},
		{"queue.defaults.visibility_timeout", d.Queue.Defaults.VisibilityTimeout, int64(30000)},
		{"queue.dead_letter.enabled", d.Queue.DeadLetter.Enabled, true},
		{"queue.dead_letter.max_length", d.Queue.DeadLetter.MaxLength, 10000},
		{"queue.dead_letter.ttl", d.Queue.DeadLetter.TTL, int64(604800000)},
		{"global.log.level", d.Global.Log.Level, "info"},
		{"global.log.format", d.Global.Log.Format, "text"},
		{"rate_limiter.algorithm", d.RateLimiter.Algorithm, "token_bucket"},
		{"rate_limiter.sync_interval", d.RateLimiter.SyncInterval, int64(1000)},
		{"rate_limiter.cleanup_interval", d.RateLimiter.CleanupInterval, int64(60000)},
		{"rate_limiter.timeout", d.RateLimiter.Timeout, int64(300)},
		{"scheduler.timezone", d.Scheduler.Timezone, "UTC"},
		{"scheduler.distributed.enabled", d.Scheduler.Distributed.Enabled, true},
		{"scheduler.distributed.lock_ttl", d.Scheduler.Distributed.LockTTL, int64(30000)},
		{"scheduler.retry.max_retries", d.Scheduler.Retry.MaxRetries, 3},
		{"scheduler.retry.retry_delay", d.Scheduler.Retry.RetryDelay, int64(60000)},
		{"scheduler.persistence.enabled", d.Scheduler.Persistence.Enabled, true},
		{"scheduler.persistence.storage", d.Scheduler.Persistence.Storage, "redis"},
		{"ops.enabled", d.Ops.Enabled, false},
		{"ops.listen", d.Ops.Listen, "127.0.0.1:9190"},
		{"ops.admin", d.Ops.Admin, false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	if d.Global.Redis.Configured() {
		t.Error("default Redis is Configured; want the memory backend")
	}
}

// leafPaths lists the dotted key path of every scalar or list field of t.
func leafPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := yamlName(f)
		p := joinPath(prefix, name)
		if f.Type.Kind() == reflect.Struct {
			out = append(out, leafPaths(f.Type, p)...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// diffValues lists the leaf fields where the structs got and want differ.
func diffValues(got, want reflect.Value, prefix string) []string {
	if got.Kind() == reflect.Struct {
		var out []string
		for i := 0; i < got.NumField(); i++ {
			p := joinPath(prefix, yamlName(got.Type().Field(i)))
			out = append(out, diffValues(got.Field(i), want.Field(i), p)...)
		}
		return out
	}
	if !reflect.DeepEqual(got.Interface(), want.Interface()) {
		return []string{fmt.Sprintf("%s = %#v, want %#v", prefix, got.Interface(), want.Interface())}
	}
	return nil
}

// TestGlobalYAMLMatchesDefault keeps the documented file and Default in sync:
// same values, and every key documented.
func TestGlobalYAMLMatchesDefault(t *testing.T) {
	cfg, err := parse(globalYAML, "global.yaml", noEnv)
	if err != nil {
		t.Fatalf("global.yaml does not parse: %v", err)
	}
	if want := Default(); !reflect.DeepEqual(cfg, want) {
		for _, d := range diffValues(reflect.ValueOf(cfg), reflect.ValueOf(want), "") {
			t.Errorf("global.yaml differs from Default(): %s", d)
		}
		t.FailNow()
	}
	var c Config
	lines, err := decode(&c, globalYAML, "global.yaml")
	if err != nil {
		t.Fatal(err)
	}
	paths := leafPaths(reflect.TypeOf(Config{}), "")
	if len(paths) < 60 {
		t.Fatalf("only %d leaf keys found; the walk is broken", len(paths))
	}
	for _, p := range paths {
		if _, ok := lines[p]; !ok {
			t.Errorf("global.yaml does not document %s", p)
		}
	}
	// Every documented key line carries a comment.
	for i, line := range strings.Split(string(globalYAML), "\n") {
		trim := strings.TrimSpace(line)
		if trim == "" || strings.HasPrefix(trim, "#") || strings.HasSuffix(trim, ":") {
			continue
		}
		if !strings.Contains(line, "#") {
			t.Errorf("global.yaml:%d has no comment: %q", i+1, line)
		}
	}
}

// TestStructTags checks that every field has a yaml tag and that the walker
// supports its kind (an unsupported kind would panic at parse time).
func TestStructTags(t *testing.T) {
	var check func(reflect.Type)
	check = func(rt reflect.Type) {
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			if yamlName(f) == "" {
				t.Errorf("%s.%s has no yaml tag", rt.Name(), f.Name)
			}
			switch f.Type.Kind() {
			case reflect.Struct:
				check(f.Type)
			case reflect.Bool, reflect.Int, reflect.Int64, reflect.String:
			case reflect.Slice:
				if f.Type.Elem().Kind() != reflect.String {
					t.Errorf("%s.%s: unsupported slice type %s", rt.Name(), f.Name, f.Type)
				}
			default:
				t.Errorf("%s.%s: unsupported kind %s", rt.Name(), f.Name, f.Type.Kind())
			}
		}
	}
	check(reflect.TypeOf(Config{}))
}

func TestEmptyFile(t *testing.T) {
	for _, src := range []string{"", "\n\n", "# nothing but a comment\n", "~\n", "---\n", "---\n...\n"} {
		cfg := mustParse(t, src)
		if !reflect.DeepEqual(cfg, Default()) {
			t.Errorf("parse(%q) = %+v, want Default()", src, cfg)
		}
	}
}

func TestPartialOverlay(t *testing.T) {
	cfg := mustParse(t, "global: {cache: {max_size: 5}}\n")
	want := Default()
	want.Global.Cache.MaxSize = 5
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got %+v\nwant %+v", cfg, want)
	}

	cfg = mustParse(t, `
global:
  node_id: node-7
  service_id: 12
  redis:
    addrs: ["10.0.0.1:7000", "10.0.0.2:7000"]
    cluster: true
  cache:
lock:
  auto_extend:
    interval: 5000
  redlock:
    enabled: true
    quorum: 2
    addrs:
      - 10.0.1.1:6379
      - redis://10.0.1.2:6379/0
      - 10.0.1.3:6379
scheduler:
  timezone: Asia/Shanghai
ops:
  enabled: true
  listen: ":9190"
`)
	want = Default()
	want.Global.NodeID = "node-7"
	want.Global.ServiceID = 12
	want.Global.Redis.Addrs = []string{"10.0.0.1:7000", "10.0.0.2:7000"}
	want.Global.Redis.Cluster = true
	want.Lock.AutoExtend.Interval = 5000
	want.Lock.Redlock = Redlock{Enabled: true, Quorum: 2, Addrs: []string{"10.0.1.1:6379", "redis://10.0.1.2:6379/0", "10.0.1.3:6379"}}
	want.Scheduler.Timezone = "Asia/Shanghai"
	want.Ops.Enabled, want.Ops.Listen = true, ":9190"
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got %+v\nwant %+v", cfg, want)
	}
	if loc, err := cfg.Scheduler.Location(); err != nil || loc.String() != "Asia/Shanghai" {
		t.Errorf("Location() = %v, %v", loc, err)
	}
}

func TestIntegerForms(t *testing.T) {
	cfg := mustParse(t, "global:\n  cache:\n    max_size: 0x10\n    default_ttl: 1_000\n")
	if cfg.Global.Cache.MaxSize != 16 || cfg.Global.Cache.DefaultTTL != 1000 {
		t.Errorf("got max_size %d default_ttl %d, want 16 and 1000", cfg.Global.Cache.MaxSize, cfg.Global.Cache.DefaultTTL)
	}
}

func TestAnchorsAndAliases(t *testing.T) {
	cfg := mustParse(t, `
lock:
  default_ttl: &ttl 45000
scheduler:
  distributed:
    lock_ttl: *ttl
`)
	if cfg.Lock.DefaultTTL != 45000 || cfg.Scheduler.Distributed.LockTTL != 45000 {
		t.Errorf("aliases not followed: %d %d", cfg.Lock.DefaultTTL, cfg.Scheduler.Distributed.LockTTL)
	}
	wantErrContains(t, "a: &x 1\nlock:\n  reentrant: *x\n", "config.yaml:3: lock.reentrant: expected a boolean, got integer 1")
	wantErrContains(t, "global:\n  cache: {max_size: *nope}\n", "config.yaml:2: yaml: unknown anchor 'nope' referenced")
	wantErrContains(t, "base: &b {enabled: true}\nlock:\n  <<: *b\n", "config.yaml:1: unknown key \"base\"", "config.yaml:3: lock: YAML merge keys (<<) are not supported")
}

func TestEnvOverride(t *testing.T) {
	env := func(url string) func(string) string {
		return func(k string) string {
			if k == EnvRedisURL {
				return url
			}
			return ""
		}
	}
	cfg, err := parse([]byte("global:\n  redis:\n    url: redis://file:6379/1\n"), "config.yaml", env("redis://env:6379/2"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Global.Redis.URL != "redis://env:6379/2" {
		t.Errorf("url = %q, want the environment value", cfg.Global.Redis.URL)
	}
	if !cfg.Global.Redis.Configured() {
		t.Error("Configured() = false with a url")
	}

	// Empty variable: the file wins.
	cfg, err = parse([]byte("global:\n  redis:\n    url: redis://file:6379/1\n"), "config.yaml", env(""))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Global.Redis.URL != "redis://file:6379/1" {
		t.Errorf("url = %q, want the file value", cfg.Global.Redis.URL)
	}

	// An invalid environment value names the variable, not a file line, and
	// does not echo the password.
	_, err = parse([]byte("global:\n  redis:\n    url: redis://file:6379\n"), "config.yaml", env("http://u:s3cret@host:6379"))
	if err == nil {
		t.Fatal("want an error for an http:// url")
	}
	msg := err.Error()
	if !strings.Contains(msg, `config.yaml: global.redis.url: unsupported scheme "http"`) || !strings.Contains(msg, "SHIELD_REDIS_URL") {
		t.Errorf("error %q should name the key and SHIELD_REDIS_URL without a line", msg)
	}
	if strings.Contains(msg, "s3cret") {
		t.Errorf("error %q leaks the password", msg)
	}

	// Parse reads the real environment; ApplyEnv(nil) too.
	t.Setenv(EnvRedisURL, "rediss://real-env:6380/3")
	cfg, err = Parse(nil, "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Global.Redis.URL != "rediss://real-env:6380/3" {
		t.Errorf("Parse: url = %q, want the SHIELD_REDIS_URL value", cfg.Global.Redis.URL)
	}
	d := Default()
	d.ApplyEnv(nil)
	if d.Global.Redis.URL != "rediss://real-env:6380/3" {
		t.Errorf("ApplyEnv(nil): url = %q", d.Global.Redis.URL)
	}
	d = Default()
	d.ApplyEnv(noEnv)
	if d.Global.Redis.URL != "" {
		t.Errorf("ApplyEnv(noEnv) changed url to %q", d.Global.Redis.URL)
	}
}

func TestValidationRules(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"cache max_size zero", "global:\n  cache:\n    max_size: 0\n",
			"config.yaml:3: global.cache.max_size must be > 0, got 0"},
		{"cache max_size zero flow", "global: {cache: {max_size: 0}}\n",
			"config.yaml:1: global.cache.max_size must be > 0, got 0"},
		{"cache default_ttl negative", "global:\n  cache:\n    default_ttl: -5\n",
			"config.yaml:3: global.cache.default_ttl must be > 0, got -5"},
		{"redis db negative", "global:\n  redis:\n    db: -1\n",
			"config.yaml:3: global.redis.db must be >= 0, got -1"},
		{"redis db in cluster", "global:\n  redis:\n    addrs: [a:1]\n    cluster: true\n    db: 2\n",
			"config.yaml:5: global.redis.db must be 0 with global.redis.cluster"},
		{"redis negative timeout", "global:\n  redis:\n    read_timeout: -1\n",
			"config.yaml:3: global.redis.read_timeout must be >= 0, got -1"},
		{"redis negative dial timeout", "global:\n  redis:\n    dial_timeout: -100\n",
			"config.yaml:3: global.redis.dial_timeout must be >= 0, got -100"},
		{"redis negative write timeout", "global:\n  redis:\n    write_timeout: -1\n",
			"config.yaml:3: global.redis.write_timeout must be >= 0, got -1"},
		{"redis negative pool", "global:\n  redis:\n    pool_size: -3\n",
			"config.yaml:3: global.redis.pool_size must be >= 0, got -3"},
		{"redis negative wait_replicas", "global:\n  redis:\n    wait_replicas: -1\n",
			"config.yaml:3: global.redis.wait_replicas must be >= 0, got -1"},
		{"redis huge wait_replicas", "global:\n  redis:\n    wait_replicas: 1000\n",
			"config.yaml:3: global.redis.wait_replicas must be <= 100, got 1000"},
		{"redis wait_replicas not a number", "global:\n  redis:\n    wait_replicas: one\n",
			"config.yaml:3: global.redis.wait_replicas"},
		{"redis zero wait_timeout", "global:\n  redis:\n    wait_timeout: 0\n",
			"config.yaml:3: global.redis.wait_timeout must be > 0, got 0"},
		{"redis wait_timeout over read_timeout", "global:\n  redis:\n    wait_replicas: 1\n    read_timeout: 2000\n    wait_timeout: 2000\n",
			"config.yaml:5: global.redis.wait_timeout (2000 ms) must be below global.redis.read_timeout (2000 ms)"},
		{"redis wait_timeout over default read_timeout", "global:\n  redis:\n    wait_replicas: 1\n    wait_timeout: 5000\n",
			"config.yaml:4: global.redis.wait_timeout (5000 ms) must be below global.redis.read_timeout (3000 ms)"},
		{"redis bad scheme", "global:\n  redis:\n    url: http://h:1\n",
			`config.yaml:3: global.redis.url: unsupported scheme "http"`},
		{"redis url no host", "global:\n  redis:\n    url: \"redis://:6379\"\n",
			"config.yaml:3: global.redis.url has no host"},
		{"redis url bad db", "global:\n  redis:\n    url: redis://h:6379/x\n",
			`config.yaml:3: global.redis.url: the path must be a database number, got "/x"`},
		{"redis url bad port", "global:\n  redis:\n    url: redis://h:99999\n",
			`config.yaml:3: global.redis.url: invalid port "99999"`},
		{"redis url and db conflict", "global:\n  redis:\n    url: redis://h:6379/2\n    db: 3\n",
			"config.yaml:4: global.redis.db (3) conflicts with database 2 in global.redis.url"},
		{"redis cluster url with db", "global:\n  redis:\n    url: redis://h:6379/4\n    cluster: true\n",
			"config.yaml:3: global.redis.url selects database 4 but Redis Cluster has only database 0"},
		{"redis timeout too large", "global:\n  redis:\n    dial_timeout: 9999999999999999\n",
			"config.yaml:3: global.redis.dial_timeout must be <= 9223372036854, got 9999999999999999"},
		{"rank archive_ttl overflows Duration", "rank:\n  reset:\n    archive_ttl: 9999999999999\n",
			"config.yaml:3: rank.reset.archive_ttl must be <= 9223372036, got 9999999999999"},
		{"redis url and addrs", "global:\n  redis:\n    url: redis://h:6379\n    addrs: [h:6379]\n",
			"config.yaml:3: global.redis.url and global.redis.addrs are mutually exclusive"},
		{"redis inherit and url", "global:\n  redis:\n    inherit: true\n    url: redis://h:6379\n",
			"config.yaml:3: global.redis.inherit uses the host's client"},
		{"redis inherit and db", "global:\n  redis:\n    inherit: true\n    db: 2\n",
			"config.yaml:4: global.redis.db (2) cannot be used with global.redis.inherit"},
		{"redis cluster and sentinel", "global:\n  redis:\n    addrs: [a:1]\n    cluster: true\n    master_name: m\n",
			"config.yaml:5: global.redis.cluster and global.redis.master_name are mutually exclusive"},
		{"redis sentinel without addrs", "global:\n  redis:\n    master_name: m\n",
			"config.yaml:3: global.redis.master_name needs the Sentinel addresses"},
		{"redis cluster without nodes", "global:\n  redis:\n    cluster: true\n",
			"config.yaml:3: global.redis.cluster needs the cluster nodes"},
		{"redis several addrs no mode", "global:\n  redis:\n    addrs: [a:1, b:2]\n",
			"config.yaml:3: global.redis.addrs has 2 entries"},
		{"redis addr without port", "global:\n  redis:\n    addrs:\n      - localhost\n",
			`config.yaml:4: global.redis.addrs[0]: "localhost" is not host:port (missing port in address)`},
		{"redis addr bad port", "global:\n  redis:\n    cluster: true\n    addrs:\n      - a:1\n      - b:x\n",
			`config.yaml:6: global.redis.addrs[1]: "b:x" has an invalid port "x"`},
		{"redis addr duplicate", "global:\n  redis:\n    cluster: true\n    addrs:\n      - a:1\n      - a:1\n",
			`config.yaml:6: global.redis.addrs: "a:1" is listed twice`},
		{"lock default_ttl zero", "lock:\n  default_ttl: 0\n",
			"config.yaml:2: lock.default_ttl must be > 0, got 0"},
		{"lock max_ttl below default", "lock:\n  max_ttl: 1000\n",
			"config.yaml:2: lock.max_ttl (1000) must be >= lock.default_ttl (30000)"},
		{"lock default above max (line of default_ttl)", "lock:\n  reentrant: true\n  default_ttl: 400000\n",
			"config.yaml:3: lock.max_ttl (300000) must be >= lock.default_ttl (400000)"},
		{"lock negative ttl", "lock:\n  max_ttl: -1\n",
			"config.yaml:2: lock.max_ttl must be > 0, got -1"},
		{"lock ttl overflows Duration", "lock:\n  max_ttl: 9223372036854775807\n",
			"config.yaml:2: lock.max_ttl must be <= 9223372036854, got 9223372036854775807"},
		{"lock retry zero", "lock:\n  retry: 0\n",
			"config.yaml:2: lock.retry must be > 0, got 0"},
		{"lock max_retries negative", "lock:\n  max_retries: -1\n",
			"config.yaml:2: lock.max_retries must be >= 0, got -1"},
		{"auto_extend interval zero", "lock:\n  auto_extend:\n    interval: 0\n",
			"config.yaml:3: lock.auto_extend.interval must be > 0, got 0"},
		{"auto_extend interval not below ttl", "lock:\n  auto_extend:\n    interval: 30000\n",
			"config.yaml:3: lock.auto_extend.interval (30000) must be < lock.default_ttl (30000)"},
		{"redlock quorum zero", "lock:\n  redlock:\n    quorum: 0\n",
			"config.yaml:3: lock.redlock.quorum must be >= 1, got 0"},
		{"redlock without addrs", "lock:\n  redlock:\n    enabled: true\n",
			"config.yaml:3: lock.redlock.addrs must list the independent Redis nodes"},
		{"redlock quorum above addrs", "lock:\n  redlock:\n    enabled: true\n    quorum: 3\n    addrs: [a:1, b:2]\n",
			"config.yaml:4: lock.redlock.quorum (3) must be <= the number of lock.redlock.addrs (2)"},
		{"redlock bad url", "lock:\n  redlock:\n    addrs:\n      - a:1\n      - mysql://b:2\n",
			`config.yaml:5: lock.redlock.addrs[1]: unsupported scheme "mysql"`},
		{"rank max_members zero", "rank:\n  max_members: 0\n",
			"config.yaml:2: rank.max_members must be > 0, got 0"},
		{"rank archive_ttl negative", "rank:\n  reset:\n    archive_ttl: -1\n",
			"config.yaml:3: rank.reset.archive_ttl must be > 0, got -1"},
		{"rank archive_table empty", "rank:\n  reset:\n    archive_table: \"\"\n",
			"config.yaml:3: rank.reset.archive_table must not be empty"},
		{"queue max_length zero", "queue:\n  defaults:\n    max_length: 0\n",
			"config.yaml:3: queue.defaults.max_length must be > 0, got 0"},
		{"queue message_ttl negative", "queue:\n  defaults:\n    message_ttl: -1\n",
			"config.yaml:3: queue.defaults.message_ttl must be > 0, got -1"},
		{"queue max_retries negative", "queue:\n  defaults:\n    max_retries: -1\n",
			"config.yaml:3: queue.defaults.max_retries must be >= 0, got -1"},
		{"queue retry_delay negative", "queue:\n  defaults:\n    retry_delay: -1\n",
			"config.yaml:3: queue.defaults.retry_delay must be >= 0, got -1"},
		{"queue visibility zero", "queue:\n  defaults:\n    visibility_timeout: 0\n",
			"config.yaml:3: queue.defaults.visibility_timeout must be > 0, got 0"},
		{"dead letter max_length zero", "queue:\n  dead_letter:\n    max_length: 0\n",
			"config.yaml:3: queue.dead_letter.max_length must be > 0, got 0"},
		{"dead letter ttl negative", "queue:\n  dead_letter:\n    ttl: -7\n",
			"config.yaml:3: queue.dead_letter.ttl must be > 0, got -7"},
		{"log level", "global:\n  log:\n    level: verbose\n",
			`config.yaml:3: global.log.level: unknown value "verbose" (want debug, info, warn or error)`},
		{"log format", "global:\n  log:\n    format: xml\n",
			`config.yaml:3: global.log.format: unknown value "xml" (want text or json)`},
		{"rate limiter algorithm", "rate_limiter:\n  algorithm: leaky\n",
			`config.yaml:2: rate_limiter.algorithm: unknown value "leaky" (want token_bucket or sliding_window)`},
		{"rate limiter sync zero", "rate_limiter:\n  sync_interval: 0\n",
			"config.yaml:2: rate_limiter.sync_interval must be > 0, got 0"},
		{"rate limiter cleanup negative", "rate_limiter:\n  cleanup_interval: -1\n",
			"config.yaml:2: rate_limiter.cleanup_interval must be > 0, got -1"},
		{"scheduler timezone", "scheduler:\n  timezone: Mars/Base\n",
			`config.yaml:2: scheduler.timezone: unknown time zone "Mars/Base"`},
		{"scheduler timezone empty", "scheduler:\n  timezone: \"\"\n",
			"config.yaml:2: scheduler.timezone must not be empty"},
		{"scheduler lock_ttl zero", "scheduler:\n  distributed:\n    lock_ttl: 0\n",
			"config.yaml:3: scheduler.distributed.lock_ttl must be > 0, got 0"},
		{"scheduler max_retries negative", "scheduler:\n  retry:\n    max_retries: -2\n",
			"config.yaml:3: scheduler.retry.max_retries must be >= 0, got -2"},
		{"scheduler retry_delay negative", "scheduler:\n  retry:\n    retry_delay: -2\n",
			"config.yaml:3: scheduler.retry.retry_delay must be >= 0, got -2"},
		{"scheduler storage", "scheduler:\n  persistence:\n    storage: mysql\n",
			`config.yaml:3: scheduler.persistence.storage: unknown value "mysql" (want redis or memory)`},
		{"ops listen no port", "ops:\n  listen: localhost\n",
			`config.yaml:2: ops.listen: "localhost" is not host:port`},
		{"ops listen port out of range", "ops:\n  listen: \"127.0.0.1:70000\"\n",
			`config.yaml:2: ops.listen: "127.0.0.1:70000" has an invalid port "70000"`},
		{"ops listen empty", "ops:\n  listen: \"\"\n",
			`config.yaml:2: ops.listen: "" is not host:port`},
		{"ops listen bad port", "ops:\n  listen: \"127.0.0.1:http\"\n",
			`config.yaml:2: ops.listen: "127.0.0.1:http" has an invalid port "http"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := wantErrContains(t, tt.src, tt.want)
			var e *Error
			if !errors.As(err, &e) || e.Source != "config.yaml" || e.Line == 0 || e.Path == "" {
				t.Errorf("error %#v should be an *Error with source, line and path", err)
			}
		})
	}
}

func TestValidateWithoutFile(t *testing.T) {
	c := Default()
	c.Lock.MaxTTL = 1000
	err := c.Validate()
	if err == nil || err.Error() != "lock.max_ttl (1000) must be >= lock.default_ttl (30000)" {
		t.Fatalf("Validate() = %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Line != 0 || e.Source != "" || e.Path != "lock.max_ttl" {
		t.Errorf("error = %#v", e)
	}

	// The pair error points at the key that came from the file.
	err = parseErr(t, "lock:\n  default_ttl: 500000\n")
	if !strings.Contains(err.Error(), "config.yaml:2: lock.max_ttl (300000) must be >= lock.default_ttl (500000)") {
		t.Errorf("error %q", err)
	}
	c = Default()
	c.Lock.Redlock.Enabled = true
	c.Global.Cache.MaxSize = -1
	err = c.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"global.cache.max_size must be > 0, got -1", "lock.redlock.addrs must list"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %q, want it to contain %q", err, want)
		}
	}
}

func TestDefaultValueErrorNamesFileWithoutLine(t *testing.T) {
	// redlock.addrs is absent, so the error points at lock.redlock.enabled.
	err := parseErr(t, "lock:\n  redlock:\n    enabled: true\n")
	var e *Error
	if !errors.As(err, &e) || e.Line != 3 {
		t.Fatalf("redlock error should point at enabled (line 3): %v", err)
	}
	// Nothing in the file: Source but no line.
	c := Default()
	c.Rank.MaxMembers = 0
	v := validator{source: "x.yaml", lines: map[string]int{}}
	err = v.run(&c)
	if err == nil || err.Error() != "x.yaml: rank.max_members must be > 0, got 0" {
		t.Errorf("got %v", err)
	}
}

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		src  string
		want []string
	}{
		{"globl:\n  enabled: true\n", []string{
			`config.yaml:1: unknown key "globl" (known keys: global, lock, rank, queue, rate_limiter, scheduler, ops); did you mean "global"?`}},
		{"global:\n  enabled: true\n  nodeid: x\n", []string{
			`config.yaml:3: unknown key "global.nodeid" (known keys: enabled, node_id, service_id, service_name, redis, cache, runtime, log); did you mean "node_id"?`}},
		{"global:\n  cache:\n    enabled: true\n\n    # comment\n\n    max_sise: 5\n", []string{
			`config.yaml:7: unknown key "global.cache.max_sise" (known keys: enabled, max_size, default_ttl, sync); did you mean "max_size"?`}},
		{"lock:\n  auto_extend:\n    enabled: true\n    period: 5\n", []string{
			`config.yaml:4: unknown key "lock.auto_extend.period" (known keys: enabled, interval)`}},
		{"lock:\n  redlock: {enabled: false, nodes: []}\n", []string{
			`config.yaml:2: unknown key "lock.redlock.nodes" (known keys: enabled, quorum, addrs)`}},
		{"rate_limiter:\n  Algorithm: token_bucket\n", []string{
			`config.yaml:2: unknown key "rate_limiter.Algorithm"`, `did you mean "algorithm"?`}},
		{"ops:\n  listen-addr: x\n", []string{`config.yaml:2: unknown key "ops.listen-addr"`}},
		// Several unknown keys are all reported.
		{"foo: 1\nglobal:\n  bar: 2\n", []string{`config.yaml:1: unknown key "foo"`, `config.yaml:3: unknown key "global.bar"`}},
	}
	for _, tt := range tests {
		err := wantErrContains(t, tt.src, tt.want...)
		if strings.Contains(tt.want[0], "period") && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("no suggestion expected for a distant name: %v", err)
		}
	}
}

func TestWrongTypes(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"string for int", "global:\n  cache:\n    enabled: true\n    max_size: big\n",
			`config.yaml:4: global.cache.max_size: expected an integer, got string "big"`},
		{"quoted number for int", "lock:\n  retry: \"100\"\n",
			`config.yaml:2: lock.retry: expected an integer, got string "100"`},
		{"float for int", "global:\n  cache:\n    max_size: 1.5\n",
			"config.yaml:3: global.cache.max_size: expected an integer, got float 1.5"},
		{"huge int", "global:\n  cache:\n    max_size: 99999999999999999999\n",
			"config.yaml:3: global.cache.max_size: integer 99999999999999999999 is out of range"},
		{"bool for int", "rank:\n  max_members: true\n",
			"config.yaml:2: rank.max_members: expected an integer, got boolean true"},
		{"null for int", "rank:\n  max_members:\n",
			"config.yaml:2: rank.max_members: expected an integer, got null"},
		{"int for bool", "global:\n  enabled: 1\n",
			"config.yaml:2: global.enabled: expected a boolean, got integer 1 (use true or false)"},
		{"yes string for bool", "global:\n  enabled: yes\n",
			`config.yaml:2: global.enabled: expected a boolean, got string "yes" (use true or false)`},
		{"quoted bool", "global:\n  enabled: \"true\"\n",
			`config.yaml:2: global.enabled: expected a boolean, got string "true"`},
		{"int for string", "global:\n  node_id: 42\n",
			"config.yaml:2: global.node_id: expected a string, got integer 42 (quote the value to make it a string)"},
		{"bool for string", "rate_limiter:\n  algorithm: false\n",
			"config.yaml:2: rate_limiter.algorithm: expected a string, got boolean false"},
		{"null for string", "global:\n  redis:\n    password:\n",
			`config.yaml:3: global.redis.password: expected a string, got null (write "" for an empty string)`},
		{"list for map", "global:\n  cache:\n    - max_size: 5\n",
			"config.yaml:2: global.cache: expected a mapping, got a list"},
		{"scalar for map", "lock: on\n",
			`config.yaml:1: lock: expected a mapping, got string "on"`},
		{"map for list", "global:\n  redis:\n    addrs:\n      host: a\n",
			"config.yaml:3: global.redis.addrs: expected a list, got a mapping"},
		{"scalar for list", "global:\n  redis:\n    addrs: \"a:1\"\n",
			`config.yaml:3: global.redis.addrs: expected a list, got string "a:1"`},
		{"int in list", "lock:\n  redlock:\n    addrs:\n      - a:1\n      - 6379\n",
			"config.yaml:5: lock.redlock.addrs[1]: expected a string, got integer 6379"},
		{"map in list", "lock:\n  redlock:\n    addrs:\n      - {host: a}\n",
			"config.yaml:4: lock.redlock.addrs[0]: expected a string, got a mapping"},
		{"list for int", "queue:\n  defaults:\n    max_length: [1]\n",
			"config.yaml:3: queue.defaults.max_length: expected an integer, got a list"},
		{"timestamp for string", "scheduler:\n  timezone: 2024-01-01\n",
			"config.yaml:2: scheduler.timezone: expected a string, got timestamp 2024-01-01"},
		{"top level list", "- global\n",
			"config.yaml:1: the top level must be a mapping of sections (global, lock, ...), got a list"},
		{"top level scalar", "hello\n",
			`config.yaml:1: the top level must be a mapping of sections (global, lock, ...), got string "hello"`},
		{"complex key", "? [a, b]\n: 1\n",
			"config.yaml:1: top level: keys must be plain names, got a list as a key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErrContains(t, tt.src, tt.want)
		})
	}
}

func TestMalformedYAML(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"tab indentation", "global:\n  cache:\n\tmax_size: 5\n", "config.yaml:3: yaml: "},
		{"unclosed double quote", "global:\n  node_id: \"abc\n  service_name: x\n", "config.yaml:2: yaml: "},
		{"unclosed single quote", "ops:\n  enabled: true\n  listen: '127.0.0.1:1\n", "config.yaml:3: yaml: "},
		{"unclosed flow list", "global:\n  redis:\n    addrs: [a:1, b:2\n", "config.yaml:3: yaml: "},
		{"bad indentation", "lock:\n  enabled: true\n   retry: 5\n", "config.yaml:3: yaml: mapping values are not allowed in this context"},
		{"two documents", "lock:\n  retry: 5\n---\nlock:\n  retry: 6\n", "config.yaml:3: the file holds more than one YAML document"},
		{"document after empty document", "lock:\n  retry: 5\n---\n---\nx: 1\n", "config.yaml:4: the file holds more than one YAML document"},
		// yaml.v3 gives 0-based lines for parser (not scanner) errors.
		{"parser error line", "lock:\n  enabled: true\n  retry: {a: 1\n\n\n", "config.yaml:3: yaml: did not find expected ',' or '}'"},
		{"parser error first line", "[a, b\n", "config.yaml:2: yaml: did not find expected ',' or ']'"},
		{"undefined tag handle", "lock:\n  enabled: true\n  retry: !x!y 1\n", "config.yaml:3: yaml: found undefined tag handle"},
		{"control character", "lock:\n  enabled: true\n  retry: 5\x01\n", "config.yaml:3: yaml: control characters are not allowed"},
		{"invalid UTF-8", "lock:\n  enabled: true\n  retry: \xff\n", "config.yaml:3: yaml: invalid leading UTF-8 octet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErrContains(t, tt.src, tt.want)
		})
	}
}

func TestDuplicateKeys(t *testing.T) {
	wantErrContains(t, "global:\n  cache:\n    max_size: 5\n    sync: true\n    max_size: 6\n",
		`config.yaml:5: duplicate key "global.cache.max_size" (already defined at line 3)`)
	wantErrContains(t, "lock:\n  retry: 5\nrank:\n  enabled: true\nlock:\n  retry: 6\n",
		`config.yaml:5: duplicate key "lock" (already defined at line 1)`)
	wantErrContains(t, "ops: {enabled: true, enabled: false}\n",
		`config.yaml:1: duplicate key "ops.enabled" (already defined at line 1)`)
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope", "shield.yaml")
	_, err := Load(missing)
	if err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
	if !strings.Contains(err.Error(), missing) {
		t.Errorf("error %q does not name the path", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(err, fs.ErrNotExist) = false for %v", err)
	}

	t.Setenv(EnvRedisURL, "") // keep the result independent of the environment
	path := filepath.Join(dir, "shield.yaml")
	if err := os.WriteFile(path, []byte("rank:\n  max_members: 50\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Rank.MaxMembers != 50 {
		t.Errorf("max_members = %d, want 50", cfg.Rank.MaxMembers)
	}

	if err := os.WriteFile(path, []byte("rank:\n  max_members: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":2: rank.max_members must be > 0") {
		t.Errorf("Load error = %v, want it prefixed with %s:2:", err, path)
	}
}

func TestGlobalDisabled(t *testing.T) {
	cfg := mustParse(t, "global:\n  enabled: false\n")
	if cfg.Global.Enabled {
		t.Fatal("global.enabled still true")
	}
	want := Default()
	want.Global.Enabled = false
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v", cfg)
	}
}

func TestNullSectionKeepsDefaults(t *testing.T) {
	cfg := mustParse(t, "global:\n  cache:\n  redis:\nlock:\n  redlock:\n    addrs:\n")
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("empty sections changed the defaults: %+v", cfg)
	}
	cfg = mustParse(t, "global:\n  redis:\n    addrs: []\n")
	if cfg.Global.Redis.Addrs != nil {
		t.Errorf("addrs: [] gave %#v, want nil like Default", cfg.Global.Redis.Addrs)
	}
}

func TestSeveralErrorsReportedTogether(t *testing.T) {
	err := parseErr(t, "global:\n  cache:\n    max_size: 0\nlock:\n  retry: 0\nrate_limiter:\n  algorithm: leaky\n")
	msg := err.Error()
	lines := strings.Split(msg, "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 error lines, got %d:\n%s", len(lines), msg)
	}
	for i, prefix := range []string{"config.yaml:3:", "config.yaml:5:", "config.yaml:7:"} {
		if !strings.HasPrefix(lines[i], prefix) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], prefix)
		}
	}
	// Validation errors come in file order, whatever the section order.
	err = parseErr(t, "ops:\n  listen: nope\nglobal:\n  cache:\n    max_size: 0\n")
	if lines := strings.Split(err.Error(), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "config.yaml:2: ops.listen") || !strings.HasPrefix(lines[1], "config.yaml:5: global.cache.max_size") {
		t.Errorf("errors not in file order:\n%v", err)
	}
	// Structural errors are reported without the (then meaningless)
	// validation errors.
	err = parseErr(t, "global:\n  cache:\n    max_size: 0\n    maxsize: 5\n")
	if strings.Contains(err.Error(), "must be > 0") || !strings.Contains(err.Error(), "config.yaml:4: unknown key") {
		t.Errorf("got %v", err)
	}
}

func TestRedisModesAccepted(t *testing.T) {
	for _, src := range []string{
		"global:\n  redis:\n    url: redis://user:pass@localhost:6379/2\n    db: 2\n",
		"global:\n  redis:\n    url: rediss://cache.internal\n",
		"global:\n  redis:\n    url: \"redis://[::1]:6379\"\n",
		"global:\n  redis:\n    addrs: [\"localhost:6379\"]\n    db: 15\n    tls: true\n",
		"global:\n  redis:\n    addrs: [s1:26379, s2:26379, s3:26379]\n    master_name: mymaster\n",
		"global:\n  redis:\n    inherit: true\n",
		"global:\n  redis:\n    url: redis://a:1\n    cluster: true\n",
	} {
		cfg := mustParse(t, src)
		if !cfg.Global.Redis.Configured() {
			t.Errorf("Configured() = false for\n%s", src)
		}
	}
}

func TestURLErrorDoesNotLeakPassword(t *testing.T) {
	err := parseErr(t, "global:\n  redis:\n    url: \"redis://user:hunter2@host:bad port/0\"\n")
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error leaks the password: %v", err)
	}
	if !strings.Contains(err.Error(), "config.yaml:3: global.redis.url") {
		t.Errorf("error %q does not locate the url", err)
	}
}

func TestHelpers(t *testing.T) {
	if got := Millis(1500); got != 1500*time.Millisecond {
		t.Errorf("Millis(1500) = %v", got)
	}
	if got := Seconds(2592000); got != 30*24*time.Hour {
		t.Errorf("Seconds(2592000) = %v", got)
	}
	if got := Millis(1 << 62); got <= 0 {
		t.Errorf("Millis overflowed to %v", got)
	}
	if got := Seconds(-(1 << 62)); got >= 0 {
		t.Errorf("Seconds(-huge) = %v, want saturation at the minimum", got)
	}
	var g Global
	if g.EffectiveServiceName() != "shield" {
		t.Errorf("EffectiveServiceName() = %q", g.EffectiveServiceName())
	}
	g.ServiceName = "battle"
	if g.EffectiveServiceName() != "battle" {
		t.Errorf("EffectiveServiceName() = %q", g.EffectiveServiceName())
	}
	host, _ := os.Hostname()
	if id, err := g.EffectiveNodeID(); err != nil || id != host {
		t.Errorf("EffectiveNodeID() = %q, %v; want host name %q", id, err, host)
	}
	g.NodeID = "n1"
	if id, _ := g.EffectiveNodeID(); id != "n1" {
		t.Errorf("EffectiveNodeID() = %q", id)
	}
	for _, r := range []Redis{{URL: "redis://x"}, {Addrs: []string{"a:1"}}, {Inherit: true}} {
		if !r.Configured() {
			t.Errorf("%+v: Configured() = false", r)
		}
	}
	if (Redis{Prefix: "x", Cluster: true}).Configured() {
		t.Error("Configured() = true without url, addrs or inherit")
	}
}

func TestErrorFormat(t *testing.T) {
	cases := []struct {
		e    Error
		want string
	}{
		{Error{Source: "a.yaml", Line: 3, Msg: "m"}, "a.yaml:3: m"},
		{Error{Source: "a.yaml", Msg: "m"}, "a.yaml: m"},
		{Error{Line: 3, Msg: "m"}, "line 3: m"},
		{Error{Msg: "m"}, "m"},
	}
	for _, c := range cases {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v.Error() = %q, want %q", c.e, got, c.want)
		}
	}
}

// TestKnownKeysFollowGlobalYAML checks that global.yaml lists keys in struct
// order, which is also the order of "known keys" in error messages.
func TestKnownKeysFollowGlobalYAML(t *testing.T) {
	var c Config
	lines, err := decode(&c, globalYAML, "global.yaml")
	if err != nil {
		t.Fatal(err)
	}
	paths := leafPaths(reflect.TypeOf(Config{}), "")
	sorted := append([]string(nil), paths...)
	sort.SliceStable(sorted, func(i, j int) bool { return lines[sorted[i]] < lines[sorted[j]] })
	if !reflect.DeepEqual(paths, sorted) {
		t.Errorf("global.yaml lists keys in a different order than the structs:\n%v\n%v", paths, sorted)
	}
}

func TestRedlockQuorumMustBeAMajority(t *testing.T) {
	src := "lock:\n  redlock:\n    enabled: true\n    quorum: 1\n    addrs: [\"127.0.0.1:1\", \"127.0.0.1:2\", \"127.0.0.1:3\"]\n"
	_, err := Parse([]byte(src), "c.yaml")
	if err == nil || !strings.Contains(err.Error(), "c.yaml:4: lock.redlock.quorum (1) must be a majority of the 3") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Parse([]byte(strings.Replace(src, "quorum: 1", "quorum: 2", 1)), "c.yaml"); err != nil {
		t.Fatalf("quorum 2 of 3: %v", err)
	}
}

func TestRuntimeSection(t *testing.T) {
	cfg, err := Parse([]byte("global:\n  runtime:\n    slow_task: 0\n    shutdown_grace: 250\n"), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Global.Runtime.SlowTask != 0 || cfg.Global.Runtime.ShutdownGrace != 250 {
		t.Fatalf("got %+v", cfg.Global.Runtime)
	}
	wantErrContains(t, "global:\n  runtime:\n    slow_task: -1\n", `config.yaml:3: global.runtime.slow_task must be >= 0, got -1`)
}
