package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfigCheck: `shield config check [FILE]` prints the effective config
// (file, then environment) with secrets masked and the variables named;
// bad values exit 2 naming the variable.
func TestConfigCheck(t *testing.T) {
	file := writeFile(t, "c.yaml", "global:\n  redis:\n    url: redis://app:filepw@127.0.0.1:6390/0\n    password: pw2\nqueue:\n  defaults:\n    max_length: 7\n")
	t.Setenv("SHIELD_QUEUE_DEFAULTS_MAX_LENGTH", "500")
	t.Setenv("SHIELD_OPS_ENABLED", "true")
	t.Setenv("SHIELD_OPS_TOKEN", "t0ken")
	var out, errb bytes.Buffer
	if code := run([]string{"config", "check", file}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{
		"max_length: 500 # from SHIELD_QUEUE_DEFAULTS_MAX_LENGTH",
		"enabled: true # from SHIELD_OPS_ENABLED",
		`token: '***' # from SHIELD_OPS_TOKEN`,
		"url: redis://app:***@127.0.0.1:6390/0\n",
		"password: '***'",
		"label_cap: 100",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	for _, secret := range []string{"filepw", "pw2", "t0ken"} {
		if strings.Contains(s, secret) {
			t.Errorf("output shows the secret %q:\n%s", secret, s)
		}
	}

	// Without a file: the defaults and the environment.
	out.Reset()
	if code := run([]string{"config", "check"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "enabled: true # from SHIELD_OPS_ENABLED") {
		t.Errorf("exit %d: %s%s", code, out.String(), errb.String())
	}

	// A malformed value: exit 2 and the variable named, with or without a file.
	t.Setenv("SHIELD_OPS_ENABLED", "yes")
	for _, args := range [][]string{{"config", "check"}, {"config", "check", file}} {
		out.Reset()
		errb.Reset()
		code := run(args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), `environment variable SHIELD_OPS_ENABLED: ops.enabled: expected a boolean, got "yes"`) {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
	if code := run([]string{"config"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("shield config: exit %d, want 2", code)
	}
}

// TestEnvOpensTheOpsEndpoint: with no config file, SHIELD_OPS_ENABLED and
// SHIELD_OPS_LISTEN are enough for `shield run` to serve /metrics.
func TestEnvOpensTheOpsEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	flag := filepath.Join(t.TempDir(), "done")
	script := writeFile(t, "wait.lua", fmt.Sprintf(`
local deadline = shield.now_ms() + 20000
while shield.now_ms() < deadline do
  local f = io.open(%q)
  if f then f:close() return end
  shield.sleep(20)
end
error("the test never said done")
`, flag))
	t.Setenv("SHIELD_OPS_ENABLED", "true")
	t.Setenv("SHIELD_OPS_LISTEN", addr)
	done := make(chan int, 1)
	var errb bytes.Buffer
	go func() { done <- run([]string{"run", script}, io.Discard, &errb) }()
	var body string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		// The endpoint opens in New, before the script's runtime exists:
		// scrape until it is counted.
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if strings.Contains(body, "shield_runtimes 1") {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	os.WriteFile(flag, nil, 0o644)
	if code := <-done; code != 0 {
		t.Fatalf("shield run: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(body, "shield_runtimes 1") {
		t.Fatalf("GET /metrics on %s (from SHIELD_OPS_LISTEN): %q", addr, body)
	}
}
