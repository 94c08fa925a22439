package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// yamlLeaves lists the dotted paths of the leaf keys of a YAML mapping.
func yamlLeaves(t *testing.T, n *yaml.Node, path string, out *[]string) {
	t.Helper()
	if n.Kind == yaml.DocumentNode {
		yamlLeaves(t, n.Content[0], path, out)
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		p := joinPath(path, n.Content[i].Value)
		if v := n.Content[i+1]; v.Kind == yaml.MappingNode {
			yamlLeaves(t, v, p, out)
		} else {
			*out = append(*out, p)
		}
	}
}

// TestEveryKeyHasAVariable: the variables are derived from the struct, one
// per key of the documented default file, with no two alike; each sets
// exactly what the same value written in a file sets.
func TestEveryKeyHasAVariable(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal(globalYAML, &doc); err != nil {
		t.Fatal(err)
	}
	var keys []string
	yamlLeaves(t, &doc, "", &keys)
	vars := EnvVars()
	paths := map[string]bool{}
	names := map[string]string{}
	for _, ev := range vars {
		paths[ev.Path] = true
		if other, dup := names[ev.Name]; dup {
			t.Errorf("%s names both %s and %s", ev.Name, other, ev.Path)
		}
		names[ev.Name] = ev.Path
		if want := "SHIELD_" + strings.ToUpper(strings.ReplaceAll(ev.Path, ".", "_")); ev.Name != want {
			t.Errorf("%s: variable %s, want %s", ev.Path, ev.Name, want)
		}
	}
	for _, k := range keys {
		if !paths[k] {
			t.Errorf("key %s of global.yaml has no variable", k)
		}
	}
	if len(vars) != len(keys) {
		t.Errorf("%d variables for %d keys of global.yaml", len(vars), len(keys))
	}
	for _, want := range []string{"SHIELD_OPS_ENABLED", "SHIELD_OPS_LISTEN", "SHIELD_QUEUE_DEFAULTS_MAX_LENGTH",
		"SHIELD_GLOBAL_REDIS_URL", "SHIELD_RATE_LIMITER_ALGORITHM", "SHIELD_LOCK_REDLOCK_ADDRS"} {
		if _, ok := names[want]; !ok {
			t.Errorf("no variable %s", want)
		}
	}

	def := Default()
	for _, ev := range vars {
		// A value unlike the default, written once as a variable and once
		// in a file.
		field := fieldByPath(&def, ev.Path)
		var raw, yamlVal string
		switch ev.Type {
		case "boolean":
			raw = fmt.Sprint(!field.Bool())
			yamlVal = raw
		case "integer":
			raw = fmt.Sprint(field.Int() + 7)
			yamlVal = raw
		case "string":
			raw = "v-" + ev.Name
			yamlVal = fmt.Sprintf("%q", raw)
		case "list":
			raw = "h1:1, h2:2"
			yamlVal = `["h1:1", "h2:2"]`
		default:
			t.Fatalf("%s: type %q", ev.Name, ev.Type)
		}
		fromEnv := Default()
		if err := fromEnv.ApplyEnv(func(k string) string {
			if k == ev.Name {
				return raw
			}
			return ""
		}); err != nil {
			t.Errorf("%s=%s: %v", ev.Name, raw, err)
			continue
		}
		parts := strings.Split(ev.Path, ".")
		var b strings.Builder
		for i, p := range parts {
			b.WriteString(strings.Repeat("  ", i) + p + ":")
			if i == len(parts)-1 {
				b.WriteString(" " + yamlVal)
			}
			b.WriteString("\n")
		}
		fromFile := Default()
		if _, err := decode(&fromFile, []byte(b.String()), "f.yaml"); err != nil {
			t.Fatalf("%s: %v", b.String(), err)
		}
		if reflect.DeepEqual(fromEnv, def) {
			t.Errorf("%s=%s changed nothing", ev.Name, raw)
		}
		if !reflect.DeepEqual(fromEnv, fromFile) {
			t.Errorf("%s=%s does not set what %s: %s sets", ev.Name, raw, ev.Path, yamlVal)
		}
	}
}

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func environOf(kv ...string) []string {
	var out []string
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, kv[i]+"="+kv[i+1])
	}
	return out
}

// TestEnvSettings: the variables of the issue, over a file.
func TestEnvSettings(t *testing.T) {
	kv := []string{"SHIELD_OPS_ENABLED", "true", "SHIELD_OPS_LISTEN", "0.0.0.0:9190",
		"SHIELD_QUEUE_DEFAULTS_MAX_LENGTH", "500", "SHIELD_GLOBAL_REDIS_ADDRS", "10.0.0.1:7000,10.0.0.2:7000",
		"SHIELD_GLOBAL_REDIS_CLUSTER", "true", "SHIELD_TEST_REDIS_URL", "ignored",
		"SHIELD_SCHEDULER_READY_FD", "3"} // another tool's, far from every key
	cfg, err := parseEnv([]byte("ops:\n  listen: 127.0.0.1:1\nqueue:\n  defaults:\n    max_length: 7\n"), "c.yaml", envOf(kv...), environOf(kv...))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Ops.Enabled || cfg.Ops.Listen != "0.0.0.0:9190" || cfg.Queue.Defaults.MaxLength != 500 ||
		!cfg.Global.Redis.Cluster || !reflect.DeepEqual(cfg.Global.Redis.Addrs, []string{"10.0.0.1:7000", "10.0.0.2:7000"}) {
		t.Errorf("cfg = %+v", cfg)
	}

	// The real environment, without a file.
	t.Setenv("SHIELD_OPS_ENABLED", "true")
	t.Setenv("SHIELD_OPS_LISTEN", "0.0.0.0:9190")
	cfg, err = FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Ops.Enabled || cfg.Ops.Listen != "0.0.0.0:9190" {
		t.Errorf("FromEnv: ops = %+v", cfg.Ops)
	}
}

// TestEnvErrorsNameTheVariable: malformed values, impossible values and
// misspelt variables are errors that name the variable.
func TestEnvErrorsNameTheVariable(t *testing.T) {
	cases := []struct {
		kv   []string
		want []string
	}{
		{[]string{"SHIELD_OPS_ENABLED", "yes"}, []string{"c.yaml: environment variable SHIELD_OPS_ENABLED: ops.enabled: expected a boolean, got \"yes\" (use true or false)"}},
		{[]string{"SHIELD_OPS_ENABLED", "1"}, []string{"SHIELD_OPS_ENABLED: ops.enabled: expected a boolean"}},
		{[]string{"SHIELD_QUEUE_DEFAULTS_MAX_LENGTH", "1.5"}, []string{"environment variable SHIELD_QUEUE_DEFAULTS_MAX_LENGTH: queue.defaults.max_length: expected an integer, got \"1.5\""}},
		{[]string{"SHIELD_GLOBAL_CACHE_DEFAULT_TTL", "1m"}, []string{"SHIELD_GLOBAL_CACHE_DEFAULT_TTL: global.cache.default_ttl: expected an integer, got \"1m\""}},
		{[]string{"SHIELD_GLOBAL_REDIS_DB", "99999999999999999999"}, []string{"SHIELD_GLOBAL_REDIS_DB: global.redis.db: integer 99999999999999999999 is out of range"}},
		{[]string{"SHIELD_LOCK_REDLOCK_ADDRS", "a:1,,b:2"}, []string{"SHIELD_LOCK_REDLOCK_ADDRS: lock.redlock.addrs: empty entry"}},
		{[]string{"SHIELD_QUEUE_DEFAULTS_MAX_LENGTH", "0"}, []string{"c.yaml: queue.defaults.max_length must be > 0, got 0 (set by environment variable SHIELD_QUEUE_DEFAULTS_MAX_LENGTH)"}},
		{[]string{"SHIELD_OPS_LISTEN", "nowhere"}, []string{"ops.listen: \"nowhere\"", "(set by environment variable SHIELD_OPS_LISTEN)"}},
		{[]string{"SHIELD_RATE_LIMITER_ALGORITHM", "leaky"}, []string{"rate_limiter.algorithm: unknown value \"leaky\"", "(set by environment variable SHIELD_RATE_LIMITER_ALGORITHM)"}},
		{[]string{"SHIELD_OPS_ENABLD", "true"}, []string{"c.yaml: environment variable SHIELD_OPS_ENABLD names no config key; did you mean SHIELD_OPS_ENABLED?"}},
		{[]string{"SHIELD_REDIS_URL", "redis://a:1", "SHIELD_GLOBAL_REDIS_URL", "redis://b:1"}, []string{"SHIELD_GLOBAL_REDIS_URL: SHIELD_REDIS_URL and SHIELD_GLOBAL_REDIS_URL are both set, to different values"}},
		{[]string{"SHIELD_GLOBAL_REDIS_URL", "http://u:s3cret@h:1"}, []string{"global.redis.url: unsupported scheme \"http\"", "(set by environment variable SHIELD_GLOBAL_REDIS_URL)"}},
	}
	for _, c := range cases {
		_, err := parseEnv([]byte("ops:\n  enabled: false\n"), "c.yaml", envOf(c.kv...), environOf(c.kv...))
		if err == nil {
			t.Errorf("%v: no error", c.kv)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q\nlacks %q", c.kv, err, w)
			}
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: error %q leaks the password", c.kv, err)
		}
	}

	// The aliases still work, alone or agreeing with their derived name.
	kv := []string{"SHIELD_REDIS_URL", "redis://a:1", "SHIELD_GLOBAL_REDIS_URL", "redis://a:1", "SHIELD_OPS_TOKEN", "tok"}
	cfg, err := parseEnv(nil, "", envOf(kv...), environOf(kv...))
	if err != nil || cfg.Global.Redis.URL != "redis://a:1" || cfg.Ops.Token != "tok" {
		t.Errorf("aliases: %+v, %v", cfg.Global.Redis, err)
	}
}
