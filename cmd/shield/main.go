// Command shield runs Lua scripts and Lua spec files on shield_global.
//
//	shield run  [--config F] script.lua [args...]
//	shield test [--config F] [--timeout 10s] [--output human|tap|junit] [paths...]   (default: testdata/lua)
//
// Without --config (or a Redis URL in SHIELD_REDIS_URL) everything runs on
// the embedded memory backend.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	lua "github.com/yuin/gopher-lua"

	shieldglobal "github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/config"
)

const usage = `usage:
  shield run  [--config FILE] script.lua [args...]   run a script; stays up while it has subscriptions or scheduled work
  shield test [--config FILE] [--timeout 10s] [--output human|tap|junit] [paths...]
                                                     run *_spec.lua files (default testdata/lua); --timeout bounds each test
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(argv []string, stdout, stderr io.Writer) int {
	if len(argv) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd := argv[0]
	fs := flag.NewFlagSet("shield "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "YAML config file (default: built-in defaults, memory backend)")
	timeout := fs.Duration("timeout", shieldglobal.DefaultSpecTimeout, "shield test: time each test (and hook) may take")
	output := fs.String("output", shieldglobal.SpecHuman, "shield test: output format: human, tap or junit")
	if err := fs.Parse(argv[1:]); err != nil {
		return 2
	}
	if (cmd != "run" && cmd != "test") || (cmd == "run" && fs.NArg() < 1) {
		fmt.Fprint(stderr, usage) // before connecting to anything
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "shield: %v\n", err)
		return 2
	}
	mod, err := shieldglobal.New(cfg, shieldglobal.WithLogger(log))
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return 1
	}
	defer closeModule(mod, stderr)
	switch cmd {
	case "run":
		return runScript(mod, fs.Arg(0), fs.Args()[1:], stderr)
	case "test":
		paths := fs.Args()
		if len(paths) == 0 {
			paths = []string{"testdata/lua"}
		}
		// Ctrl-C stops the running file; the summary of what ran is printed.
		// A second one exits at once.
		ctx, stop := notifyStop(stderr, 0)
		defer stop()
		res, err := mod.RunSpecs(ctx, paths, stdout, shieldglobal.SpecOptions{Timeout: *timeout, Format: *output})
		if err != nil {
			fmt.Fprintf(stderr, "shield test: %v\n", err)
			return 2
		}
		if res.Failed > 0 || res.Interrupted {
			return 1
		}
	}
	return 0
}

// moduleCloseWait bounds Module.Close at exit: the runtime has had its
// grace already; what is left (queue settles, rate-limiter shares handed
// back, a leaderboard reset still running) must not hold a stopping process
// up for long when Redis is slow.
const moduleCloseWait = 3 * time.Second

// stopDeadline, once a signal asked shield run to stop, is when the process
// must be gone: the grace period plus 2 s after the signal. Module.Close
// gets what is left of it (at most moduleCloseWait).
var stopDeadline time.Time

func closeModule(mod *shieldglobal.Module, stderr io.Writer) {
	wait := moduleCloseWait
	if !stopDeadline.IsZero() {
		wait = min(wait, time.Until(stopDeadline))
	}
	done := make(chan error, 1)
	go func() { done <- mod.Close() }()
	timer := time.NewTimer(max(wait, 0))
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(stderr, "shield: closing: %v\n", err)
		}
	case <-timer.C:
		fmt.Fprintf(stderr, "shield: closing the module took longer than %v; exiting without waiting (unsettled queue messages come back after their visibility timeout)\n", wait.Round(time.Millisecond))
	}
}

func loadConfig(path string) (config.Config, error) {
	if path == "" {
		cfg := config.Default()
		cfg.ApplyEnv(os.Getenv)
		return cfg, cfg.Validate()
	}
	return config.Load(path)
}

// runScript runs the main chunk, then keeps the process up while the script
// has subscriptions, timers or tasks, until it is idle or SIGINT/SIGTERM.
// A signal also ends a main chunk that is still running: tasks get the
// configured grace period (global.runtime.shutdown_grace) to finish, then
// the tasks still alive are interrupted and named. A second signal ends the
// process at once.
// Exit status: 0, or 1 when the main chunk or a spawned task raised, or a
// task had to be interrupted.
func runScript(mod *shieldglobal.Module, path string, scriptArgs []string, stderr io.Writer) int {
	L := lua.NewState(shieldglobal.StateOptions())
	defer L.Close()
	rt, err := mod.NewRuntime(L)
	if err != nil {
		fmt.Fprintf(stderr, "shield: %v\n", err)
		return 1
	}
	grace := config.Millis(mod.Config().Global.Runtime.ShutdownGrace)
	ctx, stop := notifyStop(stderr, grace+2*time.Second+forceExitSlack)
	defer stop()
	args := make([]lua.LValue, len(scriptArgs))
	for i, a := range scriptArgs {
		args[i] = lua.LString(a)
	}
	if err := rt.Do(func(L *lua.LState) error { L.SetGlobal("arg", argTable(L, path, scriptArgs)); return nil }); err != nil {
		fmt.Fprintf(stderr, "shield: %v\n", err)
		return 1
	}
	status := 0
	report := func(err error) {
		fmt.Fprintf(stderr, "shield: %s: %v\n", path, err)
		status = 1
	}
	mainDone := make(chan error, 1)
	go func() { mainDone <- rt.RunFile(path, args...) }()
	mainEnded := false
	select {
	case err := <-mainDone:
		mainEnded = true
		if err != nil {
			report(err)
			break
		}
		// Wait returns as soon as a signal comes, even while a task hogs
		// the loop: Close below interrupts it.
		failures, err := rt.Wait(ctx)
		if err != nil && ctx.Err() == nil {
			report(err)
		}
		if failures > 0 {
			status = 1
		}
	case <-ctx.Done():
	}
	// One "stopping" line for every way of stopping that leaves tasks to
	// wait for.
	switch {
	case ctx.Err() != nil:
		stopDeadline = time.Now().Add(grace + 2*time.Second)
		fmt.Fprintf(stderr, "shield: stopping (%v); tasks get %v to finish\n", context.Cause(ctx), grace)
	case rt.Tasks() > 0:
		fmt.Fprintf(stderr, "shield: stopping (the main chunk failed); %d tasks get %v to finish\n", rt.Tasks(), grace)
	}
	rt.Close(grace)
	if !mainEnded { // the main chunk ended by itself within the grace, or was interrupted
		if err := <-mainDone; err != nil && !errors.Is(err, bindingsErrClosed) {
			report(err)
		}
	}
	if tasks := rt.InterruptedTasks(); len(tasks) > 0 {
		names := make([]string, len(tasks))
		for i, it := range tasks {
			names[i] = it.String()
		}
		fmt.Fprintf(stderr, "shield: interrupted after the %v shutdown grace period: %s\n", grace, strings.Join(names, ", "))
		status = 1
	}
	return status
}

// exit ends the process (a variable for the tests of notifyStop).
var exit = os.Exit

// forceExitSlack is how long past stopDeadline the process may still run
// before notifyStop ends it: every step of the shutdown has a bound, this
// is the backstop for one that has not.
const forceExitSlack = 3 * time.Second

// notifyStop returns a context cancelled by the first SIGINT or SIGTERM. A
// second signal ends the process at once (status 1), and so does the
// backstop when the process is still up that long after the first signal
// (0: no backstop). stop releases the signals.
func notifyStop(stderr io.Writer, backstop time.Duration) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			cancel(fmt.Errorf("%v signal received", sig))
		case <-quit:
			return
		}
		var late <-chan time.Time
		if backstop > 0 {
			t := time.NewTimer(backstop)
			defer t.Stop()
			late = t.C
		}
		select {
		case sig := <-sigs:
			fmt.Fprintf(stderr, "shield: stopping now (second signal: %v); tasks are not waited for\n", sig)
			exit(1)
		case <-late:
			fmt.Fprintf(stderr, "shield: still not stopped %v after the signal; exiting\n", backstop)
			exit(1)
		case <-quit:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(quit)
		cancel(nil)
	}
}

// bindingsErrClosed is what RunFile returns for a main chunk still parked
// when the runtime stopped.
var bindingsErrClosed = shieldglobal.ErrRuntimeClosed

// argTable builds the conventional `arg` global: arg[0] is the script.
func argTable(L *lua.LState, script string, args []string) *lua.LTable {
	t := L.NewTable()
	t.RawSetInt(0, lua.LString(script))
	for i, a := range args {
		t.RawSetInt(i+1, lua.LString(a))
	}
	return t
}
