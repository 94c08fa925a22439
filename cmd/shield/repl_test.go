package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/shieldrt/shieldglobal/internal/testlog"
	lua "github.com/yuin/gopher-lua"
)

// replSession is `shield repl` on a pseudo-terminal: what it prints, and
// keys sent as a user types them.
type replSession struct {
	t      *testing.T
	cmd    *exec.Cmd
	tty    *os.File
	home   string // HOME, with the history file
	out    testlog.Buffer
	seen   int // output before this offset has been matched already
	exited chan error
}

func startRepl(t *testing.T, args ...string) *replSession {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(shieldBin(t), append([]string{"repl"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "SHIELD_HISTORY="+filepath.Join(home, "history"), "TERM=xterm")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	s := &replSession{t: t, cmd: cmd, tty: tty, home: home, exited: make(chan error, 1)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		tty.Close()
	})
	go io.Copy(&s.out, tty) // ends with an error when the process has gone
	go func() { s.exited <- cmd.Wait() }()
	s.expect("Ctrl-D quits")
	s.expect("> ")
	return s
}

// expect waits until the output after the last match contains want.
func (s *replSession) expect(want string) {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := s.out.String()
		if i := strings.Index(out[s.seen:], want); i >= 0 {
			s.seen += i + len(want)
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the REPL did not print %q; after the last match it printed:\n%q", want, out[s.seen:])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// expectAny waits until the output after the last match contains one of
// wants, and returns the one that comes first.
func (s *replSession) expectAny(wants ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := s.out.String()[s.seen:]
		first, at := "", -1
		for _, w := range wants {
			if i := strings.Index(out, w); i >= 0 && (at < 0 || i < at) {
				first, at = w, i
			}
		}
		if at >= 0 {
			s.seen += at + len(first)
			return first
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the REPL printed none of %q; after the last match it printed:\n%q", wants, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// enter types a line and Enter.
func (s *replSession) enter(line string) {
	s.t.Helper()
	if _, err := s.tty.Write([]byte(line + "\r")); err != nil {
		s.t.Fatal(err)
	}
}

func (s *replSession) key(k string) {
	s.t.Helper()
	if _, err := s.tty.Write([]byte(k)); err != nil {
		s.t.Fatal(err)
	}
}

func (s *replSession) wait() int {
	s.t.Helper()
	select {
	case <-s.exited:
		return s.cmd.ProcessState.ExitCode()
	case <-time.After(20 * time.Second):
		s.t.Fatalf("the REPL did not exit; it printed:\n%s", s.out.String())
		return -1
	}
}

// The REPL through a pseudo-terminal: expressions and =expr print their
// values (tables expanded), statements print nothing, an incomplete chunk
// continues at the >> prompt, blocking calls work, errors are printed and
// the session goes on, Ctrl-C interrupts a running entry, the history is
// kept, Ctrl-D quits with status 0. Each expected output appears only in
// the result, not in the echoed input.
func TestReplThroughAPty(t *testing.T) {
	s := startRepl(t)
	s.enter("=6*7")
	s.expect("42\r\n")
	s.enter(`{n = 6*7, list = {"x" .. "y", true}, [3] = 0.5, ["a b"] = {}}`)
	s.expect(`{[3] = 0.5, ["a b"] = {}, list = {"xy", true}, n = 42}` + "\r\n")
	s.enter("x = 10 * 10")
	s.enter("x + 1")
	s.expect("101\r\n")
	s.enter("for i = 1, 2 do")
	s.expect(">> ")
	s.enter(`io.write("r", i * 10, ";")`)
	s.expect(">> ")
	s.enter("end")
	s.expect("r10;r20;")
	s.enter(`shield.sleep(20); return "wo" .. "ke", 1 + 1`)
	s.expect("woke\t2\r\n")
	s.enter(`shield.global():set("k", {hp = 50 * 2}); return shield.global():get("k")`)
	s.expect("{hp = 100}\r\n")
	s.enter(`error("b" .. "oom")`)
	s.expect("stdin:1: boom")
	s.expect("> ")
	// the marker says the entry runs (readline no longer reads the keys: a
	// Ctrl-C before that would only clear the line); the concatenation keeps
	// the echoed input from matching it
	s.enter(`print("spin" .. "ning"); while true do end`)
	s.expect("spinning")
	s.key("\x03")
	s.expect("interrupted")
	s.enter("=2^10")
	s.expect("1024\r\n")
	s.key("\x04") // Ctrl-D
	if code := s.wait(); code != 0 {
		t.Fatalf("exit %d after Ctrl-D; output:\n%s", code, s.out.String())
	}
	hist, err := os.ReadFile(filepath.Join(s.home, "history"))
	if err != nil || !strings.Contains(string(hist), "=6*7\n") || !strings.Contains(string(hist), "=2^10\n") {
		t.Fatalf("history %q: %v", hist, err)
	}
}

// An entry stuck in a Go function that does not return (io.read) cannot be
// interrupted: the REPL says so, and a second Ctrl-C ends it at once.
func TestReplSecondCtrlCQuits(t *testing.T) {
	s := startRepl(t)
	// The marker says the entry runs (before it, readline would take the
	// Ctrl-C). A Ctrl-C in the instant between print and io.read interrupts
	// the entry in Lua: then the entry is tried again. An entry inside
	// io.read never prints "interrupted", so a REPL that stopped saying
	// "Ctrl-C again quits" fails every try.
	for try := 1; ; try++ {
		s.enter(`print("read" .. "ing"); io.read()`)
		s.expect("reading")
		s.key("\x03")
		if s.expectAny("Ctrl-C again quits", "interrupted") == "Ctrl-C again quits" { // the first SIGINT was handled
			break
		}
		if try == 3 {
			t.Fatalf("three Ctrl-C came before io.read started; output:\n%s", s.out.String())
		}
		s.expect("> ")
	}
	s.key("\x03")
	s.expect("shield: stopping now (second signal: interrupt)")
	if code := s.wait(); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
}

// Values print as Lua constructors: keys sorted, the sequence part first, a
// wide table one field per line, a table inside itself as <cycle>.
func TestReplFormat(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	if err := L.DoString(`
		cyc = {name = "c"}; cyc.self = cyc
		wide = {}
		for i = 1, 12 do wide["key" .. string.format("%02d", i)] = i * 1000 end
		nested = {list = {1, 2, {deep = true}}, ["not-ident"] = "v", ["end"] = 1, [false] = 0}`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ expr, want string }{
		{"cyc", `{name = "c", self = <cycle>}`},
		{"nested", `{[false] = 0, ["end"] = 1, list = {1, 2, {deep = true}}, ["not-ident"] = "v"}`},
		{"'top-level string'", "top-level string"},
		{"{}", "{}"},
		{"wide", "{\n  key01 = 1000,\n  key02 = 2000,\n  key03 = 3000,\n  key04 = 4000,\n  key05 = 5000,\n  key06 = 6000,\n" +
			"  key07 = 7000,\n  key08 = 8000,\n  key09 = 9000,\n  key10 = 10000,\n  key11 = 11000,\n  key12 = 12000\n}"},
	} {
		if err := L.DoString("v = " + tc.expr); err != nil {
			t.Fatal(err)
		}
		if got := formatTop(L.GetGlobal("v")); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.expr, got, tc.want)
		}
	}
}

// SIGTERM at the prompt ends the session cleanly (status 0).
func TestReplStopsOnSIGTERM(t *testing.T) {
	s := startRepl(t)
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code := s.wait(); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, s.out.String())
	}
}
