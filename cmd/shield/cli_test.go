package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testlog"
)

// --help, -h and help COMMAND exit 0 and print, on stdout, the command's
// own flags and no other command's.
func TestHelpExitsZeroWithTheCommandsOwnFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		want, not  []string
		wantStderr string
	}{
		{[]string{"--help"}, []string{"usage: shield COMMAND", "shield run ", "shield test ", "shield repl ", "shield version"}, nil, ""},
		{[]string{"-h"}, []string{"usage: shield COMMAND"}, nil, ""},
		{[]string{"help"}, []string{"usage: shield COMMAND"}, nil, ""},
		{[]string{"run", "--help"}, []string{"usage: shield run ", "-e CODE", "-config", "-log-level", "-log-format"}, []string{"-timeout", "-output"}, ""},
		{[]string{"run", "-h"}, []string{"usage: shield run ", "-e CODE"}, []string{"-timeout"}, ""},
		{[]string{"help", "run"}, []string{"usage: shield run ", "-e CODE"}, []string{"-timeout"}, ""},
		{[]string{"test", "--help"}, []string{"usage: shield test ", "-timeout", "-output", "-log-level"}, []string{"-e CODE"}, ""},
		{[]string{"help", "test"}, []string{"usage: shield test ", "-timeout"}, []string{"-e CODE"}, ""},
		{[]string{"repl", "--help"}, []string{"usage: shield repl ", "-config", "-log-level"}, []string{"-timeout", "-e CODE"}, ""},
		{[]string{"help", "version"}, []string{"usage: shield version\n"}, nil, ""},
		{[]string{"help", "help"}, []string{"usage: shield help [COMMAND]"}, nil, ""},
	} {
		r := runShield(t, context.Background(), tc.args...)
		if r.code != 0 || r.stderr != tc.wantStderr {
			t.Errorf("shield %v: exit %d, stderr:\n%s", tc.args, r.code, r.stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("shield %v: stdout lacks %q:\n%s", tc.args, w, r.stdout)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(r.stdout, n) {
				t.Errorf("shield %v: stdout has %q, another command's flag:\n%s", tc.args, n, r.stdout)
			}
		}
	}
}

// Usage errors exit 2 and say what was wrong on stderr.
func TestUsageErrorsExitTwoNamingTheMistake(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: shield COMMAND"},
		{[]string{"bogus"}, `shield: unknown command "bogus"`},
		{[]string{"help", "bogus"}, `shield help: unknown command "bogus"`},
		{[]string{"run", "--bogus"}, "flag provided but not defined: -bogus\nusage: shield run "},
		{[]string{"run"}, "shield run: no script given (a file, - for stdin, or -e CODE)"},
		{[]string{"run", "--log-level", "loud", "-e", ""}, `shield: --log-level: unknown value "loud" (want debug, info, warn or error)`},
		{[]string{"run", "--log-format", "xml", "-e", ""}, `shield: --log-format: unknown value "xml" (want text or json)`},
		{[]string{"version", "x"}, "shield version: takes no arguments"},
		{[]string{"repl", "x"}, `shield repl: unexpected argument "x"`},
	} {
		r := runShield(t, context.Background(), tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("shield %v: exit %d, want 2; stdout %q; stderr lacks %q:\n%s", tc.args, r.code, r.stdout, tc.want, r.stderr)
		}
	}
}

// version and --version print one line: the module version (a test binary
// is built in the checkout: "(devel)") and the Go version and platform.
func TestVersion(t *testing.T) {
	a := runShield(t, context.Background(), "version")
	b := runShield(t, context.Background(), "--version")
	if a.code != 0 || b.code != 0 || a.stdout != b.stdout {
		t.Fatalf("version: exit %d %q; --version: exit %d %q", a.code, a.stdout, b.code, b.stdout)
	}
	if !strings.HasPrefix(a.stdout, "shield (devel) go1.") || strings.Count(a.stdout, "\n") != 1 {
		t.Fatalf("version line %q", a.stdout)
	}
}

func TestVersionLine(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"},
		{Key: "vcs.time", Value: "2026-12-02T01:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	got := versionLine(info, "")
	if want := "shield v0.3.0 (0123456789ab, 2026-12-02T01:00:00Z, modified) go1.26.8 "; !strings.HasPrefix(got, want) {
		t.Fatalf("got %q, want prefix %q", got, want)
	}
	if got := versionLine(info, "v9.9.9"); !strings.HasPrefix(got, "shield v9.9.9 (") {
		t.Fatalf("the link-time version does not win: %q", got)
	}
	pseudo := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261202030432-6eb5a90a1ad1+dirty"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "6eb5a90a1ad1ffffffffffffffffffffffffffff"},
		{Key: "vcs.time", Value: "2026-12-02T03:04:32Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	if got := versionLine(pseudo, ""); !strings.HasPrefix(got, "shield v0.0.0-20261202030432-6eb5a90a1ad1+dirty go1.26.8 ") {
		t.Fatalf("a pseudo-version names the commit; the revision is not repeated: %q", got)
	}
	if got := versionLine(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, ""); !strings.HasPrefix(got, "shield (devel) go1.26.8 ") {
		t.Fatalf("without VCS stamp: %q", got)
	}
}

// -e runs code with the arguments as ..., - runs stdin; errors name the
// chunk as lua does.
func TestRunCodeAndStdin(t *testing.T) {
	r := runShield(t, context.Background(), "run", "-e", "shield.sleep(1); print(select('#', ...), ...)", "a", "b")
	if r.code != 0 || r.stdout != "2\ta\tb\n" {
		t.Fatalf("-e: exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = runShield(t, context.Background(), "run", "-e", "error('bad')")
	if r.code != 1 || !strings.Contains(r.stderr, "(command line):1: bad") {
		t.Fatalf("-e error: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	cmd := exec.Command(shieldBin(t), "run", "-", "x")
	cmd.Stdin = strings.NewReader("local a = ...\nshield.sleep(1)\nprint('from stdin', a)\nerror('late')\n")
	out, err := cmd.Output()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 1 || string(out) != "from stdin\tx\n" || !strings.Contains(string(ee.Stderr), "stdin:4: late") {
		t.Fatalf("stdin: %v, stdout %q, stderr:\n%s", err, out, stderrOf(err))
	}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// --log-level debug shows shield.log.debug; the default (info) does not;
// --log-format json writes JSON lines; global.log in the config does the
// same and the flag overrides it.
func TestLogLevelAndFormat(t *testing.T) {
	code := "shield.log.debug('dbg-line', {n = 1}); shield.log.info('info-line')"
	r := runShield(t, context.Background(), "run", "-e", code)
	if r.code != 0 || strings.Contains(r.stderr, "dbg-line") || !strings.Contains(r.stderr, "level=INFO msg=info-line") {
		t.Fatalf("default: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = runShield(t, context.Background(), "run", "--log-level", "debug", "-e", code)
	if r.code != 0 || !strings.Contains(r.stderr, "level=DEBUG msg=dbg-line n=1") {
		t.Fatalf("--log-level debug: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = runShield(t, context.Background(), "run", "--log-level", "warn", "-e", code)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("--log-level warn: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = runShield(t, context.Background(), "run", "--log-level", "debug", "--log-format", "json", "-e", code)
	if r.code != 0 || !strings.Contains(r.stderr, `"level":"DEBUG","msg":"dbg-line","n":1`) {
		t.Fatalf("--log-format json: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	cfg := writeFile(t, "log.yaml", "global:\n  log:\n    level: debug\n    format: json\n")
	r = runShield(t, context.Background(), "run", "--config", cfg, "-e", code)
	if r.code != 0 || !strings.Contains(r.stderr, `"msg":"dbg-line"`) {
		t.Fatalf("global.log: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = runShield(t, context.Background(), "run", "--config", cfg, "--log-level", "info", "--log-format", "text", "-e", code)
	if r.code != 0 || strings.Contains(r.stderr, "dbg-line") || !strings.Contains(r.stderr, "level=INFO msg=info-line") {
		t.Fatalf("flags over global.log: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// The memory-backend notice: once in shield run, not in shield test unless
// the level is debug.
func TestMemoryNotice(t *testing.T) {
	const notice = "no Redis configured (global.redis), using the in-process memory backend"
	r := runShield(t, context.Background(), "run", "-e", "")
	if r.code != 0 || strings.Count(r.stderr, notice) != 1 {
		t.Fatalf("run: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	spec := writeFile(t, "a_spec.lua", "describe('d', function() it('x', function() end) end)")
	spec2 := writeFile(t, "b_spec.lua", "describe('d', function() it('y', function() end) end)")
	r = runShield(t, context.Background(), "test", spec, spec2)
	if r.code != 0 || strings.Contains(r.stderr+r.stdout, notice) {
		t.Fatalf("test: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = runShield(t, context.Background(), "test", "--log-level", "debug", spec, spec2)
	if r.code != 0 || strings.Count(r.stderr, notice) != 1 {
		t.Fatalf("test --log-level debug: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// math.randomseed(n) makes math.random repeat its sequence, within a
// process and across processes (Go 1.24+ ignores rand.Seed unless the
// binary sets randseednop=0).
func TestRandomSeedReproduces(t *testing.T) {
	code := `local function draw() local t = {} for i = 1, 8 do t[i] = math.random(1, 1000000) end return table.concat(t, ",") end
math.randomseed(42); local a = draw()
math.randomseed(42); local b = draw()
math.randomseed(7); local c = draw()
print(a == b, a ~= c, a)`
	r1 := runShield(t, context.Background(), "run", "-e", code)
	r2 := runShield(t, context.Background(), "run", "-e", code)
	if r1.code != 0 || !strings.HasPrefix(r1.stdout, "true\ttrue\t") || r1.stdout != r2.stdout {
		t.Fatalf("seeded draws differ: %q / %q; stderr:\n%s", r1.stdout, r2.stdout, r1.stderr)
	}
}

// A second signal ends `shield test` at once, also when the test running
// sits in a Go function that does not return (io.read on a pipe that
// stays open). `shield run`: TestASecondSignalStopsAtOnce; the REPL:
// TestReplSecondCtrlCQuits.
func TestTestSecondSignalStopsAtOnce(t *testing.T) {
	spec := writeFile(t, "stuck_spec.lua", `describe("d", function()
	it("reads", function() print("reading"); io.stdout:flush(); io.read() end)
end)`)
	cmd := exec.Command(shieldBin(t), "test", spec)
	stdin, err := cmd.StdinPipe() // kept open: io.read never returns
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var stdout, stderr testlog.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitForText(t, "reading", stdout.String)
	// Two different signals, so that they cannot merge into one while
	// pending.
	cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-exited:
		t.Fatalf("exited on the first signal (%v); it should be stuck in io.read; stderr:\n%s", err, stderr.String())
	default:
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("shield test did not exit on the second signal; stderr:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "shield: stopping now (second signal: ") {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
}

// waitFor polls get until it contains want (20 s: a hang, not a slow machine).
func waitForText(t *testing.T, want string, get func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(get(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", want, get())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A command that reads a subcommand before any flag (its own parsing, not
// newFlags) still answers --help and help COMMAND with exit 0 and the
// table's synopsis on stdout; its complaint about the flag is dropped.
func TestHelpOfACommandWithItsOwnParsing(t *testing.T) {
	saved := commands
	t.Cleanup(func() { commands = saved })
	commands = append(append([]command(nil), saved...), command{"fake", "start|stop", "a command with subcommands",
		func(argv []string, stdout, stderr io.Writer) int {
			fmt.Fprintf(stderr, "shield fake: unknown subcommand %q\n", argv[0])
			return 2
		}})
	for _, args := range [][]string{{"fake", "--help"}, {"fake", "-h"}, {"help", "fake"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 || stdout.String() != "usage: shield fake start|stop\n\na command with subcommands\n" || stderr.Len() != 0 {
			t.Errorf("shield %v: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"fake", "go"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `unknown subcommand "go"`) {
		t.Errorf("shield fake go: exit %d, stderr %q", code, stderr.String())
	}
}
