//go:build faults

package faults

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// shieldBin is the shield binary TestMain builds once.
var shieldBin string

// buildShield builds cmd/shield into dir.
func buildShield(dir string) (string, error) {
	bin := filepath.Join(dir, "shield")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/shieldrt/shieldglobal/cmd/shield")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/shield: %v\n%s", err, out)
	}
	return bin, nil
}

// Config is what a shield process is pointed at.
type Config struct {
	URL          string   // standalone redis://
	Addrs        []string // cluster seeds or Sentinels
	Cluster      bool
	MasterName   string
	Prefix       string
	WaitReplicas int // global.redis.wait_replicas (0: not written)
	Timeouts     time.Duration
	Extra        string // further YAML sections, written as given
}

// yaml renders the config file.
func (c Config) yaml() string {
	var b strings.Builder
	b.WriteString("global:\n  redis:\n")
	if c.URL != "" {
		fmt.Fprintf(&b, "    url: %q\n", c.URL)
	}
	if len(c.Addrs) > 0 {
		fmt.Fprintf(&b, "    addrs: [%s]\n", strings.Join(quoteAll(c.Addrs), ", "))
	}
	if c.Cluster {
		b.WriteString("    cluster: true\n")
	}
	if c.MasterName != "" {
		fmt.Fprintf(&b, "    master_name: %q\n", c.MasterName)
	}
	fmt.Fprintf(&b, "    prefix: %q\n", c.Prefix)
	if c.Timeouts > 0 {
		ms := c.Timeouts.Milliseconds()
		fmt.Fprintf(&b, "    dial_timeout: %d\n    read_timeout: %d\n    write_timeout: %d\n", ms, ms, ms)
	}
	if c.WaitReplicas > 0 {
		// wait_timeout must stay below read_timeout (the WAIT holds the
		// connection): half of it.
		readMs := int64(3000) // read_timeout's default
		if c.Timeouts > 0 {
			readMs = c.Timeouts.Milliseconds()
		}
		fmt.Fprintf(&b, "    wait_replicas: %d\n    wait_timeout: %d\n", c.WaitReplicas, max(readMs/2, 1))
	}
	b.WriteString("  runtime:\n    shutdown_grace: 2000\n")
	b.WriteString(c.Extra)
	return b.String()
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return q
}

// Write writes the config file into a temp dir and returns its path.
func (c Config) Write(t testing.TB) string {
	p := filepath.Join(t.TempDir(), "shield.yaml")
	if err := os.WriteFile(p, []byte(c.yaml()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Line is one stdout line of a shield process, split into fields, with the
// time the harness read it.
type Line struct {
	At     time.Time
	Fields []string
}

// Proc is a running `shield run` process.
type Proc struct {
	Name string
	cmd  *exec.Cmd

	mu     sync.Mutex
	lines  []Line
	stderr bytes.Buffer
	exited chan struct{}
	err    error
	endAt  time.Time
}

// StartShield runs `shield run --config cfg testdata/<script> args...` in a
// process group of its own; it is SIGKILLed at the test's end if still
// running.
func StartShield(t testing.TB, name, cfg, script string, args ...string) *Proc {
	t.Helper()
	argv := append([]string{"run", "--config", cfg, filepath.Join("testdata", script)}, args...)
	cmd := exec.Command(shieldBin, argv...)
	groupCmd(cmd)
	p := &Proc{Name: name, cmd: cmd, exited: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("faults: start shield: %v", err)
	}
	read := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := Line{At: time.Now(), Fields: strings.Fields(sc.Text())}
			p.mu.Lock()
			p.lines = append(p.lines, l)
			p.mu.Unlock()
		}
		close(read)
	}()
	go func() {
		<-read
		err := cmd.Wait()
		p.mu.Lock()
		p.err, p.endAt = err, time.Now()
		p.mu.Unlock()
		close(p.exited)
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		p.save(t)
	})
	return p
}

// save writes the process's output to $FAULTS_OUT/<test>/<name>.out and
// .err when FAULTS_OUT is set (for reading a failure afterwards).
func (p *Proc) save(t testing.TB) {
	dir := os.Getenv("FAULTS_OUT")
	if dir == "" {
		return
	}
	dir = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	os.MkdirAll(dir, 0o755)
	p.mu.Lock()
	defer p.mu.Unlock()
	var out strings.Builder
	for _, l := range p.lines {
		fmt.Fprintf(&out, "%d %s\n", l.At.UnixMilli(), strings.Join(l.Fields, " "))
	}
	os.WriteFile(filepath.Join(dir, p.Name+".out"), []byte(out.String()), 0o644)
	os.WriteFile(filepath.Join(dir, p.Name+".err"), p.stderr.Bytes(), 0o644)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// Signal sends sig to the process (not its group: a shield process has no
// children).
func (p *Proc) Signal(sig syscall.Signal) { p.cmd.Process.Signal(sig) }

// Wait waits up to d for the process to end; false when it did not (it
// hangs).
func (p *Proc) Wait(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// Stop sends SIGTERM and waits up to d; it reports whether the process
// ended in time (if not, it is SIGKILLed and counted as hung).
func (p *Proc) Stop(d time.Duration) bool {
	p.Signal(syscall.SIGTERM)
	if p.Wait(d) {
		return true
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	return false
}

// Lines returns the lines read so far whose first field is tag.
func (p *Proc) Lines(tag string) []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	var r []Line
	for _, l := range p.lines {
		if len(l.Fields) > 0 && l.Fields[0] == tag {
			r = append(r, l)
		}
	}
	return r
}

// Stderr is what the process wrote to stderr so far.
func (p *Proc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Err is the process's exit error once it ended.
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}
