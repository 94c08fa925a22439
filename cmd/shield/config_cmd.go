package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/shieldrt/shieldglobal/config"
)

// cmdConfig is `shield config check [FILE]`: it loads FILE (or, without
// one, the defaults) with the environment applied, validates it exactly as
// `shield run` would, and prints the effective configuration as YAML with
// secrets masked and each key set from the environment marked with its
// variable. Exit status: 0 valid, 2 invalid (the problems go to stderr).
func cmdConfig(argv []string, stdout, stderr io.Writer) int {
	if len(argv) == 0 || argv[0] != "check" || len(argv) > 2 {
		fmt.Fprint(stderr, "usage: shield config check [FILE]\n")
		return 2
	}
	path := ""
	if len(argv) == 2 {
		path = argv[1]
	}
	cfg, err := loadConfig(path)
	if err != nil {
		fmt.Fprintf(stderr, "shield: %v\n", err)
		return 2
	}
	out, err := effectiveYAML(cfg, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "shield: %v\n", err)
		return 1
	}
	source := path
	if source == "" {
		source = "defaults"
	}
	fmt.Fprintf(stdout, "# effective configuration (%s + environment): valid\n%s", source, out)
	return 0
}

// masked replaces a secret that is set.
const masked = "***"

// effectiveYAML renders cfg with its secrets masked (passwords, the ops
// token, the password part of Redis URLs) and a comment on each key a
// non-empty environment variable set.
func effectiveYAML(cfg config.Config, getenv func(string) string) (string, error) {
	r := &cfg.Global.Redis
	r.URL = maskURL(r.URL)
	if r.Password != "" {
		r.Password = masked
	}
	for i, a := range cfg.Lock.Redlock.Addrs {
		cfg.Lock.Redlock.Addrs[i] = maskURL(a)
	}
	if cfg.Ops.Token != "" {
		cfg.Ops.Token = masked
	}
	fromEnv := map[string]string{}
	for _, ev := range config.EnvVars() {
		if getenv(ev.Name) != "" {
			fromEnv[ev.Path] = ev.Name
		}
	}
	for name, path := range map[string]string{config.EnvRedisURL: "global.redis.url", config.EnvOpsToken: "ops.token"} {
		if getenv(name) != "" {
			fromEnv[path] = name
		}
	}
	var doc yaml.Node
	if err := doc.Encode(cfg); err != nil {
		return "", err
	}
	annotate(&doc, "", fromEnv)
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return "", err
	}
	return b.String(), enc.Close()
}

// annotate comments the keys of n that the environment set.
func annotate(n *yaml.Node, path string, fromEnv map[string]string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := k.Value
		if path != "" {
			p = path + "." + k.Value
		}
		if v.Kind == yaml.MappingNode {
			annotate(v, p, fromEnv)
		} else if name, ok := fromEnv[p]; ok {
			k.LineComment = "from " + name
		}
	}
}

// maskURL hides the password of a redis:// URL (a host:port is returned
// as it is).
func maskURL(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		// Unparseable: hide everything before the host.
		if at, scheme := strings.LastIndex(s, "@"), strings.Index(s, "://"); scheme >= 0 && at > scheme {
			return s[:scheme+3] + masked + s[at:]
		}
		return masked
	}
	if _, ok := u.User.Password(); !ok {
		return s
	}
	u.User = url.UserPassword(u.User.Username(), masked)
	// url escapes the asterisks of the userinfo; show them as written.
	return strings.Replace(u.String(), ":%2A%2A%2A@", ":"+masked+"@", 1)
}
