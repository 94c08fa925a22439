package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// EnvPrefix starts the name of every environment variable that sets a key:
// SHIELD_ then the key path in upper case with dots as underscores
// (ops.listen is SHIELD_OPS_LISTEN, queue.defaults.max_length is
// SHIELD_QUEUE_DEFAULTS_MAX_LENGTH). See [EnvVars].
const EnvPrefix = "SHIELD_"

// EnvVar is one key settable from the environment.
type EnvVar struct {
	// Name is the variable, e.g. "SHIELD_OPS_LISTEN".
	Name string
	// Path is the dotted key path, e.g. "ops.listen".
	Path string
	// Type is "boolean", "integer", "string" or "list".
	Type string
}

// aliases are the variables kept from before every key had one: each sets
// the same key as its derived name.
var aliases = map[string]string{
	EnvRedisURL: "global.redis.url",
	EnvOpsToken: "ops.token",
}

// EnvVars lists every key of Config with its variable, in struct order. It
// is derived from the struct (yaml tags), so a new key has its variable
// without further work.
func EnvVars() []EnvVar {
	var out []EnvVar
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			p := joinPath(path, yamlName(f))
			v := EnvVar{Name: envName(p), Path: p}
			switch f.Type.Kind() {
			case reflect.Struct:
				walk(f.Type, p)
				continue
			case reflect.Bool:
				v.Type = "boolean"
			case reflect.Int, reflect.Int64:
				v.Type = "integer"
			case reflect.String:
				v.Type = "string"
			case reflect.Slice:
				v.Type = "list"
			default:
				panic("config: unsupported field kind " + f.Type.Kind().String())
			}
			out = append(out, v)
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	return out
}

func envName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// fieldByPath returns the field of c at a dotted key path.
func fieldByPath(c *Config, path string) reflect.Value {
	v := reflect.ValueOf(c).Elem()
	for _, name := range strings.Split(path, ".") {
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if yamlName(t.Field(i)) == name {
				v = v.Field(i)
				break
			}
		}
	}
	return v
}

// applyEnv sets every key whose variable is non-empty (an empty variable
// counts as unset, as a container's "VAR=" usually means). It returns the
// key paths it set, each with the variable that set it (so validation
// errors can name it), and the variables it could not use: values of the
// wrong type, an alias that disagrees with its derived variable, and (when
// environ lists the environment) misspelt SHIELD_<SECTION>_... variables
// (see unknownEnv).
func (c *Config) applyEnv(getenv func(string) string, environ []string) (map[string]string, []error) {
	from := map[string]string{}
	var errs []error
	fail := func(name, path, format string, args ...any) {
		errs = append(errs, &Error{Path: path, Msg: "environment variable " + name + ": " + fmt.Sprintf(format, args...)})
	}
	vars := EnvVars()
	byPath := map[string]EnvVar{}
	for _, ev := range vars {
		byPath[ev.Path] = ev
	}
	// Aliases first, so a derived variable set to the same value agrees.
	aliasNames := make([]string, 0, len(aliases))
	for name := range aliases {
		aliasNames = append(aliasNames, name)
	}
	sort.Strings(aliasNames)
	set := map[string]string{} // path -> raw value applied
	for _, name := range aliasNames {
		if raw := getenv(name); raw != "" {
			p := aliases[name]
			fieldByPath(c, p).SetString(raw)
			from[p], set[p] = name, raw
		}
	}
	for _, ev := range vars {
		raw := getenv(ev.Name)
		if raw == "" {
			continue
		}
		if prev, ok := set[ev.Path]; ok {
			if prev != raw {
				fail(ev.Name, ev.Path, "%s and %s are both set, to different values; set one of them", from[ev.Path], ev.Name)
			}
			continue
		}
		if msg := setFromEnv(fieldByPath(c, ev.Path), raw); msg != "" {
			fail(ev.Name, ev.Path, "%s: %s", ev.Path, msg)
			continue
		}
		from[ev.Path], set[ev.Path] = ev.Name, raw
	}
	errs = append(errs, unknownEnv(environ, vars)...)
	return from, errs
}

// setFromEnv parses raw with the file's rules for v's type and sets v; it
// returns what is wrong with raw, or "".
func setFromEnv(v reflect.Value, raw string) string {
	switch v.Kind() {
	case reflect.Bool:
		// As strict as the file: true or false, nothing else.
		switch raw {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			return fmt.Sprintf("expected a boolean, got %q (use true or false)", raw)
		}
	case reflect.Int, reflect.Int64:
		i, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return fmt.Sprintf("integer %s is out of range", raw)
			}
			return fmt.Sprintf("expected an integer, got %q", raw)
		}
		if v.OverflowInt(i) {
			return fmt.Sprintf("integer %s is out of range", raw)
		}
		v.SetInt(i)
	case reflect.String:
		v.SetString(raw)
	case reflect.Slice:
		// Comma-separated; spaces around entries are dropped.
		var out []string
		for _, s := range strings.Split(raw, ",") {
			if s = strings.TrimSpace(s); s == "" {
				return fmt.Sprintf("empty entry in list %q (write entries separated by commas)", raw)
			}
			out = append(out, s)
		}
		v.Set(reflect.ValueOf(out))
	}
	return ""
}

// unknownEnv reports SHIELD_<SECTION>_... variables of environ that name no
// key but are within two edits of a key's variable: a misspelt key in a
// variable is as much an error as in the file. Variables further from every
// key, and those outside the sections (SHIELD_TEST_REDIS_URL, ...), are not
// ours to judge.
func unknownEnv(environ []string, vars []EnvVar) []error {
	known := map[string]bool{}
	var sections []string
	for name := range aliases {
		known[name] = true
	}
	t := reflect.TypeOf(Config{})
	for i := 0; i < t.NumField(); i++ {
		sections = append(sections, envName(yamlName(t.Field(i)))+"_")
	}
	names := make([]string, 0, len(vars)) // lower case, as suggest compares
	for _, ev := range vars {
		known[ev.Name] = true
		names = append(names, strings.ToLower(ev.Name))
	}
	var errs []error
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		if known[name] || val == "" {
			continue
		}
		for _, s := range sections {
			if !strings.HasPrefix(name, s) {
				continue
			}
			// Only a near miss is ours to reject: other tools have their
			// variables under these prefixes too (SHIELD_SCHEDULER_READY_FD
			// of `shield scheduler start`).
			if sug := suggest(strings.ToLower(name), names); sug != "" {
				errs = append(errs, &Error{Msg: fmt.Sprintf("environment variable %s names no config key; did you mean %s?", name, strings.ToUpper(sug))})
			}
			break
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}
