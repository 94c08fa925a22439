package ops

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics is the Prometheus registry of a Module (GET /metrics). Events are
// observed as they happen through the instruments below; state (queue
// lengths, cache size, counters kept by the core packages) is read at scrape
// time through functions registered with Gauge and Counter, so the core
// packages never depend on Prometheus. Names follow Prometheus conventions:
// shield_ prefix, units in names, _total counters (docs/ops.md lists them).
type Metrics struct {
	Registry *prometheus.Registry

	// LockWait observes how long each acquire that had to wait waited.
	LockWait prometheus.Histogram
	// TriggerLateness observes each scheduler firing's start minus its
	// scheduled time.
	TriggerLateness prometheus.Histogram
	// LoopLag observes how long posted work waits before a runtime's loop
	// runs it (probed every 250 ms per runtime).
	LoopLag prometheus.Histogram
	// RedisErrors counts failed Redis operations by the call that made
	// them (shield.global:get, lock watchdog renewal, ...).
	RedisErrors *prometheus.CounterVec
	// TaskErrors counts tasks that ended with an uncaught error.
	TaskErrors prometheus.Counter
}

// NewMetrics returns a registry with the event instruments and the Go
// runtime and process collectors.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		LockWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shield_lock_acquire_wait_seconds", Help: "Time acquires that had to wait waited for the lock.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		TriggerLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shield_scheduler_trigger_lateness_seconds", Help: "Start of each scheduled run minus its scheduled time.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 5, 60},
		}),
		LoopLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shield_loop_lag_seconds", Help: "How long posted work waits for a runtime's loop (probed every 250ms).",
			Buckets: []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5},
		}),
		RedisErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shield_redis_errors_total", Help: "Failed Redis operations, by the call that made them.",
		}, []string{"operation"}),
		TaskErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shield_task_errors_total", Help: "Tasks that ended with an uncaught error.",
		}),
	}
	r.MustRegister(m.LockWait, m.TriggerLateness, m.LoopLag, m.RedisErrors, m.TaskErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Sample is one value of a metric read at scrape time, with its label values.
type Sample struct {
	Labels []string
	Value  float64
}

// Gauge registers a gauge whose samples fn returns at each scrape.
func (m *Metrics) Gauge(name, help string, labels []string, fn func() []Sample) {
	m.Registry.MustRegister(&funcCollector{desc: prometheus.NewDesc(name, help, labels, nil), typ: prometheus.GaugeValue, fn: fn})
}

// Counter registers a counter (a total that only grows, kept by a core
// package) whose samples fn returns at each scrape.
func (m *Metrics) Counter(name, help string, labels []string, fn func() []Sample) {
	m.Registry.MustRegister(&funcCollector{desc: prometheus.NewDesc(name, help, labels, nil), typ: prometheus.CounterValue, fn: fn})
}

// One is a single unlabelled sample.
func One(v float64) []Sample { return []Sample{{Value: v}} }

type funcCollector struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
	mu   sync.Mutex
	fn   func() []Sample
}

func (c *funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *funcCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	samples := c.fn()
	c.mu.Unlock()
	for _, s := range samples {
		ch <- prometheus.MustNewConstMetric(c.desc, c.typ, s.Value, s.Labels...)
	}
}
