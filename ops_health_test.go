package shieldglobal

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/internal/faultproxy"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// probe GETs url with a client that has no timeout of its own (so only the
// endpoint's deadline can end a hang) and returns the status, the decoded
// body and how long the answer took.
func probe(t *testing.T, url string) (int, map[string]string, time.Duration) {
	t.Helper()
	start := time.Now()
	resp, err := (&http.Client{}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body map[string]string
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("%s: %d %q is not JSON: %v", url, resp.StatusCode, b, err)
	}
	return resp.StatusCode, body, time.Since(start)
}

// GET /healthz and /readyz answer without the token (unless
// ops.health_auth), and /healthz fails while a runtime's loop is wedged.
func TestHealthzAndReadyz(t *testing.T) {
	old := wedgedAfter
	wedgedAfter = 300 * time.Millisecond
	t.Cleanup(func() { wedgedAfter = old })
	for _, b := range []struct {
		name string
		cfg  func(*testing.T) Config
	}{
		{"memory", func(*testing.T) Config { return config.Default() }},
		{"redis", redisConfig},
		{"cluster", clusterConfig},
	} {
		t.Run(b.name, func(t *testing.T) {
			cfg := b.cfg(t)
			cfg.Ops.Enabled, cfg.Ops.Listen, cfg.Ops.Token = true, "127.0.0.1:0", "s3cret"
			m := newModule(t, cfg)
			release := make(chan struct{})
			if err := m.Expose("block_loop", func() { <-release }); err != nil {
				t.Fatal(err)
			}
			rt := newRuntime(t, m)
			base := "http://" + m.OpsAddr()
			for _, path := range []string{"/healthz", "/readyz"} {
				if status, body, _ := probe(t, base+path); status != http.StatusOK || body["status"] != "ok" {
					t.Fatalf("%s without the token: %d %v, want 200 ok", path, status, body)
				}
			}
			// A Go function that does not return wedges the loop.
			go rt.RunString(`block_loop()`, "wedge.lua")
			deadline := time.Now().Add(10 * time.Second)
			var body map[string]string
			for {
				var status int
				status, body, _ = probe(t, base+"/healthz")
				if status == http.StatusServiceUnavailable {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/healthz with a wedged loop: %d %v, want 503", status, body)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if body["status"] != "failing" || !strings.Contains(body["reason"], "1 of 1 runtime loops") {
				t.Fatalf("/healthz body %v", body)
			}
			close(release)
			for {
				status, body, _ := probe(t, base+"/healthz")
				if status == http.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/healthz after the loop came back: %d %v", status, body)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}

	// ops.health_auth puts the probes behind the token.
	cfg := config.Default()
	cfg.Ops.Enabled, cfg.Ops.Listen, cfg.Ops.Token, cfg.Ops.HealthAuth = true, "127.0.0.1:0", "s3cret", true
	m := newModule(t, cfg)
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, body := opsGet(t, "http://"+m.OpsAddr()+path, ""); status != http.StatusUnauthorized {
			t.Errorf("%s with health_auth, no token: %d %q, want 401", path, status, body)
		}
		if status, body := opsGet(t, "http://"+m.OpsAddr()+path, "Bearer s3cret"); status != http.StatusOK {
			t.Errorf("%s with health_auth and the token: %d %q, want 200", path, status, body)
		}
	}
}

// GET /readyz answers 503 with the reason, within its own deadline, when
// Redis does not answer: SIGSTOPped, blackholed, or down. The client sets
// no timeout: the endpoint's own deadline (under 1 s) ends the wait.
func TestReadyzWhenRedisDoesNotAnswer(t *testing.T) {
	srv := testredis.StartServer(t)
	proxy, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	open := func(t *testing.T, addr string) string {
		cfg := config.Default()
		cfg.Global.Redis.URL = "redis://" + addr + "/0"
		cfg.Ops.Enabled, cfg.Ops.Listen = true, "127.0.0.1:0"
		m := newModule(t, cfg) // read_timeout stays 3 s: readyz must not wait for it
		url := "http://" + m.OpsAddr() + "/readyz"
		if status, body, _ := probe(t, url); status != http.StatusOK {
			t.Fatalf("/readyz with Redis up: %d %v", status, body)
		}
		return url
	}
	check := func(t *testing.T, url, reason string) {
		t.Helper()
		status, body, took := probe(t, url)
		// On a loaded machine the answer's deadline (ops.ReadyTimeout) can
		// pass before the check, whose deadline comes 100 ms earlier (the
		// budget's answer margin), has returned: that answer is a 503 too,
		// naming the check instead of Redis.
		late := strings.Contains(body["reason"], "backend check did not finish within")
		if status != http.StatusServiceUnavailable || body["status"] != "failing" || !(strings.Contains(body["reason"], reason) || late) {
			t.Fatalf("/readyz: %d %v, want 503 with %q", status, body, reason)
		}
		// The claim is "no hang": a generous bound a loaded machine meets,
		// well below the 3 s read timeout a plain PING would wait.
		if took > 2500*time.Millisecond {
			t.Fatalf("/readyz took %v", took)
		}
	}

	t.Run("blackhole", func(t *testing.T) {
		url := open(t, proxy.Addr())
		proxy.Blackhole(true)
		defer proxy.Blackhole(false)
		check(t, url, "redis at redis://"+proxy.Addr()+"/0 did not answer in time")
	})
	t.Run("sigstop", func(t *testing.T) {
		url := open(t, srv.Addr)
		thaw := srv.Freeze()
		check(t, url, "redis at redis://"+srv.Addr+"/0 did not answer in time")
		thaw()
		deadline := time.Now().Add(10 * time.Second)
		for {
			status, body, _ := probe(t, url)
			if status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz after SIGCONT: %d %v", status, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("down", func(t *testing.T) {
		url := open(t, srv.Addr)
		srv.Stop()
		check(t, url, "redis at redis://"+srv.Addr+"/0 did not answer in time")
	})
}
