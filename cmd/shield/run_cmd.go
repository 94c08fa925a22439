package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/config"
	lua "github.com/yuin/gopher-lua"
)

func cmdRun(argv []string, stdout, stderr io.Writer) int {
	fs, cfgPath := newFlags("run", stderr)
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	if fs.NArg() < 1 {
		fmt.Fprint(stderr, usage()) // before connecting to anything
		return 2
	}
	mod, status := openModule(*cfgPath, stderr)
	if mod == nil {
		return status
	}
	defer closeModule(mod, stderr)
	return runScript(mod, fs.Arg(0), fs.Args()[1:], stderr)
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
