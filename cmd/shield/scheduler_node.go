package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/ops"
)

// The standalone scheduler node: `shield scheduler start` in the
// foreground (or the process --detach starts). It takes its pidfile, loads
// every task file under its directories, serves its task list on a
// loopback control endpoint for `status`, and runs until SIGINT/SIGTERM.

// nodeArgs are a node's arguments, recorded in its state file so that
// `restart` starts it again the same way. Paths are absolute.
type nodeArgs struct {
	Config  string   `json:"config,omitempty"`
	Pidfile string   `json:"pidfile"`
	Skip    []string `json:"skip,omitempty"`
	Log     string   `json:"log,omitempty"`
	Dir     string   `json:"cwd"`
	Dirs    []string `json:"dirs"`
}

// argv is the command line of the detached node's `shield scheduler start`
// (without --detach and --log: its output already goes to the log).
func (a nodeArgs) argv() []string {
	out := []string{"scheduler", "start", "--pidfile", a.Pidfile}
	if a.Config != "" {
		out = append(out, "--config", a.Config)
	}
	for _, s := range a.Skip {
		out = append(out, "--skip", s)
	}
	return append(append(out, "--"), a.Dirs...)
}

// nodeState is the node's state file (beside its pidfile, mode 0600): its
// arguments (kept after it stops, for restart), and while it runs its pid
// and control endpoint.
type nodeState struct {
	Pid     int      `json:"pid"`
	Args    nodeArgs `json:"args"`
	Control string   `json:"control"`
	Token   string   `json:"token"`
	GraceMs int64    `json:"grace_ms"`
	Started string   `json:"started"`
	Tasks   []string `json:"tasks"`
}

// defaultPidfile is where the pidfile goes without --pidfile:
// $XDG_RUNTIME_DIR/shield-scheduler.pid, else
// <temp dir>/shield-scheduler-<uid>.pid.
func defaultPidfile() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "shield-scheduler.pid")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("shield-scheduler-%d.pid", os.Getuid()))
}

// besidePidfile is the file next to the pidfile with ext instead of .pid
// (scheduler.pid -> scheduler.json; a pidfile without .pid gets ext added).
func besidePidfile(pidfile, ext string) string {
	return strings.TrimSuffix(pidfile, ".pid") + ext
}

func statePath(pidfile string) string { return besidePidfile(pidfile, ".json") }

func readState(pidfile string) (nodeState, error) {
	var st nodeState
	b, err := os.ReadFile(statePath(pidfile))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", statePath(pidfile), err)
	}
	return st, nil
}

// writeState writes the state file through a rename, so that a reader
// never sees half of it.
func writeState(st nodeState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	p := statePath(st.Args.Pidfile)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// readyEnv names the descriptor a detached node reports on: "ok ..." once
// it is up, or the reason it failed.
const readyEnv = "SHIELD_SCHEDULER_READY_FD"

// readyPipe is the descriptor of readyEnv, or nil in the foreground.
type readyPipe struct{ f *os.File }

func openReady() *readyPipe {
	fd, err := strconv.Atoi(os.Getenv(readyEnv))
	os.Unsetenv(readyEnv)
	if err != nil || fd < 3 {
		return &readyPipe{}
	}
	return &readyPipe{f: os.NewFile(uintptr(fd), "ready")}
}

// send reports once and closes the descriptor (a process the tasks start
// must not hold it).
func (r *readyPipe) send(msg string) {
	if r.f == nil {
		return
	}
	fmt.Fprintln(r.f, msg)
	r.f.Close()
	r.f = nil
}

// nodeChunk loads the task files: ... is the number of directories, the
// directories, then the skip patterns. It leaves the task names in
// SHIELD_SCHEDULER_NODE_TASKS for the node to read.
const nodeChunk = `
local args = {...}
local n = tonumber(args[1])
local dirs, skip = {}, {}
for i = 2, n + 1 do dirs[#dirs + 1] = args[i] end
for i = n + 2, #args do skip[#skip + 1] = args[i] end
SHIELD_SCHEDULER_NODE_TASKS = require("shield").scheduler():load(dirs, { recursive = true, skip = skip })
`

// runNode runs the node in this process until a signal; it returns the
// exit status.
func runNode(a nodeArgs, stderr io.Writer) int {
	ready := openReady()
	fail := func(status int, format string, v ...any) int {
		msg := fmt.Sprintf(format, v...)
		fmt.Fprintf(stderr, "shield scheduler: %s\n", msg)
		ready.send("error: " + msg)
		return status
	}
	lock, err := lockPidfile(a.Pidfile)
	if err != nil {
		return fail(1, "%v", err)
	}
	defer lock.release()
	if lock.stale != 0 {
		fmt.Fprintf(stderr, "shield scheduler: took over the stale pidfile %s (pid %d is gone)\n", a.Pidfile, lock.stale)
	}
	cfg, err := loadConfig(a.Config)
	if err != nil {
		return fail(2, "%v", err)
	}
	mod, status := openModule(a.Config, stderr)
	if mod == nil {
		return fail(status, "could not open the module (see the lines above)")
	}
	defer closeModule(mod, stderr)
	grace := config.Millis(cfg.Global.Runtime.ShutdownGrace)
	// Signals are caught before the tasks load: a stop during the load is a
	// clean stop too.
	ctx, stop := notifyStop(stderr, grace+2*time.Second+forceExitSlack)
	defer stop()
	L := lua.NewState(shieldglobal.StateOptions())
	defer L.Close()
	rt, err := mod.NewRuntime(L)
	if err != nil {
		return fail(1, "%v", err)
	}
	args := []lua.LValue{lua.LString(strconv.Itoa(len(a.Dirs)))}
	for _, d := range append(append([]string(nil), a.Dirs...), a.Skip...) {
		args = append(args, lua.LString(d))
	}
	if err := rt.RunString(nodeChunk, "=scheduler node", args...); err != nil {
		rt.Close(0)
		return fail(1, "loading the task files: %v", err)
	}
	var names []string
	_ = rt.Do(func(L *lua.LState) error {
		if t, ok := L.GetGlobal("SHIELD_SCHEDULER_NODE_TASKS").(*lua.LTable); ok {
			t.ForEach(func(_, v lua.LValue) { names = append(names, v.String()) })
		}
		return nil
	})
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	st := nodeState{Pid: os.Getpid(), Args: a, Token: hex.EncodeToString(token), GraceMs: grace.Milliseconds(),
		Started: time.Now().UTC().Format(time.RFC3339), Tasks: names}
	// The control endpoint: /ops/scheduler of this node on loopback, behind
	// a token only the state file (0600) holds.
	ctl, err := ops.Listen(config.Ops{Listen: "127.0.0.1:0", Token: st.Token},
		ops.Sources{Scheduler: mod.SchedulerReport}, mod.Logger())
	if err != nil {
		rt.Close(0)
		return fail(1, "control endpoint: %v", err)
	}
	st.Control = ctl.Addr()
	if err := writeState(st); err != nil {
		ctl.Close()
		rt.Close(0)
		return fail(1, "state file: %v", err)
	}
	mod.Logger().Info("shield: scheduler node up", "pid", st.Pid, "pidfile", a.Pidfile, "tasks", len(names),
		"names", strings.Join(names, ","), "control", st.Control)
	ready.send(fmt.Sprintf("ok pid %d tasks %d", st.Pid, len(names)))
	<-ctx.Done()
	stopDeadline = time.Now().Add(grace + 2*time.Second)
	fmt.Fprintf(stderr, "shield: stopping (%v); runs in progress get %v to finish\n", context.Cause(ctx), grace)
	ctl.Close()
	rt.Close(grace)
	if tasks := rt.InterruptedTasks(); len(tasks) > 0 {
		fmt.Fprintf(stderr, "shield: interrupted after the %v shutdown grace period: %d tasks\n", grace, len(tasks))
	}
	return 0
}
