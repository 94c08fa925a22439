package shieldglobal

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/shieldrt/shieldglobal/config"
)

// The Lua specs must pass identically on every backend.
func TestLuaSpecs(t *testing.T) {
	backends := map[string]func(t *testing.T) Config{
		"memory":   func(*testing.T) Config { return config.Default() },
		"redis":    redisConfig,
		"cluster":  clusterConfig,
		"sentinel": sentinelConfig,
	}
	for name, cfg := range backends {
		t.Run(name, func(t *testing.T) {
			m := newModule(t, cfg(t))
			var out bytes.Buffer
			res, err := m.RunSpecs(context.Background(), []string{"testdata/lua"}, &out, SpecOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed > 0 || res.Errors > 0 || res.Passed == 0 {
				// The failures first, without the passing lines: CI shows
				// a part of a long log, and the part must hold them.
				t.Fatalf("%d passed, %d failed, %d errors:\n%s\nwhole output:\n%s", res.Passed, res.Failed, res.Errors, withoutPasses(out.String()), out.String())
			}
			t.Logf("%d passed, %d failed, %d skipped", res.Passed, res.Failed, res.Skipped)
		})
	}
}

// withoutPasses drops the "ok - name" lines of a human-format spec report.
func withoutPasses(report string) string {
	var b strings.Builder
	for line := range strings.Lines(report) {
		if !strings.HasPrefix(line, "ok - ") {
			b.WriteString(line)
		}
	}
	return b.String()
}
