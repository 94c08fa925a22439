package bindings

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/scheduler"
	shieldlua "github.com/shieldrt/shieldglobal/lua/shield"
)

// Task files (seed 001's annotation-driven registration, in Lua form):
// scheduler:load(dir) runs every *.lua file of dir, in name order, each
// returning
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
return function(self, dir)
	local specs = prepare(self, dir)
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
	L.Push(b.rt.blocking(b.registerFile))
	L.Call(2, 1)
	v := L.Get(-1)
	L.Pop(1)
	return v
}

var taskFileKeys = map[string]bool{"name": true, "expression": true, "handle": true}

// prepareFiles(self, dir) -> { taskFile userdata, ... }.
func (b *schedBinding) prepareFiles(L *lua.LState) int {
	a := b.args(L, "load")
	dir := a.name(2, "directory")
	entries, err := os.ReadDir(dir)
	if err != nil {
		a.fail("%v", err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".lua") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(files)
	out := L.CreateTable(len(files), 0)
	seen := map[string]string{}
	for i, f := range files {
		tf := b.readTaskFile(L, a, f)
		if prev, dup := seen[tf.name]; dup {
			a.fail("%s: task %q is also defined in %s", f, tf.name, prev)
		}
		seen[tf.name] = f
		ud := L.NewUserData()
		ud.Value = tf
		out.RawSetInt(i+1, ud)
	}
	L.Push(out)
	return 1
}

// readTaskFile runs one task file and checks what it returns.
func (b *schedBinding) readTaskFile(L *lua.LState, a args, file string) *taskFile {
	bad := func(format string, v ...any) { a.fail("%s: %s", file, fmt.Sprintf(format, v...)) }
	chunk, err := L.LoadFile(file)
	if err != nil {
		bad("%v", err)
	}
	L.Push(chunk)
	if err := L.PCall(0, 1, nil); err != nil {
		bad("%v", errorText(L, errorValue(err)))
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
	tf.opts = parseTaskOpts(b.s.Engine.DefaultOptions(), t, taskFileKeys, func(msg string) { bad("%s", msg) })
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
		a.bad(2, "task file expected")
	}
	return b.registerTask(L, "load", tf.name, tf.schedule, tf.handle, tf.opts, func(err error) error {
		return fmt.Errorf("%s: %w", tf.file, err)
	})
}
