package shieldglobal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// SpecResult counts the outcomes of spec files.
type SpecResult struct {
	Passed, Failed, Skipped int
}

// runner loads one spec file in a task and runs it with shield.spec; report
// is a Go function that receives the counts.
const runner = `
local path, write, report = ...
local spec = require("shield.spec")
spec.install(_G)
local chunk, err = loadfile(path)
if not chunk then error(err, 0) end
chunk()
report(spec.run(write))
`

// RunSpecs runs busted-style *_spec.lua files (paths may be directories,
// searched recursively) on this module, each file in a fresh Lua state, and
// writes one line per test and a summary line per file to out. A file that
// fails to load counts as one failure.
func (m *Module) RunSpecs(paths []string, out io.Writer) (SpecResult, error) {
	files, err := specFiles(paths)
	if err != nil {
		return SpecResult{}, err
	}
	var total SpecResult
	for _, f := range files {
		fmt.Fprintf(out, "# %s\n", f)
		r, err := m.runSpecFile(f, out)
		if err != nil {
			fmt.Fprintf(out, "FAIL - %s\n    %s\n", f, strings.ReplaceAll(err.Error(), "\n", "\n    "))
			r.Failed++
		}
		total.Passed += r.Passed
		total.Failed += r.Failed
		total.Skipped += r.Skipped
	}
	return total, nil
}

func (m *Module) runSpecFile(path string, out io.Writer) (SpecResult, error) {
	L := lua.NewState()
	defer L.Close()
	rt, err := m.NewRuntime(L)
	if err != nil {
		return SpecResult{}, err
	}
	defer rt.Close(5 * time.Second)
	var r SpecResult
	reported := false
	write := L.NewFunction(func(L *lua.LState) int {
		fmt.Fprintln(out, L.CheckString(1))
		return 0
	})
	report := L.NewFunction(func(L *lua.LState) int {
		r = SpecResult{Passed: L.CheckInt(1), Failed: L.CheckInt(2), Skipped: L.OptInt(3, 0)}
		reported = true
		return 0
	})
	err = rt.RunString(runner, "<shield>/spec-runner", lua.LString(path), write, report)
	if err == nil && !reported {
		err = errors.New("the spec runner did not report")
	}
	return r, err
}

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
