package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/config"
	lua "github.com/yuin/gopher-lua"
)

// openModule loads the config (cfgPath, or the defaults and the
// environment) and opens the module, logging to stderr at the level and in
// the format of --log-level/--log-format, else global.log. It reports what
// failed and returns the exit status to use when it returns nil: 2 for a
// bad config or log flag, 1 for a backend that cannot be opened.
func openModule(cfgPath string, stderr io.Writer) (*shieldglobal.Module, int) {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "shield: %v\n", err)
		return nil, 2
	}
	log, err := newLogger(cfg.Global.Log, stderr)
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

// memoryNotice is the module's one line about running without Redis.
// `shield test` leaves it out unless the level is debug: a spec run on the
// memory backend is the ordinary case, and the line is noise in its output.
const memoryNotice = "shield: no Redis configured (global.redis), using the in-process memory backend"

// newLogger builds the command's logger from the flags kept in stderr (a
// *console) over the config's global.log.
func newLogger(lc config.Log, stderr io.Writer) (*slog.Logger, error) {
	w := unwrap(stderr)
	con, _ := stderr.(*console)
	if con != nil && con.logLevel != "" {
		lc.Level = con.logLevel
	}
	if con != nil && con.logFormat != "" {
		lc.Format = con.logFormat
	}
	var level slog.Level
	switch lc.Level {
	case config.LogDebug:
		level = slog.LevelDebug
	case config.LogInfo:
		level = slog.LevelInfo
	case config.LogWarn:
		level = slog.LevelWarn
	case config.LogError:
		level = slog.LevelError
	default:
		return nil, fmt.Errorf("--log-level: unknown value %q (want debug, info, warn or error)", lc.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch lc.Format {
	case config.LogText:
		h = slog.NewTextHandler(w, opts)
	case config.LogJSON:
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format: unknown value %q (want text or json)", lc.Format)
	}
	if con != nil && con.command != nil && con.command.name == "test" && level > slog.LevelDebug {
		h = dropMessage{h, memoryNotice}
	}
	return slog.New(h), nil
}

// dropMessage is a handler that leaves out the records with one message.
type dropMessage struct {
	slog.Handler
	msg string
}

func (d dropMessage) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == d.msg {
		return nil
	}
	return d.Handler.Handle(ctx, r)
}

func (d dropMessage) WithAttrs(as []slog.Attr) slog.Handler {
	return dropMessage{d.Handler.WithAttrs(as), d.msg}
}

func (d dropMessage) WithGroup(name string) slog.Handler {
	return dropMessage{d.Handler.WithGroup(name), d.msg}
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
