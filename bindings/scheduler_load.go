package bindings

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/scheduler"
	"github.com/shieldrt/shieldglobal/internal/runtime"
	shieldlua "github.com/shieldrt/shieldglobal/lua/shield"
)

// Task files (seed 001's annotation-driven registration, in Lua form):
// scheduler:load(dir [, opts]) runs every *.lua file of dir (or of each
// directory of a list; of their trees with opts.recursive; leaving out
// what the globs of opts.skip match), in path order, each returning
//
//	{ name = "clean_logs", expression = "daily:03:00", handle = function(info) ... end, distributed = true, ... }
//
// (expression in scheduler:add's formats; any task option beside), checks
// them all, then registers them. Errors name the file; nothing is
// registered when a file is wrong.

// loadChunk is the Lua half of load: prepare (Go) reads and checks the
// files; register (Go, may block) registers one prepared task. It is a
// runtime chunk, so errors point at the script's load call.
const loadChunk = `
local prepare, register = ...
return function(self, dir, opts)
	local specs = prepare(self, dir, opts)
	local names = {}
	for i = 1, #specs do
		names[i] = register(self, specs[i]):name()
	end
	return names
end
`

// taskFile is one checked task file.
type taskFile struct {
	file     string
	name     string
	schedule scheduler.Schedule
	handle   *lua.LFunction
	opts     taskOpts
}

// loader builds scheduler:load.
func (b *schedBinding) loader() lua.LValue {
	L := b.rt.L
	fn, err := L.Load(strings.NewReader(loadChunk), shieldlua.ChunkPrefix+"scheduler_load.lua")
	if err != nil {
		panic("shield: scheduler load chunk: " + err.Error())
	}
	L.Push(fn)
	L.Push(L.NewFunction(b.prepareFiles))
	L.Push(b.rt.Blocking(b.registerFile))
	L.Call(2, 1)
	v := L.Get(-1)
	L.Pop(1)
	return v
}

// prepareFiles(self, dir [, opts]) -> { taskFile userdata, ... }. dir is
// a directory or a list of them; opts: recursive (bool), skip (a glob or a
// list of globs, matched against each entry's name and its path under the
// directory).
func (b *schedBinding) prepareFiles(L *lua.LState) int {
	a := b.args(L, "load")
	var dirs []string
	if t, ok := L.Get(2).(*lua.LTable); ok {
		for i := 1; i <= t.Len(); i++ {
			d, ok := t.RawGetInt(i).(lua.LString)
			if !ok || d == "" {
				a.Bad(2, fmt.Sprintf("directory #%d must be a non-empty string, got %s", i, describeValue(t.RawGetInt(i))))
			}
			dirs = append(dirs, string(d))
		}
		if len(dirs) == 0 {
			a.Bad(2, "no directory given")
		}
	} else {
		dirs = []string{a.Name(2, "directory")}
	}
	lo := readLoadOptions(a)
	var files []string
	for _, dir := range dirs {
		fs, err := lo.taskFiles(dir)
		if err != nil {
			a.Fail("%v", err)
		}
		files = append(files, fs...)
	}
	out := L.CreateTable(len(files), 0)
	seen := map[string]string{}
	for i, f := range files {
		tf := b.readTaskFile(L, a, f)
		if prev, dup := seen[tf.name]; dup {
			a.Fail("%s: task %q is also defined in %s", f, tf.name, prev)
		}
		seen[tf.name] = f
		ud := L.NewUserData()
		ud.Value = tf
		out.RawSetInt(i+1, ud)
	}
	L.Push(out)
	return 1
}

// loadOpts are load's options.
type loadOpts struct {
	recursive bool
	skip      []string
}

var loadOptions = runtime.NewOptSpec(
	runtime.Opt{Name: "recursive", Kind: runtime.OptBoolean},
	runtime.Opt{Name: "skip", Kind: runtime.OptAny}, // a glob or a list of globs
)

// readLoadOptions reads load's options table (argument #3, optional).
func readLoadOptions(a runtime.Args) loadOpts {
	var lo loadOpts
	a.Options(3, loadOptions, func(key string, v lua.LValue) {
		if key == "recursive" {
			lo.recursive = v == lua.LTrue
			return
		}
		var pats []lua.LValue
		if list, ok := v.(*lua.LTable); ok {
			for i := 1; i <= list.Len(); i++ {
				pats = append(pats, list.RawGetInt(i))
			}
		} else {
			pats = []lua.LValue{v}
		}
		for _, p := range pats {
			ps, ok := p.(lua.LString)
			if !ok {
				a.BadOption(3, key, "must be a glob or a list of globs, got %s", describeValue(p))
			}
			if _, err := path.Match(string(ps), ""); err != nil {
				a.BadOption(3, key, "%q: %v", string(ps), err)
			}
			lo.skip = append(lo.skip, string(ps))
		}
	})
	return lo
}

// skipped reports whether the entry at rel (slash-separated, under the
// loaded directory) matches a skip pattern, by its name or its path.
func (lo loadOpts) skipped(rel string) bool {
	for _, p := range lo.skip {
		if ok, _ := path.Match(p, path.Base(rel)); ok {
			return true
		}
		if ok, _ := path.Match(p, rel); ok {
			return true
		}
	}
	return false
}

// taskFiles lists the *.lua files of dir (of its tree, if recursive), in
// lexical path order, leaving out what a skip pattern matches (a skipped
// directory is not entered).
func (lo loadOpts) taskFiles(dir string) ([]string, error) {
	if st, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", dir)
	}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if !lo.recursive || lo.skipped(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".lua") && !lo.skipped(rel) {
			files = append(files, p)
		}
		return nil
	})
	return files, err
}

// readTaskFile runs one task file and checks what it returns.
func (b *schedBinding) readTaskFile(L *lua.LState, a runtime.Args, file string) *taskFile {
	bad := func(format string, v ...any) { a.Fail("%s: %s", file, fmt.Sprintf(format, v...)) }
	chunk, err := L.LoadFile(file)
	if err != nil {
		bad("%v", err)
	}
	L.Push(chunk)
	if err := L.PCall(0, 1, nil); err != nil {
		bad("%v", runtime.ErrorMessage(L, err))
	}
	ret := L.Get(-1)
	L.Pop(1)
	t, ok := ret.(*lua.LTable)
	if !ok {
		bad("must return a table { name = ..., expression = ..., handle = function ... }, got %s", ret.Type())
	}
	tf := &taskFile{file: file}
	name, ok := t.RawGetString("name").(lua.LString)
	if !ok || name == "" || name[0] == '}' {
		bad("name must be a non-empty string not starting with '}', got %s", describeValue(t.RawGetString("name")))
	}
	tf.name = string(name)
	expr, ok := t.RawGetString("expression").(lua.LString)
	if !ok {
		bad("expression must be a string (every:60, daily:03:00, cron:*/5 * * * *, ...), got %s", describeValue(t.RawGetString("expression")))
	}
	if tf.schedule, err = scheduler.Parse(string(expr)); err != nil {
		bad("%s", invalidText(err))
	}
	if tf.handle, ok = t.RawGetString("handle").(*lua.LFunction); !ok {
		bad("handle must be a function, got %s", t.RawGetString("handle").Type())
	}
	tf.opts = parseTaskOpts(b.s.Engine.DefaultOptions(), t, taskFileOptions, func(msg string) { bad("%s", msg) })
	return tf
}

// registerFile(self, taskFile) -> name.
func (b *schedBinding) registerFile(L *lua.LState) int {
	a := b.args(L, "load")
	var tf *taskFile
	if ud, ok := L.Get(2).(*lua.LUserData); ok {
		tf, _ = ud.Value.(*taskFile)
	}
	if tf == nil {
		a.Bad(2, "task file expected")
	}
	return b.registerTask(L, "load", tf.name, tf.schedule, tf.handle, tf.opts, func(err error) error {
		return fmt.Errorf("%s: %w", tf.file, err)
	})
}
