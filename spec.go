package shieldglobal

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/pm"

	"github.com/shieldrt/shieldglobal/internal/runtime"
	shieldlua "github.com/shieldrt/shieldglobal/lua/shield"
)

// SpecResult counts the outcomes of spec files. Failed counts assertions
// that did not hold, Errors every other error (a runtime error, a timeout,
// a file that does not load, the test Ctrl-C interrupted), as busted does.
// Interrupted is true when RunSpecs stopped early because its context ended.
type SpecResult struct {
	Passed, Failed, Errors, Skipped int
	Interrupted                     bool
}

func (r *SpecResult) add(o SpecResult) {
	r.Passed += o.Passed
	r.Failed += o.Failed
	r.Errors += o.Errors
	r.Skipped += o.Skipped
	r.Interrupted = r.Interrupted || o.Interrupted
}

// SpecOptions configure RunSpecs. The selection options have busted's
// meanings (`shield test --help`, docs/testing.md).
type SpecOptions struct {
	// Timeout bounds each test body and hook (before_each, setup, ...): a
	// test still running after it is an error, interrupted at its current
	// line (also when it never yields). Default 10 s.
	Timeout time.Duration
	// Format is the output: SpecHuman (default), SpecTAP, SpecJUnit or
	// SpecJSON.
	Format string
	// Pattern: Lua patterns; a file found in a directory runs when its
	// base name matches one of them (default "_spec"); a file named
	// explicitly always runs.
	Pattern []string
	// Filter and FilterOut: Lua patterns matched against a test's full
	// name (its describes' names and its own, space separated): only tests
	// matching one of Filter run, none matching one of FilterOut does.
	Filter, FilterOut []string
	// Tags and ExcludeTags: only tests whose full name has one of Tags as
	// "#tag" run; none with one of ExcludeTags does.
	Tags, ExcludeTags []string
	// Shuffle runs the files, and the tests of each block, in an order
	// drawn from Seed (the same seed, the same order).
	Shuffle bool
	Seed    int64
	// Repeat runs everything that many times (default once).
	Repeat int
	// List writes "file:line: full name" for each selected test instead of
	// running them.
	List bool
	// VirtualTime runs every file in virtual time, as the first line
	// "--!virtual-time" does for one file (vtime.go, docs/testing.md): on a
	// module of its own on the memory backend whose clock jumps to the next
	// timer whenever every task waits. Timeout stays real time.
	VirtualTime bool
}

// DefaultSpecTimeout is SpecOptions.Timeout when it is zero.
const DefaultSpecTimeout = 10 * time.Second

// DefaultSpecPattern is busted's default file pattern.
const DefaultSpecPattern = "_spec"

// runner loads one spec file in a task and runs it with shield.spec; opts
// carries call (runs each test body and hook), report (told each result)
// and the selection; finish receives the counts.
const runner = `
local chunk, write, opts, finish = ...
local spec = require("shield.spec")
spec.install(_G)
chunk()
finish(spec.run(write, opts))
`

// RunSpecs runs busted-style spec files (paths may be directories,
// searched recursively for .lua files matching opts.Pattern) on this
// module, each file in a fresh Lua state, and writes the results to out in
// opts.Format: by default one line per test, a summary line per file and
// the total last. A file that fails to load counts as one error. Errors: a
// path that does not exist, an unknown format, a bad pattern.
//
// Each test body and hook runs as a task of its own, bounded by
// opts.Timeout; a task it spawns that raises fails the test (or, once the
// test is over, is reported as a failure of it before the file's summary).
// Tasks a file leaves running are interrupted when it ends, without a grace
// period. When ctx ends, the running file is stopped, the test it was
// running is reported as interrupted (an error) and the results so far are
// returned with Interrupted set.
func (m *Module) RunSpecs(ctx context.Context, paths []string, out io.Writer, opts SpecOptions) (SpecResult, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultSpecTimeout
	}
	if opts.VirtualTime && m.backend == BackendRedis {
		return SpecResult{}, ErrVirtualTimeRedis
	}
	if opts.Repeat <= 0 {
		opts.Repeat = 1
	}
	if len(opts.Pattern) == 0 {
		opts.Pattern = []string{DefaultSpecPattern}
	}
	if opts.List {
		opts.Format = specList
	}
	sink, err := newSpecSink(opts.Format, out)
	if err != nil {
		return SpecResult{}, err
	}
	files, err := specFiles(paths, opts.Pattern)
	if err != nil {
		return SpecResult{}, err
	}
	var total SpecResult
	defer func() { sink.end(total) }()
	if len(files) == 0 {
		// busted reports this as an error too: a typo in --pattern or a
		// path must not look like a green run.
		sink.fileFailed(strings.Join(paths, " "), fmt.Sprintf("no test files match --pattern %s", strings.Join(opts.Pattern, ", ")))
		total.Errors++
		return total, nil
	}
	for run := 1; run <= opts.Repeat; run++ {
		order := files
		if opts.Shuffle {
			order = append([]string(nil), files...)
			r := rand.New(rand.NewPCG(uint64(opts.Seed), uint64(run)))
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		if opts.Repeat > 1 {
			sink.repeat(run, opts.Repeat)
		}
		for _, f := range order {
			if ctx.Err() != nil {
				total.Interrupted = true
				return total, nil
			}
			sink.file(f)
			r := m.runSpecFile(ctx, f, sink, opts, run)
			total.add(r)
			if r.Interrupted {
				return total, nil
			}
		}
	}
	return total, nil
}

// specRun is the state of one spec file's run. Loop only, except counts.
type specRun struct {
	rt   *Runtime
	ctx  context.Context
	path string
	sink specSink
	opts SpecOptions
	last time.Time // of the previous result, for each test's duration
	// Counted as results arrive, so an interrupted file still reports.
	passed, failed, errors, skipped atomic.Int32
	late                            []lateFailure          // failures of tasks whose test was over
	outcome                         map[string]string      // test name -> "ok", "fail", "error", "pending"
	running                         atomic.Pointer[string] // the test (or hook) being run, for Ctrl-C
}

// lateFailure is a spawned task that raised after its test was reported.
type lateFailure struct{ test, text string }

func (m *Module) runSpecFile(ctx context.Context, path string, sink specSink, opts SpecOptions, run int) SpecResult {
	L := lua.NewState(StateOptions())
	defer L.Close()
	mod := m
	var v *vtime // nil: real time
	if opts.VirtualTime || wantsVirtualTime(path) {
		var err error
		if v, err = m.newVirtualModule(); err != nil {
			sink.fileFailed(path, err.Error())
			r := SpecResult{Errors: 1}
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
		r := SpecResult{Errors: 1}
		sink.endFile(path, r)
		return r
	}
	s := &specRun{rt: rt, ctx: ctx, path: path, sink: sink, opts: opts, outcome: map[string]string{}, last: time.Now()}
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
			s.luaOptions(L, run),
			L.NewFunction(func(L *lua.LState) int { return 0 }),
		}
		return nil
	})
	if err == nil && loadErr != nil {
		// A syntax error: the message says where; there is no stack to show.
		sink.fileFailed(path, strings.TrimSpace(loadErr.Error()))
		s.errors.Add(1)
	} else if err == nil {
		err = rt.RunString(runner, "<shield>/spec-runner", args...)
	}
	interrupted := ctx.Err() != nil
	if err != nil && !interrupted {
		sink.fileFailed(path, err.Error())
		s.errors.Add(1)
	}
	if name := s.running.Load(); interrupted && name != nil {
		// The test Ctrl-C stopped is listed, so the output says where the
		// run ended.
		sink.result("interrupted", *name, "interrupted (the run was stopped while this test ran)", "", time.Since(s.last))
		s.errors.Add(1)
	}
	// Tasks the file left behind are stopped now, not after a grace period.
	_ = rt.Do(func(*lua.LState) error {
		// A test reported ok whose spawned task raised later is a failure
		// after all.
		for _, f := range s.late {
			sink.late(f.test, f.text)
			if s.outcome[f.test] == "ok" {
				s.outcome[f.test] = "error"
				s.passed.Add(-1)
				s.errors.Add(1)
			}
		}
		return nil
	})
	rt.Close(0)
	r := SpecResult{Passed: int(s.passed.Load()), Failed: int(s.failed.Load()), Errors: int(s.errors.Load()),
		Skipped: int(s.skipped.Load()), Interrupted: interrupted}
	sink.endFile(path, r)
	return r
}

// luaOptions is the opts table of spec.run for this file.
func (s *specRun) luaOptions(L *lua.LState, run int) *lua.LTable {
	o := L.NewTable()
	o.RawSetString("call", L.NewFunction(s.call))
	o.RawSetString("report", L.NewFunction(s.report))
	o.RawSetString("summary", lua.LFalse)
	list := func(key string, vals []string) {
		t := L.NewTable()
		for _, v := range vals {
			t.Append(lua.LString(v))
		}
		o.RawSetString(key, t)
	}
	list("filter", s.opts.Filter)
	list("filter_out", s.opts.FilterOut)
	list("tags", s.opts.Tags)
	list("exclude_tags", s.opts.ExcludeTags)
	if s.opts.List {
		o.RawSetString("list", lua.LTrue)
	}
	if s.opts.Shuffle {
		// One stream per file and run, so a file's order does not depend
		// on which files ran before it.
		h := fnv.New64a()
		io.WriteString(h, s.path)
		r := rand.New(rand.NewPCG(uint64(s.opts.Seed), h.Sum64()+uint64(run)))
		o.RawSetString("rand", L.NewFunction(func(L *lua.LState) int {
			L.Push(lua.LNumber(1 + r.IntN(L.CheckInt(1))))
			return 1
		}))
	}
	return o
}

// report(kind, name [, text [, pos]]): one result of the file; pos is the
// "file:line" of the test's it().
func (s *specRun) report(L *lua.LState) int {
	kind, name := L.CheckString(1), L.CheckString(2)
	text, pos := L.OptString(3, ""), L.OptString(4, "")
	s.running.Store(nil)
	s.outcome[name] = kind
	now := time.Now()
	s.sink.result(kind, name, text, pos, now.Sub(s.last))
	s.last = now
	switch kind {
	case "ok":
		s.passed.Add(1)
	case "fail":
		s.failed.Add(1)
	case "error":
		s.errors.Add(1)
	case "pending":
		s.skipped.Add(1)
	}
	return 0
}

// callWrapper runs a test body after telling Go which coroutine runs it
// (mark is a Go function, so it receives that coroutine's state).
const callWrapper = `local mark, fn = ...
mark()
return fn()`

// call(fn, name) -> true | false, err [, traceback]: runs fn as a task of
// its own group, bounded by the timeout. A task it spawned that raised
// meanwhile fails it; one that raises later is reported when the file ends.
// The traceback comes with an error value that carries none (a table).
func (s *specRun) call(L *lua.LState) int {
	fn := L.CheckFunction(1)
	name := L.OptString(2, "test")
	rt := s.rt.rt // the internal runtime: the spec runner drives tasks itself
	s.running.Store(&name)
	wrapper, err := L.Load(strings.NewReader(callWrapper), "<shield>/spec-call")
	if err != nil {
		L.RaiseError("%v", err)
	}
	var co *lua.LState // the test's coroutine; loop only
	mark := L.NewFunction(func(L *lua.LState) int { co = L; return 0 })
	return rt.Block(L, "shield.spec", func(w *runtime.Wait) func() {
		var spawned []*runtime.TaskError
		over := false
		g := &runtime.Group{Inherited: true, OnError: func(err *runtime.TaskError) {
			if !over {
				spawned = append(spawned, err)
				return
			}
			s.late = append(s.late, lateFailure{test: name, text: err.Error()})
		}}
		var timedOut atomic.Bool
		var parkedAt, parkedTB string // where the test waited when it timed out
		timer := time.AfterFunc(s.opts.Timeout, func() {
			timedOut.Store(true)
			// A test waiting in a blocking call has no Lua error of its own
			// to say where it was: read its stack on the loop first.
			rt.Post(func() {
				if !over && co != nil {
					parkedAt, parkedTB = userFrames(co)
				}
			})
			rt.InterruptGroup(g) // the test and the tasks it spawned
		})
		rt.SpawnIn(g, name, wrapper, []lua.LValue{mark, fn}, func(err error) {
			timer.Stop()
			over = true
			if s.ctx.Err() == nil {
				s.running.Store(nil) // not what Ctrl-C stops, unless it ended by it
			}
			w.Complete(func() ([]lua.LValue, error) {
				var te *runtime.TaskError
				switch {
				case timedOut.Load() && errors.As(err, &te):
					// te.Message says how the runtime ended the test (an
					// interrupt), not why: the timeout is the news, and
					// where the test was.
					msg := fmt.Sprintf("timed out after %v", s.opts.Timeout)
					tb := te.Traceback
					if tb == "" {
						tb = parkedTB
					}
					at := parkedAt
					if at == "" {
						at = tracebackPos(tb)
					}
					if at != "" {
						msg = at + ": " + msg
					}
					return []lua.LValue{lua.LFalse, failure(rt.L, msg, tb)}, nil
				case errors.As(err, &te):
					if te.Value != nil && te.Value.Type() == lua.LTTable {
						// pending() markers, error objects: the value as
						// raised, its position from the traceback
						return []lua.LValue{lua.LFalse, te.Value, lua.LString(te.Traceback)}, nil
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
		return nil
	})
}

// userFrames is the position of the innermost frame of co that is the
// user's (not the runtime's embedded Lua, not a Go function) and a
// traceback of those frames.
func userFrames(co *lua.LState) (at, tb string) {
	var lines []string
	for i := 0; ; i++ {
		if _, ok := co.GetStack(i); !ok {
			break
		}
		w := strings.TrimSuffix(co.Where(i), ":")
		if w == "" || strings.HasPrefix(w, shieldlua.ChunkPrefix) || strings.HasPrefix(w, "[G]") {
			continue
		}
		if at == "" {
			at = w
		}
		lines = append(lines, "\t"+w+": in function")
	}
	if len(lines) > 0 {
		tb = "stack traceback:\n" + strings.Join(lines, "\n")
	}
	return at, tb
}

// tracebackPos is the first "file:line" of a traceback that is the
// user's.
func tracebackPos(tb string) string {
	for _, line := range strings.Split(tb, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line == "stack traceback:" || strings.HasPrefix(line, shieldlua.ChunkPrefix) ||
			strings.HasPrefix(line, "[G]") || strings.HasPrefix(line, "(") {
			continue
		}
		if file, rest, ok := strings.Cut(line, ": "); ok && rest != "" {
			if f, l := splitPos(file); f != "" && l != "" {
				return file
			}
		}
	}
	return ""
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

// specFiles lists the files to run: each path that is a file, and the .lua
// files under each directory whose base name matches one of patterns (Lua
// patterns, busted's --pattern), in sorted order. Directories whose name
// starts with a dot are skipped.
func specFiles(paths, patterns []string) ([]string, error) {
	match := func(name string) (bool, error) {
		for _, p := range patterns {
			m, err := pm.Find(p, []byte(name), 0, 1)
			if err != nil {
				return false, fmt.Errorf("bad --pattern %q: %v", p, err)
			}
			if len(m) > 0 {
				return true, nil
			}
		}
		return false, nil
	}
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
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".lua") {
				return nil
			}
			ok, err := match(d.Name())
			if ok {
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
