package shieldglobal

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// opsScenario leaves every capability in a known state: 3 cached reads (2
// hits, 1 miss) of 1 entry; one lock held and one acquire waiting; boards
// "a" (3 members) and "b" (1); a plain queue of 2 messages and 1 consumer,
// a delay queue with 1 pending and 2 ready; a limiter of burst 2 with one
// key that was refused once; a task failed with an uncaught error.
const opsScenario = `
	local g = shield.global()
	g:set("cfg", { v = 1 })
	g:get_cached("cfg"); g:get_cached("cfg"); g:get_cached("cfg")

	local m = shield.distributed_mutex("ops_lock")
	shield.spawn(function() m:acquire(); held = true; shield.sleep(math.huge) end)
	while not held do shield.sleep(1) end
	shield.spawn(function() waiting = true; m:acquire() end)
	while not waiting do shield.sleep(1) end
	shield.sleep(20)

	local a = shield.rank("a"); a:update("u1", 1); a:update("u2", 2); a:update("u3", 3)
	shield.rank("b"):update("u1", 5)

	local busy = shield.queue("ops_busy")
	busy:consume("w", function() started = true; shield.sleep(math.huge) end)
	busy:push(1)
	while not started do shield.sleep(1) end
	busy:push(2); busy:push(3)
	local d = shield.delay_queue("ops_delay")
	d:push("later", 3600000); d:push("now1", 0); d:push("now2", 0)

	local l = shield.rate_limiter("ops_rl", { rate = 1, burst = 2 })
	assert(l:allow("ip")); assert(l:allow("ip")); assert(not l:allow("ip"))

	shield.spawn(function() error("boom") end)
	shield.sleep(10)`

// GET /ops/global over a real HTTP connection, field by field against the
// spec's JSON, and /metrics parsed with the Prometheus text parser, on
// every backend; both refuse a request without the token.
func TestOpsGlobalAndMetrics(t *testing.T) {
	for _, b := range []struct {
		name string
		cfg  func(*testing.T) Config
	}{
		{"memory", func(*testing.T) Config { return config.Default() }},
		{"redis", redisConfig},
		{"cluster", clusterConfig},
		{"sentinel", sentinelConfig},
	} {
		t.Run(b.name, func(t *testing.T) {
			cfg := b.cfg(t)
			cfg.Ops.Enabled, cfg.Ops.Listen, cfg.Ops.Token = true, "127.0.0.1:0", "s3cret"
			m := newModule(t, cfg)
			rt := newRuntime(t, m)
			if err := rt.RunString(opsScenario, "ops.lua"); err != nil {
				t.Fatal(err)
			}
			base := "http://" + m.OpsAddr()
			for _, path := range []string{"/ops/global", "/metrics"} {
				for _, auth := range []string{"", "Bearer wrong", "s3cret"} {
					status, body := opsGet(t, base+path, auth)
					if status != http.StatusUnauthorized || strings.TrimSpace(body) != "unauthorized" {
						t.Fatalf("%s with Authorization %q: %d %q, want 401", path, auth, status, body)
					}
				}
			}

			status, body := opsGet(t, base+"/ops/global", "Bearer s3cret")
			if status != http.StatusOK {
				t.Fatalf("/ops/global: %d %s", status, body)
			}
			checkGlobalReport(t, body)

			status, body = opsGet(t, base+"/metrics", "Bearer s3cret")
			if status != http.StatusOK {
				t.Fatalf("/metrics: %d %s", status, body)
			}
			checkMetrics(t, body)
		})
	}
}

func opsGet(t *testing.T, url, auth string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// checkGlobalReport compares the report with the spec's shape: the same
// fields, no more, with the scenario's values.
func checkGlobalReport(t *testing.T, body string) {
	t.Helper()
	var rep map[string]any
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	fields := func(v any) []string {
		var ks []string
		for k := range v.(map[string]any) {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return ks
	}
	if got := fields(rep); !slices.Equal(got, []string{"data", "locks", "queues", "ranks", "rate_limiter"}) {
		t.Fatalf("top-level fields %v: %s", got, body)
	}
	want := map[string]map[string]float64{
		"data":         {"cache_size": 1, "cache_hit_rate": 2.0 / 3},
		"locks":        {"active": 1, "waiting": 1},
		"ranks":        {"count": 2, "total_members": 4},
		"rate_limiter": {"active": 1, "rejected_today": 1},
	}
	for section, values := range want {
		obj := rep[section].(map[string]any)
		var names []string
		for k := range values {
			names = append(names, k)
		}
		sort.Strings(names)
		if got := fields(obj); !slices.Equal(got, names) {
			t.Fatalf("%s fields %v, want %v", section, got, names)
		}
		for k, v := range values {
			if got, _ := obj[k].(float64); got != v {
				t.Fatalf("%s.%s = %v, want %v: %s", section, k, obj[k], v, body)
			}
		}
	}
	queues := rep["queues"].([]any)
	if len(queues) != 2 {
		t.Fatalf("queues: %s", body)
	}
	busy, delay := queues[0].(map[string]any), queues[1].(map[string]any) // sorted by name
	if got := fields(busy); !slices.Equal(got, []string{"consumers", "length", "name"}) ||
		busy["name"] != "ops_busy" || busy["length"] != 2.0 || busy["consumers"] != 1.0 {
		t.Fatalf("plain queue %v", busy)
	}
	if got := fields(delay); !slices.Equal(got, []string{"name", "pending", "ready"}) ||
		delay["name"] != "ops_delay" || delay["pending"] != 1.0 || delay["ready"] != 2.0 {
		t.Fatalf("delay queue %v", delay)
	}
}

// checkMetrics parses the exposition and checks the scenario's values.
func checkMetrics(t *testing.T, body string) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	value := func(name string, labels ...string) float64 {
		t.Helper()
		f := fams[name]
		if f == nil {
			t.Fatalf("no metric %s", name)
		}
		for _, mt := range f.Metric {
			if matches(mt, labels) {
				switch {
				case mt.Gauge != nil:
					return mt.Gauge.GetValue()
				case mt.Counter != nil:
					return mt.Counter.GetValue()
				case mt.Histogram != nil:
					return float64(mt.Histogram.GetSampleCount())
				}
			}
		}
		t.Fatalf("no sample of %s with labels %v", name, labels)
		return 0
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"shield_cache_entries", nil, 1},
		{"shield_cache_hits_total", nil, 2},
		{"shield_cache_misses_total", nil, 1},
		{"shield_locks_held", nil, 1},
		{"shield_locks_waiting", nil, 1},
		{"shield_lock_holds_lost_total", nil, 0},
		{"shield_rank_boards", nil, 2},
		{"shield_rank_members", nil, 4},
		{"shield_queue_length", []string{"queue", "ops_busy", "kind", "plain"}, 2},
		{"shield_queue_local_consumers", []string{"queue", "ops_busy", "kind", "plain"}, 1},
		{"shield_queue_pending", []string{"queue", "ops_delay", "kind", "delay"}, 1},
		{"shield_queue_ready", []string{"queue", "ops_delay", "kind", "delay"}, 2},
		{"shield_rate_limiter_active_keys", nil, 1},
		{"shield_rate_limiter_decisions_total", []string{"result", "allowed"}, 2},
		{"shield_rate_limiter_decisions_total", []string{"result", "rejected"}, 1},
		{"shield_rate_limiter_rejected_today", nil, 1},
		{"shield_runtimes", nil, 1},
		{"shield_tasks_running", nil, 3}, // the holder, the waiter, the consumer's handler
		{"shield_task_errors_total", nil, 1},
	} {
		if got := value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// ops_busy holds two messages pushed during this test: its oldest has
	// waited some time, not minutes.
	if age := value("shield_queue_oldest_age_seconds", "queue", "ops_busy", "kind", "plain"); age < 0 || age > 120 {
		t.Errorf("shield_queue_oldest_age_seconds{ops_busy} = %v, want between 0 and 120", age)
	}
	// Exposed before anything happened (the vectors by label show up with
	// their first event; TestOpsMetricsObserveEvents checks those).
	for _, name := range []string{"shield_lock_acquire_wait_seconds", "shield_scheduler_trigger_lateness_seconds",
		"shield_loop_lag_seconds", "shield_lock_holds_released_at_task_end_total", "shield_queue_in_flight",
		"shield_queue_dead_letters", "shield_queue_reclaims_total", "shield_queue_expired_total",
		"shield_rate_limiter_degraded_total", "shield_rate_limiter_syncs_total", "go_goroutines", "process_cpu_seconds_total"} {
		if fams[name] == nil {
			t.Errorf("no metric %s", name)
		}
	}
}

func matches(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.Label {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// A lock acquire that waited, scheduler firings, a Lua call whose Redis
// operation failed and the loop-lag probe show in their metrics.
func TestOpsMetricsObserveEvents(t *testing.T) {
	cfg := redisConfig(t)
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	if err := rt.RunString(`
		local mu = shield.mutex("ev")
		local held = false
		shield.spawn(function() mu:acquire(); held = true; shield.sleep(30); mu:release() end)
		while not held do shield.sleep(0) end -- the spawned task starts on a later turn
		mu:acquire(); mu:release()
		local s = shield.scheduler()
		s:interval("tick", 20, function() ticks = (ticks or 0) + 1 end)
		while (ticks or 0) < 2 do shield.sleep(5) end
		s:pause("tick") -- a removed task's series would leave the registry
		local g = shield.global()
		g:set("text", "not a number")
		assert(not pcall(g.incr, g, "text"))
		shield.sleep(300) -- a loop-lag probe (every 250 ms)`, "events.lua"); err != nil {
		t.Fatal(err)
	}
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		got[f.GetName()] = f
	}
	if h := got["shield_lock_acquire_wait_seconds"].Metric[0].Histogram; h.GetSampleCount() != 1 || h.GetSampleSum() < 0.02 {
		t.Fatalf("lock wait: %d samples, sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := got["shield_scheduler_trigger_lateness_seconds"].Metric[0].Histogram; h.GetSampleCount() < 2 {
		t.Fatalf("trigger lateness: %d samples", h.GetSampleCount())
	}
	if f := got["shield_scheduler_runs_total"]; f == nil || f.Metric[0].Counter.GetValue() < 2 {
		t.Fatalf("scheduler runs: %v", f)
	}
	if f := got["shield_redis_errors_total"]; f == nil || f.Metric[0].Counter.GetValue() != 1 ||
		f.Metric[0].Label[0].GetValue() != "shield.global:incr" {
		t.Fatalf("redis errors: %v", f)
	}
	if h := got["shield_loop_lag_seconds"].Metric[0].Histogram; h.GetSampleCount() < 1 {
		t.Fatal("no loop-lag probe in 300 ms")
	}
	if _, ok := got["go_goroutines"]; ok {
		t.Fatal("Gatherer exposes the Go runtime's metrics: a host merging it with its own would see them twice")
	}
}

// With Redis down, /ops/global answers 503 naming the part it could not
// read, and /metrics still serves everything else.
func TestOpsReportsRedisDown(t *testing.T) {
	srv := testredis.StartServer(t)
	cfg := config.Default()
	cfg.Global.Redis.URL = srv.URL()
	cfg.Global.Redis.ReadTimeout, cfg.Global.Redis.DialTimeout = 300, 300
	cfg.Ops.Enabled, cfg.Ops.Listen = true, "127.0.0.1:0"
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	if err := rt.RunString(`shield.rank("down"):update("u", 1); shield.queue("down_q"):push(1)`, "down.lua"); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	base := "http://" + m.OpsAddr()
	status, body := opsGet(t, base+"/ops/global", "")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "ranks:") || !strings.Contains(body, "queues:") {
		t.Fatalf("/ops/global with Redis down: %d %s", status, body)
	}
	status, body = opsGet(t, base+"/metrics", "")
	if status != http.StatusOK || !strings.Contains(body, "shield_locks_held 0") || !strings.Contains(body, "shield_rank_boards 1") {
		t.Fatalf("/metrics with Redis down: %d %s", status, body)
	}
}
