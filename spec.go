package shieldglobal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/bindings"
)

// SpecResult counts the outcomes of spec files. Interrupted is true when
// RunSpecs stopped early because its context ended.
type SpecResult struct {
	Passed, Failed, Skipped int
	Interrupted             bool
}

// SpecOptions configure RunSpecs.
type SpecOptions struct {
	// Timeout bounds each test body and hook (before_each, setup, ...): a
	// test still running after it fails, interrupted at its current line
	// (also when it never yields). Default 10 s.
	Timeout time.Duration
	// Format is the output: SpecHuman (default), SpecTAP or SpecJUnit.
	Format string
	// VirtualTime runs every file in virtual time, as the first line
	// "--!virtual-time" does for one file (vtime.go, docs/testing.md): on a
	// module of its own on the memory backend whose clock jumps to the next
	// timer whenever every task waits. Timeout stays real time.
	VirtualTime bool
}

// DefaultSpecTimeout is SpecOptions.Timeout when it is zero.
const DefaultSpecTimeout = 10 * time.Second

// runner loads one spec file in a task and runs it with shield.spec; call
// runs each test body and hook, report is told each result, finish receives
// the counts.
const runner = `
local chunk, write, call, report, finish = ...
local spec = require("shield.spec")
spec.install(_G)
chunk()
finish(spec.run(write, { call = call, report = report, summary = false }))
`

// RunSpecs runs busted-style *_spec.lua files (paths may be directories,
// searched recursively) on this module, each file in a fresh Lua state, and
// writes the results to out in opts.Format: by default one line per test, a
// summary line per file and the total last. A file that fails to load counts
// as one failure. Errors: a path that does not exist, an unknown format.
//
// Each test body and hook runs as a task of its own, bounded by
// opts.Timeout; a task it spawns that raises fails the test (or, once the
// test is over, is reported as a failure of it before the file's summary).
// Tasks a file leaves running are interrupted when it ends, without a grace
// period. When ctx ends, the running file is stopped and the results so far
// are returned with Interrupted set.
func (m *Module) RunSpecs(ctx context.Context, paths []string, out io.Writer, opts SpecOptions) (SpecResult, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultSpecTimeout
	}
	if opts.VirtualTime && m.backend == BackendRedis {
		return SpecResult{}, ErrVirtualTimeRedis
	}
	sink, err := newSpecSink(opts.Format, out)
	if err != nil {
		return SpecResult{}, err
	}
	files, err := specFiles(paths)
	if err != nil {
		return SpecResult{}, err
	}
	var total SpecResult
	defer func() { sink.end(total) }()
	for _, f := range files {
		if ctx.Err() != nil {
			total.Interrupted = true
			break
		}
		sink.file(f)
		r := m.runSpecFile(ctx, f, sink, opts)
		total.Passed += r.Passed
		total.Failed += r.Failed
		total.Skipped += r.Skipped
		if r.Interrupted {
			total.Interrupted = true
			break
		}
	}
	return total, nil
}

// specRun is the state of one spec file's run. Loop only, except counts.
type specRun struct {
	rt   *Runtime
	sink specSink
	opts SpecOptions
	last time.Time // of the previous result, for each test's duration
	// Counted as results arrive, so an interrupted file still reports.
	passed, failed, skipped atomic.Int32
	late                    []lateFailure     // failures of tasks whose test was over
	outcome                 map[string]string // test name -> "ok", "fail", "pending"
}

// lateFailure is a spawned task that raised after its test was reported.
type lateFailure struct{ test, text string }

func (m *Module) runSpecFile(ctx context.Context, path string, sink specSink, opts SpecOptions) SpecResult {
	L := lua.NewState(StateOptions())
	defer L.Close()
	mod := m
	var v *vtime // nil: real time
	if opts.VirtualTime || wantsVirtualTime(path) {
		var err error
		if v, err = m.newVirtualModule(); err != nil {
			sink.fileFailed(path, err.Error())
			r := SpecResult{Failed: 1}
			sink.endFile(path, r)
			return r
		}
		mod = v.m
	}
	rt, err := mod.NewRuntime(L)
	if v != nil {
		if err != nil {
			v.m.Close()
		} else {
			go v.drive(rt)
			defer v.halt()
		}
	}
	if err != nil {
		sink.fileFailed(path, err.Error())
		r := SpecResult{Failed: 1}
		sink.endFile(path, r)
		return r
	}
	s := &specRun{rt: rt, sink: sink, opts: opts, outcome: map[string]string{}, last: time.Now()}
	out := sink.lines()
	if out == nil {
		out = io.Discard
	}
	stop := context.AfterFunc(ctx, func() { rt.Close(0) })
	defer stop()
	var loadErr error
	var args []lua.LValue
	err = rt.Do(func(L *lua.LState) error {
		if err := installTestTime(L, v); err != nil {
			return err
		}
		chunk, err := L.LoadFile(path)
		if err != nil {
			loadErr = err
			return nil
		}
		args = []lua.LValue{chunk,
			L.NewFunction(func(L *lua.LState) int { fmt.Fprintln(out, L.CheckString(1)); return 0 }),
			L.NewFunction(s.call),
			L.NewFunction(s.report),
			L.NewFunction(func(L *lua.LState) int { return 0 }),
		}
		return nil
	})
	if err == nil && loadErr != nil {
		// A syntax error: the message says where; there is no stack to show.
		sink.fileFailed(path, strings.TrimSpace(loadErr.Error()))
		s.failed.Add(1)
	} else if err == nil {
		err = rt.RunString(runner, "<shield>/spec-runner", args...)
	}
	interrupted := ctx.Err() != nil
	if err != nil && !interrupted {
		sink.fileFailed(path, err.Error())
		s.failed.Add(1)
	}
	// Tasks the file left behind are stopped now, not after a grace period.
	_ = rt.Do(func(*lua.LState) error {
		// A test reported ok whose spawned task raised later is a failure
		// after all.
		for _, f := range s.late {
			sink.late(f.test, f.text)
			if s.outcome[f.test] == "ok" {
				s.outcome[f.test] = "fail"
				s.passed.Add(-1)
				s.failed.Add(1)
			}
		}
		return nil
	})
	rt.Close(0)
	r := SpecResult{Passed: int(s.passed.Load()), Failed: int(s.failed.Load()), Skipped: int(s.skipped.Load()), Interrupted: interrupted}
	sink.endFile(path, r)
	return r
}

// report(kind, name [, text]): one result of the file.
func (s *specRun) report(L *lua.LState) int {
	kind, name := L.CheckString(1), L.CheckString(2)
	s.outcome[name] = kind
	now := time.Now()
	s.sink.result(kind, name, L.OptString(3, ""), now.Sub(s.last))
	s.last = now
	switch kind {
	case "ok":
		s.passed.Add(1)
	case "fail":
		s.failed.Add(1)
	case "pending":
		s.skipped.Add(1)
	}
	return 0
}

// call(fn, name) -> true | false, err: runs fn as a task of its own group,
// bounded by the timeout. A task it spawned that raised meanwhile fails it;
// one that raises later is reported when the file ends.
func (s *specRun) call(L *lua.LState) int {
	fn := L.CheckFunction(1)
	name := L.OptString(2, "test")
	rt := s.rt
	return rt.Suspend(L, "shield.spec", func(complete func(bindings.Result)) {
		var spawned []*bindings.TaskError
		over := false
		g := &bindings.Group{Inherited: true, OnError: func(err *bindings.TaskError) {
			if !over {
				spawned = append(spawned, err)
				return
			}
			s.late = append(s.late, lateFailure{test: name, text: err.Error()})
		}}
		var timedOut atomic.Bool
		timer := time.AfterFunc(s.opts.Timeout, func() {
			timedOut.Store(true)
			rt.InterruptGroup(g) // the test and the tasks it spawned
		})
		rt.SpawnIn(g, name, fn, nil, func(err error) {
			timer.Stop()
			over = true
			complete(func() ([]lua.LValue, error) {
				var te *bindings.TaskError
				switch {
				case timedOut.Load() && errors.As(err, &te):
					return []lua.LValue{lua.LFalse, failure(rt.L, fmt.Sprintf("timed out after %v (%s)", s.opts.Timeout, te.Message), te.Traceback)}, nil
				case errors.As(err, &te):
					if te.Value != nil && te.Value.Type() == lua.LTTable {
						return []lua.LValue{lua.LFalse, te.Value}, nil // pending() markers, error objects
					}
					return []lua.LValue{lua.LFalse, failure(rt.L, te.Message, te.Traceback)}, nil
				case err != nil:
					return []lua.LValue{lua.LFalse, lua.LString(err.Error())}, nil
				case len(spawned) > 0:
					return []lua.LValue{lua.LFalse, failure(rt.L, "a task spawned by the test failed: "+spawned[0].Message, spawned[0].Traceback)}, nil
				}
				return []lua.LValue{lua.LTrue}, nil
			})
		})
	})
}

// failure is an error value shield.spec prints with its traceback.
func failure(L *lua.LState, msg, tb string) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("message", lua.LString(msg))
	if tb != "" {
		t.RawSetString("traceback", lua.LString(tb))
	}
	return t
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n    ") }

func specFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, "_spec.lua") {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	return files, nil
}
