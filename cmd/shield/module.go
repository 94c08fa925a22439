package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/config"
	lua "github.com/yuin/gopher-lua"
)

// openModule loads the config (cfgPath, or the defaults and the
// environment) and opens the module, logging to stderr. It reports what
// failed and returns the exit status to use when it returns nil: 2 for a
// bad config, 1 for a backend that cannot be opened.
func openModule(cfgPath string, stderr io.Writer) (*shieldglobal.Module, int) {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "shield: %v\n", err)
		return nil, 2
	}
	mod, err := shieldglobal.New(cfg, shieldglobal.WithLogger(log))
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return nil, 1
	}
	return mod, 0
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
		return config.FromEnv()
	}
	return config.Load(path)
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
