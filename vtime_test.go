package shieldglobal

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/config"
)

// testdata/vtime waits out weeks of virtual time (a daily rank reset at
// 00:00 UTC, a 7-day delay queue, a weekly cron, a lock ttl, a limiter
// refill): it passes in far less wall time, with the same output every run.
func TestSpecVirtualTimeCalendar(t *testing.T) {
	m := newModule(t, config.Default())
	var first string
	for run := range 3 {
		var out bytes.Buffer
		start := time.Now()
		res, err := m.RunSpecs(context.Background(), []string{"testdata/vtime"}, &out, SpecOptions{})
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed > 0 || res.Errors > 0 || res.Passed != 6 {
			t.Fatalf("%d passed, %d failed, %d errors:\n%s", res.Passed, res.Failed, res.Errors, out.String())
		}
		// About 50 virtual days; the bound is generous for a loaded
		// machine (measured: 60-170 ms with -race); what it rules out is
		// waiting in real time.
		t.Logf("run %d: %v wall time", run, took)
		if took > 5*time.Second {
			t.Fatalf("virtual weeks took %v of wall time", took)
		}
		if run == 0 {
			first = out.String()
		} else if out.String() != first {
			t.Fatalf("run %d differs from the first:\n%s\nfirst:\n%s", run, out.String(), first)
		}
	}
}

// SpecOptions.VirtualTime runs files without the marker in virtual time;
// without it shield.test's clock functions say what they need.
func TestSpecVirtualTimeOption(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "week_spec.lua")
	if err := os.WriteFile(path, []byte(`
describe("a week", function()
  it("passes in no time", function()
    local t0 = shield.now_ms()
    shield.test.advance(86400000)
    shield.sleep(7 * 86400000)
    assert.are.equal(t0 + 8 * 86400000, shield.now_ms())
  end)
end)`), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newModule(t, config.Default())
	var out bytes.Buffer
	start := time.Now()
	res, err := m.RunSpecs(context.Background(), []string{path}, &out, SpecOptions{VirtualTime: true})
	if err != nil || res.Passed != 1 || res.Failed != 0 || res.Errors != 0 {
		t.Fatalf("%v %+v:\n%s", err, res, out.String())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("8 virtual days took %v", took)
	}
	// Real time: advance raises instead of sleeping for a day.
	out.Reset()
	res, err = m.RunSpecs(context.Background(), []string{path}, &out, SpecOptions{Timeout: 3 * time.Second})
	// A raised error, not a failed assertion: an error (as busted counts).
	if err != nil || res.Errors != 1 || res.Failed != 0 {
		t.Fatalf("%v %+v:\n%s", err, res, out.String())
	}
	if want := "shield.test.advance needs virtual time"; !strings.Contains(out.String(), want) {
		t.Fatalf("no %q in:\n%s", want, out.String())
	}
}

// Virtual time cannot apply on Redis: the option is refused up front, and
// a file with the marker fails saying why.
func TestSpecVirtualTimeRefusedOnRedis(t *testing.T) {
	m := newModule(t, redisConfig(t))
	var out bytes.Buffer
	if _, err := m.RunSpecs(context.Background(), []string{"testdata/vtime"}, &out, SpecOptions{VirtualTime: true}); !errors.Is(err, ErrVirtualTimeRedis) {
		t.Fatalf("err = %v, want ErrVirtualTimeRedis", err)
	}
	res, err := m.RunSpecs(context.Background(), []string{"testdata/vtime"}, &out, SpecOptions{})
	if err != nil || res.Errors != 1 || res.Passed != 0 {
		t.Fatalf("%v %+v:\n%s", err, res, out.String())
	}
	if !strings.Contains(out.String(), "virtual time needs the memory backend") {
		t.Fatalf("no reason in:\n%s", out.String())
	}
}

// The conformance specs pass in virtual time too: everything they wait for
// (sleeps, timeouts, ttls, firings, refills) follows the virtual clock.
func TestLuaSpecsVirtualTime(t *testing.T) {
	m := newModule(t, config.Default())
	var out bytes.Buffer
	// Consumers hand messages over on their own goroutine, which the
	// virtual clock does not wait for (docs/testing.md): their tests stay
	// on real time.
	res, err := m.RunSpecs(context.Background(), []string{"testdata/lua"}, &out,
		SpecOptions{VirtualTime: true, FilterOut: []string{"consume"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed > 0 || res.Errors > 0 || res.Passed == 0 {
		t.Fatalf("%d passed, %d failed, %d errors:\n%s", res.Passed, res.Failed, res.Errors, out.String())
	}
	t.Logf("%d passed, %d skipped", res.Passed, res.Skipped)
}
