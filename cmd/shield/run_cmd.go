package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/config"
	lua "github.com/yuin/gopher-lua"
)

func cmdRun(argv []string, stdout, stderr io.Writer) int {
	fs, cfgPath := newFlags("run", stderr)
	code := fs.String("e", "", "run `CODE` instead of a script file; the arguments go to it as ...")
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	var src script
	args := fs.Args()
	switch {
	case isSet(fs, "e"):
		src = script{name: "(command line)", code: *code, isCode: true}
	case fs.NArg() < 1:
		// before connecting to anything
		fmt.Fprintf(stderr, "shield run: no script given (a file, - for stdin, or -e CODE)\n%s", commandHelp(lookup("run"), fs))
		return 2
	case fs.Arg(0) == "-":
		data, err := io.ReadAll(os.Stdin)
		if err != nil {
			fmt.Fprintf(stderr, "shield: reading the script from stdin: %v\n", err)
			return 1
		}
		src, args = script{name: "stdin", code: string(data), isCode: true}, args[1:]
	default:
		src, args = script{name: fs.Arg(0)}, args[1:]
	}
	mod, status := openModule(*cfgPath, stderr)
	if mod == nil {
		return status
	}
	defer closeModule(mod, stderr)
	return runScript(mod, src, args, stderr)
}

// script is what `shield run` runs: a file (name is its path) or source
// text (-e CODE, or - for stdin) named for error messages as lua names them.
type script struct {
	name   string
	code   string
	isCode bool
}

func (s script) run(rt *shieldglobal.Runtime, args []lua.LValue) error {
	if s.isCode {
		return rt.RunString(s.code, s.name, args...)
	}
	return rt.RunFile(s.name, args...)
}

// isSet reports whether the flag was given on the command line (-e ” runs
// an empty chunk rather than asking for a script).
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// runScript runs the main chunk, then keeps the process up while the script
// has subscriptions, timers or tasks, until it is idle or SIGINT/SIGTERM.
// A signal also ends a main chunk that is still running: tasks get the
// configured grace period (global.runtime.shutdown_grace) to finish, then
// the tasks still alive are interrupted and named. A second signal ends the
// process at once.
// Exit status: 0, or 1 when the main chunk or a spawned task raised, or a
// task had to be interrupted.
func runScript(mod *shieldglobal.Module, src script, scriptArgs []string, stderr io.Writer) int {
	path := src.name
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
	go func() { mainDone <- src.run(rt, args) }()
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
