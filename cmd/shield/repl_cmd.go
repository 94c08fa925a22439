package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chzyer/readline"
	"github.com/shieldrt/shieldglobal"
	"github.com/shieldrt/shieldglobal/config"
	lua "github.com/yuin/gopher-lua"
)

// historyEnv names the REPL's history file; "" (set but empty) keeps no
// history. Default: ~/.shield_history.
const historyEnv = "SHIELD_HISTORY"

// cmdRepl is an interactive prompt: each entry runs as a task of one
// runtime (so blocking calls work and spawned tasks, subscriptions and
// consumers go on in the background), an expression's values are printed,
// tables expanded, and an incomplete chunk continues on the next line.
func cmdRepl(argv []string, stdout, stderr io.Writer) int {
	fs, cfgPath := newFlags("repl", stderr)
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shield repl: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	mod, status := openModule(*cfgPath, stderr)
	if mod == nil {
		return status
	}
	defer closeModule(mod, stderr)
	L := lua.NewState(shieldglobal.StateOptions())
	defer L.Close()
	rt, err := mod.NewRuntime(L)
	if err != nil {
		fmt.Fprintf(stderr, "shield: %v\n", err)
		return 1
	}
	defer rt.Close(config.Millis(mod.Config().Global.Runtime.ShutdownGrace))
	rl, err := readline.NewEx(&readline.Config{
		Prompt:          "> ",
		HistoryFile:     historyFile(),
		InterruptPrompt: "^C",
		EOFPrompt:       "",
		Stdout:          stdout,
		Stderr:          unwrap(stderr),
	})
	if err != nil {
		fmt.Fprintf(stderr, "shield repl: %v\n", err)
		return 1
	}
	defer rl.Close()
	fmt.Fprintf(rl.Stdout(), "shield %s on the %s backend; =expr prints a value, Ctrl-C interrupts, Ctrl-D quits\n",
		moduleVersion(), mod.Backend())
	return repl(rt, rl)
}

func historyFile() string {
	if p, ok := os.LookupEnv(historyEnv); ok {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".shield_history")
}

// repl reads entries until end of input (Ctrl-D) or SIGTERM.
func repl(rt *shieldglobal.Runtime, rl *readline.Instance) int {
	sg := watchSignals(rl)
	defer sg.stop()
	var pending string // an incomplete chunk so far
	for {
		if pending == "" {
			rl.SetPrompt("> ")
		} else {
			rl.SetPrompt(">> ")
		}
		line, err := rl.Readline()
		switch {
		case sg.terminated():
			return 0
		case errors.Is(err, readline.ErrInterrupt): // Ctrl-C at the prompt drops the entry
			pending = ""
			continue
		case err != nil: // io.EOF: Ctrl-D
			return 0
		}
		src := line
		if pending != "" {
			src = pending + "\n" + line
		}
		more, closed := entry(rt, src, rl.Stdout(), rl.Stderr(), sg)
		if closed {
			return 1
		}
		pending = ""
		if more {
			pending = src
		}
		if sg.terminated() {
			return 0
		}
	}
}

// replSignals: at the prompt the terminal is raw, so Ctrl-C reaches
// readline as a key; while an entry runs it is a SIGINT, which interrupts
// the entry, and a second SIGINT before the entry has stopped ends the
// process at once. SIGTERM ends the REPL (the entry running is interrupted).
type replSignals struct {
	sigs   chan os.Signal
	quit   chan struct{}
	stderr io.Writer

	mu        sync.Mutex
	cancel    context.CancelFunc // of the entry running, nil at the prompt
	signalled bool               // the entry running got a signal already
	terminate bool
}

func watchSignals(rl *readline.Instance) *replSignals {
	sg := &replSignals{sigs: make(chan os.Signal, 2), quit: make(chan struct{}), stderr: rl.Stderr()}
	signal.Notify(sg.sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		for {
			select {
			case sig := <-sg.sigs:
				sg.handle(sig, rl)
			case <-sg.quit:
				return
			}
		}
	}()
	return sg
}

func (sg *replSignals) handle(sig os.Signal, rl *readline.Instance) {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if sig == syscall.SIGTERM {
		sg.terminate = true
	}
	switch {
	case sg.cancel != nil && sg.signalled:
		fmt.Fprintf(sg.stderr, "shield: stopping now (second signal: %v)\n", sig)
		exit(1)
	case sg.cancel != nil:
		sg.signalled = true
		sg.cancel()
	case sg.terminate:
		// Readline returns io.EOF. Not under mu: Close waits for
		// readline's goroutines, and the REPL's goroutine takes mu as
		// soon as Readline has returned.
		go rl.Close()
	}
}

func (sg *replSignals) stop() {
	signal.Stop(sg.sigs)
	close(sg.quit)
}

func (sg *replSignals) terminated() bool {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	return sg.terminate
}

// running makes cancel the entry's: signals now interrupt it. The function
// returned puts the REPL back at the prompt.
func (sg *replSignals) running(cancel context.CancelFunc) (done func()) {
	sg.mu.Lock()
	sg.cancel, sg.signalled = cancel, false
	sg.mu.Unlock()
	return func() {
		sg.mu.Lock()
		sg.cancel = nil
		sg.mu.Unlock()
	}
}

// compile loads an entry: "=expr" and an entry that is an expression
// (tried as "return <entry>" first, as Lua 5.3's REPL does) print their
// values; anything else runs as statements.
func compile(rt *shieldglobal.Runtime, src string) (*lua.LFunction, error) {
	var fn *lua.LFunction
	err := rt.Do(func(L *lua.LState) error {
		if rest, ok := strings.CutPrefix(src, "="); ok {
			f, err := L.Load(strings.NewReader("return "+rest), "stdin")
			fn = f
			return err
		}
		if f, err := L.Load(strings.NewReader("return "+src), "stdin"); err == nil {
			fn = f
			return nil
		}
		f, err := L.Load(strings.NewReader(src), "stdin")
		fn = f
		return err
	})
	return fn, err
}

// incomplete reports a syntax error at the end of the input: the chunk
// goes on on the next line (an unfinished "..." string does not).
func incomplete(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, " at EOF:") && !strings.Contains(msg, "unterminated string")
}

// entry compiles and runs one entry and prints its values. more: the
// entry is an incomplete chunk (nothing ran). closed: the runtime is gone.
// While it runs, signals interrupt it (see replSignals); it returns when
// the loop is free again, so that a Go function that does not return keeps
// the REPL in the state where a second Ctrl-C quits.
func entry(rt *shieldglobal.Runtime, src string, stdout, stderr io.Writer, sg *replSignals) (more, closed bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer sg.running(cancel)()
	fn, err := compile(rt, src)
	switch {
	case errors.Is(err, shieldglobal.ErrRuntimeClosed):
		fmt.Fprintln(stderr, "shield: the runtime has closed")
		return false, true
	case err != nil && incomplete(err):
		return true, false
	case err != nil:
		fmt.Fprintln(stderr, err)
		return false, false
	}
	vals, err := rt.Call(ctx, fn)
	switch {
	case errors.Is(err, shieldglobal.ErrRuntimeClosed):
		fmt.Fprintln(stderr, "shield: the runtime has closed")
		return false, true
	case ctx.Err() != nil:
		settle(rt, stderr)
		fmt.Fprintln(stderr, "interrupted")
		return false, false
	case err != nil:
		fmt.Fprintln(stderr, err)
		return false, false
	}
	if len(vals) == 0 {
		return false, false
	}
	var out string
	rt.Do(func(L *lua.LState) error { // tables are read on the loop
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = formatTop(v)
		}
		out = strings.Join(parts, "\t")
		return nil
	})
	fmt.Fprintln(stdout, out)
	return false, false
}

// settle waits until an interrupted entry has left the loop. A task in
// Lua stops at its next instruction; one inside a Go function that does
// not return (io.read, os.execute) cannot be stopped: after a second the
// user is told that a second Ctrl-C quits.
func settle(rt *shieldglobal.Runtime, stderr io.Writer) {
	free := make(chan struct{})
	go func() {
		rt.Do(func(*lua.LState) error { return nil })
		close(free)
	}()
	select {
	case <-free:
		return
	case <-time.After(time.Second):
		fmt.Fprintln(stderr, "shield: the entry does not stop (it is inside a Go function that has not returned); Ctrl-C again quits")
	}
	<-free
}
