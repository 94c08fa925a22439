package shieldglobal

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	"github.com/shieldrt/shieldglobal/ops"
)

// journal records what a test table's rows were asked to do.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(e string) {
	j.mu.Lock()
	j.events = append(j.events, e)
	j.mu.Unlock()
}

func (j *journal) take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := j.events
	j.events = nil
	return e
}

// row is a test capability: it records its start, install and close, puts
// shield.<name> = true into every runtime and reports itself in the ops
// report as a queue named <name>.
func row(j *journal, name string, enabled bool, startErr error) capability {
	return capability{name: name,
		enabled: func(*Config) bool { return enabled },
		start: func(m *Module) (part, error) {
			j.add("start " + name)
			return part{
				install: runtime.InstallFunc(func(rt *runtime.Runtime, lib *lua.LTable) {
					j.add("install " + name)
					lib.RawSetString(name, lua.LTrue)
				}),
				stats: func(_ context.Context, s *ops.State) error {
					s.Queues = append(s.Queues, ops.QueueState{Name: name})
					return nil
				},
				close: func() error { j.add("close " + name); return nil },
			}, startErr
		}}
}

// The table drives the Module: New starts the enabled rows in order,
// NewRuntime installs them into shield in order, the ops report reads each
// row's stats, and Close closes every started row once, in reverse order.
func TestCapabilityTableDrivesStartInstallStatsClose(t *testing.T) {
	var j journal
	table := []capability{row(&j, "a", true, nil), row(&j, "b", true, nil), row(&j, "off", false, nil), row(&j, "c", true, nil)}
	m, err := newWithTable(config.Default(), table, WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got, want := j.take(), []string{"start a", "start b", "start c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("New: %q, want %q", got, want)
	}

	rt := newRuntime(t, m)
	if got, want := j.take(), []string{"install a", "install b", "install c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("NewRuntime: %q, want %q", got, want)
	}
	if err := rt.RunString(`assert(shield.a and shield.b and shield.c and shield.off == nil and shield.sleep)`, "check"); err != nil {
		t.Fatal(err)
	}

	s, err := m.opsState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range s.Queues {
		names = append(names, q.Name)
	}
	if want := []string{"a", "b", "c"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("ops report from the rows' stats: %q, want %q", names, want)
	}

	rt.Close(0)
	j.take()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := j.take(), []string{"close c", "close b", "close a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Close (twice): %q, want %q", got, want)
	}
}

// A row that fails to start fails New; what started before it, and its
// own partial part, are closed in reverse order; later rows never start.
func TestCapabilityTableStartFailureClosesWhatStarted(t *testing.T) {
	var j journal
	boom := errors.New("boom")
	table := []capability{row(&j, "a", true, nil), row(&j, "b", true, boom), row(&j, "c", true, nil)}
	_, err := newWithTable(config.Default(), table, WithLogger(quietLog()))
	if !errors.Is(err, boom) {
		t.Fatalf("New: %v, want boom", err)
	}
	if got, want := j.take(), []string{"start a", "start b", "close b", "close a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
}

// With global.enabled false no row starts.
func TestCapabilityTableDisabledModuleStartsNothing(t *testing.T) {
	var j journal
	cfg := config.Default()
	cfg.Global.Enabled = false
	m, err := newWithTable(cfg, []capability{row(&j, "a", true, nil)}, WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if got := j.take(); len(got) != 0 {
		t.Fatalf("%q, want nothing", got)
	}
}

// The real table closes in the order Module.Close documents (and
// docs/architecture.md lists): ops, scheduler, queues, rate limiters, locks,
// global's pub/sub; rank has nothing to close. Start order: global before
// lock (lock wake-ups ride global's internal bus), scheduler before rank
// (periodic resets register with the Engine).
func TestCapabilityTableOrder(t *testing.T) {
	var names []string
	for _, c := range capabilities {
		names = append(names, c.name)
	}
	if got, want := strings.Join(names, " "), "global lock rate_limiter queue scheduler rank ops"; got != want {
		t.Fatalf("table order %q, want %q", got, want)
	}
	// Every row of the real table starts, installs and closes on memory
	// with everything on, and Close runs every part's close once, in
	// reverse order.
	var j journal
	wrapped := make([]capability, len(capabilities))
	for i, c := range capabilities {
		wrapped[i] = capability{name: c.name, enabled: c.enabled, start: func(m *Module) (part, error) {
			p, err := c.start(m)
			if inner := p.close; inner != nil {
				p.close = func() error { j.add(c.name); return inner() }
			}
			return p, err
		}}
	}
	cfg := config.Default()
	cfg.Ops.Enabled = true
	cfg.Ops.Listen = "127.0.0.1:0"
	m, err := newWithTable(cfg, wrapped, WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var started []string
	for _, p := range m.parts {
		started = append(started, p.name)
	}
	if got, want := strings.Join(started, " "), "global lock rate_limiter queue scheduler rank ops"; got != want {
		t.Fatalf("started %q, want %q", got, want)
	}
	L := lua.NewState()
	defer L.Close()
	rt, err := m.NewRuntime(L)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.RunString(`for _, k in ipairs{"global", "mutex", "distributed_mutex", "rank", "queue", "reliable_queue", "rate_limiter", "scheduler"} do assert(shield[k], k) end`, "check"); err != nil {
		t.Fatal(err)
	}
	rt.Close(time.Second)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m.Close()
	if got, want := strings.Join(j.take(), " "), "ops scheduler queue rate_limiter lock global"; got != want {
		t.Fatalf("closed %q, want %q", got, want)
	}
}
