package ops

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Other is the label value that stands for every name beyond a family's
// cap (ops.metrics.label_cap): per-player queue names or one-shot task
// names must not grow Prometheus without bound.
const Other = "other"

// labelCap admits up to max distinct names; the first comers keep their
// place until they are forgotten (a removed task, an idle queue).
type labelCap struct {
	mu    sync.Mutex
	max   int
	names map[string]struct{}
}

func newLabelCap(max int) *labelCap {
	return &labelCap{max: max, names: map[string]struct{}{}}
}

// admit returns name when it has (or gets) a place, Other when the cap is
// reached.
func (c *labelCap) admit(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.names[name]; ok {
		return name
	}
	if len(c.names) >= c.max {
		return Other
	}
	c.names[name] = struct{}{}
	return name
}

func (c *labelCap) forget(name string) {
	c.mu.Lock()
	delete(c.names, name)
	c.mu.Unlock()
}

func (c *labelCap) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.names))
	for n := range c.names {
		out = append(out, n)
	}
	return out
}

// queueIdle remembers, per queue, since when it has been idle: empty,
// without a consumer in this process, its facts unchanged.
type queueIdle struct {
	mu   sync.Mutex
	seen map[string]*idleQueue
}

type idleQueue struct {
	facts QueueState
	since time.Time
}

// idle reports whether q holds nothing and has no consumer in this
// process. Consumers (processes seen popping in the last 10 s) is left
// out: a pop of an empty queue changes nothing else, and a one-use queue
// would otherwise count as used for 10 s of the backend's time after its
// last pop.
func idle(q QueueState) bool {
	return q.Length == 0 && q.Pending == 0 && q.Ready == 0 && q.InFlight == 0 && q.Retrying == 0 &&
		q.LocalConsumers == 0 && q.DeadLetters == 0
}

// facts is q without Consumers and the oldest message's age (they change
// by themselves), compared between scrapes to tell whether anything
// happened to an idle queue.
func facts(q QueueState) QueueState {
	q.Consumers = 0
	q.OldestAgeMs = nil
	return q
}

// visibleQueues returns what /metrics shows of qs: queues idle for
// IdleAfter are left out (and lose their place under the cap and their
// handler series); queues beyond the cap are summed per kind under the
// name Other.
func (m *Metrics) visibleQueues(qs []QueueState) []QueueState {
	now := m.opts.Now()
	m.idle.mu.Lock()
	defer m.idle.mu.Unlock()
	listed := make(map[string]bool, len(qs))
	out := make([]QueueState, 0, min(len(qs), m.opts.LabelCap+5))
	others := map[string]*QueueState{}
	for _, q := range qs {
		listed[q.Name] = true
		if !idle(q) {
			delete(m.idle.seen, q.Name)
		} else if e := m.idle.seen[q.Name]; e == nil || e.facts != facts(q) {
			m.idle.seen[q.Name] = &idleQueue{facts: facts(q), since: now}
		} else if now.Sub(e.since) >= m.opts.IdleAfter {
			m.queues.forget(q.Name)
			m.queueHandler.DeletePartialMatch(prometheus.Labels{"queue": q.Name})
			continue
		}
		if m.queues.admit(q.Name) != Other {
			out = append(out, q)
			continue
		}
		o := others[q.Kind]
		if o == nil {
			o = &QueueState{Name: Other, Kind: q.Kind}
			others[q.Kind] = o
		}
		o.add(q)
	}
	for name := range m.idle.seen {
		if !listed[name] {
			delete(m.idle.seen, name)
		}
	}
	kinds := make([]string, 0, len(others))
	for k := range others {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		out = append(out, *others[k])
	}
	return out
}

// add sums q's facts into o (the oldest message's age: the largest).
func (o *QueueState) add(q QueueState) {
	if q.OldestAgeMs != nil && (o.OldestAgeMs == nil || *q.OldestAgeMs > *o.OldestAgeMs) {
		age := *q.OldestAgeMs
		o.OldestAgeMs = &age
	}
	o.Length += q.Length
	o.Pending += q.Pending
	o.Ready += q.Ready
	o.InFlight += q.InFlight
	o.Retrying += q.Retrying
	o.Consumers += q.Consumers
	o.LocalConsumers += q.LocalConsumers
	o.DeadLetters += q.DeadLetters
	o.Expired += q.Expired
	o.Trimmed += q.Trimmed
	o.Reclaimed += q.Reclaimed
	o.Nacked += q.Nacked
	o.DeadLettered += q.DeadLettered
	o.DeadDropped += q.DeadDropped
}
