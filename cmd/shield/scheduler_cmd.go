package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shieldrt/shieldglobal/ops"
)

// shield scheduler start|stop|restart|status: a standalone scheduler node
// (seed 001's `crontab start|stop|restart`) over directories of task files.
// docs/scheduler.md, "Standalone node", is the user's page.

const schedulerUsage = `usage:
  shield scheduler start [--config FILE] [--pidfile P] [--skip GLOB]... [--detach [--log FILE]] DIR...
      load every *.lua task file under each DIR (recursive, in path order; --skip leaves out
      entries whose name or path matches, and does not enter such directories) and run them
      until SIGINT/SIGTERM; --detach runs the node in the background and returns once it is up
  shield scheduler stop [--pidfile P] [--timeout D]
      SIGTERM the node and wait until it exited (runs in progress get the shutdown grace)
  shield scheduler restart [--pidfile P] [start's flags and DIR... to replace the recorded ones]
      stop, then start detached with the arguments the node was started with
  shield scheduler status [--pidfile P] [--json]
      whether the node runs (exit 0) or not (exit 3), and its tasks as /ops/scheduler lists them
`

func cmdScheduler(argv []string, stdout, stderr io.Writer) int {
	if len(argv) == 0 {
		fmt.Fprint(stderr, schedulerUsage)
		return 2
	}
	switch argv[0] {
	case "start":
		return schedStart(argv[1:], stdout, stderr)
	case "stop":
		return schedStop(argv[1:], stdout, stderr)
	case "restart":
		return schedRestart(argv[1:], stdout, stderr)
	case "status":
		return schedStatus(argv[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, schedulerUsage)
		return 0
	}
	fmt.Fprintf(stderr, "shield scheduler: unknown subcommand %q\n%s", argv[0], schedulerUsage)
	return 2
}

// startFlags parses start's (and restart's) flags.
type startFlags struct {
	fs                   *flag.FlagSet
	config, pidfile, log *string
	detach               *bool
	skip                 []string
}

func newStartFlags(name string, stderr io.Writer) *startFlags {
	fs, cfg := newFlags("scheduler "+name, stderr)
	f := &startFlags{fs: fs, config: cfg}
	f.pidfile = fs.String("pidfile", "", "the node's pidfile (default "+defaultPidfile()+")")
	f.detach = fs.Bool("detach", false, "run the node in the background; return once it is up")
	f.log = fs.String("log", "", "with --detach: the node's log file (default: beside the pidfile, .log)")
	fs.Func("skip", "leave out task files and directories whose name or path matches this glob (repeatable)", func(s string) error {
		if _, err := filepath.Match(s, ""); err != nil {
			return fmt.Errorf("%q: %w", s, err)
		}
		f.skip = append(f.skip, s)
		return nil
	})
	return f
}

// args resolves the parsed flags to a node's arguments.
func (f *startFlags) args() (nodeArgs, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nodeArgs{}, err
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(wd, p)
	}
	a := nodeArgs{Config: abs(*f.config), Pidfile: abs(*f.pidfile), Skip: f.skip, Log: abs(*f.log), Dir: wd}
	if a.Pidfile == "" {
		a.Pidfile = defaultPidfile()
	}
	for _, d := range f.fs.Args() {
		st, err := os.Stat(d)
		if err != nil {
			return a, err
		}
		if !st.IsDir() {
			return a, fmt.Errorf("%s: not a directory", d)
		}
		a.Dirs = append(a.Dirs, abs(d))
	}
	return a, nil
}

func schedStart(argv []string, stdout, stderr io.Writer) int {
	f := newStartFlags("start", stderr)
	if err := f.fs.Parse(argv); err != nil {
		return 2
	}
	if f.fs.NArg() == 0 {
		fmt.Fprintf(stderr, "shield scheduler start: no task directory given\n%s", schedulerUsage)
		return 2
	}
	a, err := f.args()
	if err != nil {
		fmt.Fprintf(stderr, "shield scheduler start: %v\n", err)
		return 2
	}
	if *f.detach {
		return startDetached(a, stdout, stderr)
	}
	if *f.log != "" {
		fmt.Fprintln(stderr, "shield scheduler start: --log goes with --detach (in the foreground the node logs to stderr)")
		return 2
	}
	return runNode(a, stderr)
}

// readyTimeout bounds how long start --detach waits for the node to be up
// (a Redis that does not answer makes the node fail within its dial
// timeouts, well before).
const readyTimeout = 60 * time.Second

// startDetached starts the node as a process of its own and waits for its
// report: up, or the reason it failed.
func startDetached(a nodeArgs, stdout, stderr io.Writer) int {
	if pid, running, err := nodeStatus(a.Pidfile); err != nil {
		fmt.Fprintf(stderr, "shield scheduler start: %v\n", err)
		return 1
	} else if running {
		fmt.Fprintf(stderr, "shield scheduler start: %v\n", errNodeRunning{pid, a.Pidfile})
		return 1
	}
	if a.Log == "" {
		a.Log = besidePidfile(a.Pidfile, ".log")
	}
	logf, err := os.OpenFile(a.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintf(stderr, "shield scheduler start: log: %v\n", err)
		return 1
	}
	defer logf.Close()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "shield scheduler start: %v\n", err)
		return 1
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "shield scheduler start: %v\n", err)
		return 1
	}
	defer r.Close()
	cmd := exec.Command(exe, a.argv()...)
	cmd.Dir = a.Dir
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w} // descriptor 3
	cmd.Env = append(os.Environ(), readyEnv+"=3")
	cmd.SysProcAttr = detachAttrs()
	if err := cmd.Start(); err != nil {
		w.Close()
		fmt.Fprintf(stderr, "shield scheduler start: %v\n", err)
		return 1
	}
	w.Close()
	_ = r.SetReadDeadline(time.Now().Add(readyTimeout))
	line, rerr := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "ok ") {
		pid := cmd.Process.Pid
		_ = cmd.Process.Release()
		fmt.Fprintf(stdout, "shield scheduler: node started (pid %d, %s; pidfile %s, log %s)\n",
			pid, strings.TrimPrefix(line, "ok pid "+fmt.Sprint(pid)+" "), a.Pidfile, a.Log)
		return 0
	}
	if errors.Is(rerr, os.ErrDeadlineExceeded) {
		_ = signalNode(cmd.Process.Pid)
		fmt.Fprintf(stderr, "shield scheduler start: the node did not report within %v; sent it SIGTERM (log: %s)\n", readyTimeout, a.Log)
		go cmd.Wait()
		return 1
	}
	werr := cmd.Wait()
	reason := strings.TrimPrefix(line, "error: ")
	if reason == "" {
		reason = fmt.Sprintf("the node exited (%v) before it was up", werr)
	}
	fmt.Fprintf(stderr, "shield scheduler start: %s (log: %s)\n", reason, a.Log)
	return 1
}

// stopWait is how long stop waits for the node: its grace, the 2 s it has
// after it, its backstop, and a margin.
func stopWait(st nodeState) time.Duration {
	grace := time.Duration(st.GraceMs) * time.Millisecond
	if st.GraceMs <= 0 {
		grace = 10 * time.Second
	}
	return grace + 2*time.Second + forceExitSlack + 2*time.Second
}

func pidfileFlag(fs *flag.FlagSet) *string {
	return fs.String("pidfile", "", "the node's pidfile (default "+defaultPidfile()+")")
}

func resolvePidfile(p string) string {
	if p == "" {
		return defaultPidfile()
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

func schedStop(argv []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shield scheduler stop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pf := pidfileFlag(fs)
	timeout := fs.Duration("timeout", 0, "how long to wait for the node (default: its shutdown grace + 7s)")
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shield scheduler stop: unexpected arguments %q\n", fs.Args())
		return 2
	}
	return stopNode(resolvePidfile(*pf), *timeout, stdout, stderr)
}

// stopNode stops the node of pidfile and waits for it; not running is a
// success.
func stopNode(pidfile string, timeout time.Duration, stdout, stderr io.Writer) int {
	pid, running, err := nodeStatus(pidfile)
	if err != nil {
		fmt.Fprintf(stderr, "shield scheduler stop: %v\n", err)
		return 1
	}
	if !running {
		if _, err := os.Stat(pidfile); err == nil {
			os.Remove(pidfile)
			fmt.Fprintf(stdout, "shield scheduler: not running (removed the stale pidfile %s)\n", pidfile)
		} else {
			fmt.Fprintf(stdout, "shield scheduler: not running (no pidfile %s)\n", pidfile)
		}
		return 0
	}
	st, _ := readState(pidfile)
	if timeout <= 0 {
		timeout = stopWait(st)
	}
	if err := signalNode(pid); err != nil {
		fmt.Fprintf(stderr, "shield scheduler stop: SIGTERM to pid %d: %v\n", pid, err)
		return 1
	}
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		_, running, err := nodeStatus(pidfile)
		if err == nil && !running {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "shield scheduler stop: the node (pid %d) did not exit within %v of SIGTERM\n", pid, timeout)
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The node removes its pidfile; a node that died on the way leaves it.
	if _, running, _ := nodeStatus(pidfile); !running {
		os.Remove(pidfile)
	}
	fmt.Fprintf(stdout, "shield scheduler: node stopped (pid %d, in %v)\n", pid, time.Since(start).Round(time.Millisecond))
	return 0
}

func schedRestart(argv []string, stdout, stderr io.Writer) int {
	f := newStartFlags("restart", stderr)
	if err := f.fs.Parse(argv); err != nil {
		return 2
	}
	pidfile := resolvePidfile(*f.pidfile)
	var a nodeArgs
	if f.fs.NArg() > 0 {
		var err error
		if a, err = f.args(); err != nil {
			fmt.Fprintf(stderr, "shield scheduler restart: %v\n", err)
			return 2
		}
	} else {
		if *f.config != "" || *f.log != "" || len(f.skip) > 0 {
			fmt.Fprintln(stderr, "shield scheduler restart: --config, --skip and --log replace the recorded arguments only with the directories: give them too")
			return 2
		}
		st, err := readState(pidfile)
		if err != nil {
			fmt.Fprintf(stderr, "shield scheduler restart: no recorded arguments for pidfile %s (%v); give them: shield scheduler restart [flags] DIR...\n", pidfile, err)
			return 2
		}
		a = st.Args
	}
	if status := stopNode(a.Pidfile, 0, stdout, stderr); status != 0 {
		return status
	}
	return startDetached(a, stdout, stderr)
}

// statusReport is status --json.
type statusReport struct {
	Running bool       `json:"running"`
	Pid     int        `json:"pid,omitempty"`
	Pidfile string     `json:"pidfile"`
	Started string     `json:"started,omitempty"`
	Tasks   []ops.Task `json:"tasks"`
}

// statusTimeout bounds the status request (the node may read Redis).
const statusTimeout = 10 * time.Second

func schedStatus(argv []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shield scheduler status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pf := pidfileFlag(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shield scheduler status: unexpected arguments %q\n", fs.Args())
		return 2
	}
	pidfile := resolvePidfile(*pf)
	rep := statusReport{Pidfile: pidfile, Tasks: []ops.Task{}}
	pid, running, err := nodeStatus(pidfile)
	if err != nil {
		fmt.Fprintf(stderr, "shield scheduler status: %v\n", err)
		return 1
	}
	status := 3
	if running {
		rep.Running, rep.Pid, status = true, pid, 0
		st, err := readState(pidfile)
		switch {
		case err != nil || st.Pid != pid:
			fmt.Fprintf(stderr, "shield scheduler status: the node (pid %d) is starting: its tasks are not listed yet\n", pid)
			status = 1
		default:
			rep.Started = st.Started
			tasks, err := fetchTasks(st)
			if err != nil {
				fmt.Fprintf(stderr, "shield scheduler status: the node (pid %d) runs but did not list its tasks: %v\n", pid, err)
				status = 1
			} else {
				rep.Tasks = tasks
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return status
	}
	if !rep.Running {
		fmt.Fprintf(stdout, "shield scheduler: not running (pidfile %s)\n", pidfile)
		return status
	}
	fmt.Fprintf(stdout, "shield scheduler: running (pid %d, since %s; pidfile %s)\n", rep.Pid, rep.Started, pidfile)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSCHEDULE\tSTATUS\tNEXT RUN\tLAST RUN\tRUNS\tDISTRIBUTED")
	orDash := func(s *string) string {
		if s == nil {
			return "-"
		}
		return *s
	}
	for _, t := range rep.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%v\n", t.Name, t.Schedule, t.Status, orDash(t.NextRun), orDash(t.LastRun), t.RunCount, t.Distributed)
	}
	tw.Flush()
	return status
}

// fetchTasks asks the node's control endpoint for /ops/scheduler.
func fetchTasks(st nodeState) ([]ops.Task, error) {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+st.Control+"/ops/scheduler", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+st.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var rep ops.Scheduler
	if err := json.Unmarshal(body, &rep); err != nil {
		return nil, err
	}
	return rep.Tasks, nil
}
