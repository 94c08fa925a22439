package shieldglobal

import (
	"errors"
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportRules checks the import rules of docs/architecture.md ("What
// may import what") on the non-test files of every package of the module.
func TestImportRules(t *testing.T) {
	const mod = "github.com/shieldrt/shieldglobal"
	const gopherLua = "github.com/yuin/gopher-lua"
	imports := map[string][]string{} // package dir -> module-relative imports ("." for the root), plus gopher-lua
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bench" || name == "node_modules") {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(path, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil
		}
		if err != nil {
			return err
		}
		var list []string
		for _, imp := range p.Imports {
			switch {
			case imp == mod:
				list = append(list, ".")
			case strings.HasPrefix(imp, mod+"/"):
				list = append(list, strings.TrimPrefix(imp, mod+"/"))
			case imp == gopherLua:
				list = append(list, imp)
			}
		}
		imports[filepath.ToSlash(path)] = list
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	under := func(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }
	for pkg, list := range imports {
		for _, imp := range list {
			var broken string
			switch {
			case imp == "." && !under(pkg, "cmd") && !under(pkg, "examples"):
				broken = "only cmd/ and examples/ import the root package"
			case under(pkg, "core") && imp == gopherLua && pkg != "core/codec":
				broken = "core/ is pure Go: no Lua (but core/codec, the Lua value wire format)"
			case under(pkg, "core") && (imp == "." || under(imp, "bindings") || under(imp, "internal/runtime") || under(imp, "ops") || under(imp, "lua") || under(imp, "cmd")):
				broken = "core/ imports neither bindings, internal/runtime, ops, lua/ nor the root package"
			case under(pkg, "core") && imp == "config":
				broken = "core/ takes options, not the config: internal/edge turns the config into them"
			case pkg == "bindings" && (imp == "." || under(imp, "ops")):
				broken = "bindings imports neither ops nor the root package"
			case under(pkg, "internal/runtime") && imp != gopherLua && imp != "core/store" && imp != "internal/clock" && !under(imp, "lua"):
				broken = "internal/runtime imports no capability: only core/store (operations), internal/clock and lua/ (the prelude)"
			case under(pkg, "ops") && (imp == "." || under(imp, "bindings")):
				broken = "ops imports neither bindings nor the root package"
			case (pkg == "config" || pkg == "core/codec" || pkg == "core/lock/local" || under(pkg, "lua")) && imp != gopherLua:
				broken = "imports nothing of the module"
			case under(pkg, "internal") && (imp == "." || under(imp, "bindings") || under(imp, "ops") || under(imp, "cmd")):
				broken = "internal/ imports neither the root package, bindings nor ops"
			}
			if broken != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, broken)
			}
		}
	}
	if !slices.Contains(imports["bindings"], "internal/runtime") {
		t.Errorf("bindings does not import internal/runtime: the capability glue runs on the runtime package")
	}
	if len(imports["bindings"]) == 0 || len(imports["core/queue"]) == 0 || len(imports["internal/runtime"]) == 0 {
		t.Fatalf("walked too little: %v", imports)
	}
}
