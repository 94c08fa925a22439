package shieldglobal

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
)

// boundedScenario: 1 000 one-use queues (one push, one pop each, as
// per-player mailboxes are used) and 200 one-shot tasks that ran and left.
const boundedScenario = `
	for i = 1, 1000 do
	  local q = shield.queue("mail:" .. i)
	  q:push("hello")
	  assert(q:pop() == "hello")
	end
	local s = shield.scheduler()
	local ran = 0
	for i = 1, 200 do
	  s:once("oneshot:" .. i, 0, function() ran = ran + 1 end)
	end
	while ran < 200 do shield.sleep(5) end`

// failingScenario: a task that fails every run, a firing that failed with
// its retries to come, a spawned task that raised, and a consumer that
// handled 3 messages.
const failingScenario = `
	local s = shield.scheduler()
	attempts = 0
	s:interval("always_fails", 10, function() attempts = attempts + 1; error("boom") end, { max_retries = 0 })
	while attempts < 3 do shield.sleep(5) end
	s:pause("always_fails")
	while s:get("always_fails"):info().running > 0 do shield.sleep(5) end
	local flaky = 0
	s:once("flaky", 0, function() flaky = 1; error("flaky once") end, { max_retries = 3, retry_delay = 3600000 })
	while flaky == 0 do shield.sleep(5) end
	local spawned = 0
	shield.spawn(function() spawned = 1; error("spawned") end)

	local jobs = shield.queue("jobs")
	local handled = 0
	jobs:consume("w", function() handled = handled + 1 end)
	jobs:push(1); jobs:push(2); jobs:push(3)
	while handled < 3 do shield.sleep(5) end
	shield.sleep(50)
	failed_attempts = attempts + flaky + spawned`

// scrape GETs /metrics and parses it.
func scrape(t *testing.T, base string) (map[string]*dto.MetricFamily, int) {
	t.Helper()
	status, body := opsGet(t, base+"/metrics", "")
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d %s", status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams, len(body)
}

func labelOf(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}

// seriesOf counts the shield_* series (a histogram: its buckets, sum and
// count), the distinct values of label per family, and the series whose
// label starts with prefix.
func seriesOf(fams map[string]*dto.MetricFamily, label, prefix string) (total int, perFamily map[string]int, prefixed int) {
	perFamily = map[string]int{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "shield_") {
			continue
		}
		values := map[string]bool{}
		for _, m := range f.Metric {
			n := 1
			if h := m.Histogram; h != nil {
				n = len(h.Bucket) + 3 // +Inf, sum, count
			}
			total += n
			if v, ok := labelOf(m, label); ok {
				values[v] = true
				if strings.HasPrefix(v, prefix) {
					prefixed += n
				}
			}
		}
		if len(values) > 0 {
			perFamily[name] = len(values)
		}
	}
	return total, perFamily, prefixed
}

// Metric labels stay bounded: 1 000 one-use queues and 200 removed one-shot
// tasks leave at most label_cap names (plus "other") per family, the
// removed tasks leave at once and the idle queues after ops.metrics.
// idle_after; every failed run is counted; the histograms are there.
func TestMetricsStayBounded(t *testing.T) {
	var offset atomic.Int64
	old := metricsNow
	metricsNow = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	t.Cleanup(func() { metricsNow = old })
	for _, b := range []struct {
		name string
		cfg  func(*testing.T) Config
	}{
		{"memory", func(*testing.T) Config { return config.Default() }},
		{"redis", redisConfig},
	} {
		t.Run(b.name, func(t *testing.T) {
			offset.Store(0)
			cfg := b.cfg(t)
			cfg.Ops.Enabled, cfg.Ops.Listen = true, "127.0.0.1:0"
			const capN = 100 // the documented default
			if cfg.Ops.Metrics.LabelCap != capN {
				t.Fatalf("default label_cap %d", cfg.Ops.Metrics.LabelCap)
			}
			m := newModule(t, cfg)
			rt := newRuntime(t, m)
			if err := rt.RunString(boundedScenario, "bounded.lua"); err != nil {
				t.Fatal(err)
			}
			base := "http://" + m.OpsAddr()

			fams, size := scrape(t, base)
			total, queues, mail := seriesOf(fams, "queue", "mail:")
			_, tasks, oneshot := seriesOf(fams, "task", "oneshot:")
			t.Logf("first scrape: %d shield_* series, %d bytes; %d series of mail:* queues", total, size, mail)
			for fam, n := range queues {
				if n > capN+1 {
					t.Errorf("%s has %d queue names, more than the cap %d + other", fam, n, capN)
				}
			}
			if queues["shield_queue_length"] != capN+1 {
				t.Errorf("shield_queue_length has %d queue names, want the cap %d + other", queues["shield_queue_length"], capN)
			}
			for _, mt := range fams["shield_queue_length"].Metric {
				if v, _ := labelOf(mt, "queue"); v == "other" && mt.Gauge.GetValue() != 0 {
					t.Errorf("other queues hold %v messages, want 0", mt.Gauge.GetValue())
				}
			}
			if oneshot != 0 {
				t.Errorf("%d series of one-shot tasks that ran and left", oneshot)
			}
			for fam, n := range tasks {
				if n > capN+1 {
					t.Errorf("%s has %d task names", fam, n)
				}
			}

			// After idle_after (5 min by default) the idle queues leave.
			offset.Store(int64(cfg.Ops.Metrics.IdleAfter)*int64(time.Millisecond) + int64(time.Second))
			fams, size = scrape(t, base)
			total, queues, mail = seriesOf(fams, "queue", "mail:")
			t.Logf("after idle_after: %d shield_* series, %d bytes; %d series of mail:* queues", total, size, mail)
			if mail != 0 {
				t.Errorf("%d series of idle mail:* queues after idle_after", mail)
			}
			if n := queues["shield_queue_length"]; n != 0 {
				t.Errorf("shield_queue_length has %d queue names after idle_after, want none", n)
			}
			// The scrapes dropped the one-shot tasks and the idle queues:
			// their places are free.
			if err := rt.RunString(failingScenario, "failing.lua"); err != nil {
				t.Fatal(err)
			}
			var failedAttempts int
			if err := rt.Do(func(L *lua.LState) error {
				failedAttempts = int(L.GetGlobal("failed_attempts").(lua.LNumber))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			fams, _ = scrape(t, base)
			// Every failed run is counted: the scheduled ones and the spawned one.
			if got := fams["shield_task_errors_total"].Metric[0].Counter.GetValue(); int(got) != failedAttempts || failedAttempts < 5 {
				t.Errorf("shield_task_errors_total = %v after %d failed runs", got, failedAttempts)
			}
			// The histograms.
			hist := func(fam, label, value string) uint64 {
				t.Helper()
				f := fams[fam]
				if f == nil {
					t.Fatalf("no %s", fam)
				}
				for _, mt := range f.Metric {
					if v, _ := labelOf(mt, label); value == "" || v == value {
						return mt.Histogram.GetSampleCount()
					}
				}
				t.Fatalf("no %s{%s=%q}", fam, label, value)
				return 0
			}
			if n := hist("shield_queue_handler_duration_seconds", "queue", "jobs"); n != 3 {
				t.Errorf("handler durations of jobs: %d, want 3", n)
			}
			if n := hist("shield_scheduler_run_duration_seconds", "task", "always_fails"); n < 3 {
				t.Errorf("run durations of always_fails: %d, want >= 3", n)
			}
			if b.name == "redis" {
				if n := hist("shield_redis_roundtrip_seconds", "operation", ""); n == 0 {
					t.Error("no Redis round trip observed")
				}
			}

			// /ops/scheduler: the failing tasks say so, with their counters.
			tasksNow := func() map[string]map[string]any {
				t.Helper()
				status, body := opsGet(t, base+"/ops/scheduler", "")
				var rep struct {
					Tasks []map[string]any `json:"tasks"`
				}
				if status != http.StatusOK || json.Unmarshal([]byte(body), &rep) != nil {
					t.Fatalf("/ops/scheduler: %d %s", status, body)
				}
				byName := map[string]map[string]any{}
				for _, task := range rep.Tasks {
					byName[task["name"].(string)] = task
				}
				return byName
			}
			byName := tasksNow()
			always, flaky := byName["always_fails"], byName["flaky"]
			if always == nil || always["status"] != "paused" || always["failures"].(float64) < 3 ||
				always["last_error"] == nil || !strings.Contains(always["last_error"].(string), "boom") {
				t.Errorf("always_fails (paused): %v", always)
			}
			if flaky == nil || flaky["status"] != "failing" {
				t.Errorf("flaky (failed, its retries to come): %v", flaky)
			}
			if err := rt.RunString(`local s = shield.scheduler()
				s:pause("flaky"); s:resume("always_fails")
				while s:get("always_fails"):info().failed < 5 do shield.sleep(5) end`, "resume.lua"); err != nil {
				t.Fatal(err)
			}
			if always := tasksNow()["always_fails"]; always["status"] != "failing" || always["failures"].(float64) < 5 {
				t.Errorf("always_fails (active, failing every run): %v", always)
			}

		})
	}
}
