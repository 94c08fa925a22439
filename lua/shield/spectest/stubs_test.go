package spectest

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Every global spec.install defines, every spy method and every field of
// the doubles' modules is annotated in the LuaLS stubs (spec_globals.d.lua,
// spec.d.lua), so an editor knows what a spec file may call.
func TestLuaLSStubsCoverTheRunner(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	globals, types := read("spec_globals.d.lua"), read("spec.d.lua")
	h := newHarness(t, options{pcallAfterLoad: true})
	names := func(expr string) []string {
		list := h.eval(`(function() local t = {} for k in pairs(` + expr + `) do t[#t + 1] = tostring(k) end return table.concat(t, " ") end)()`)
		out := strings.Fields(list)
		sort.Strings(out)
		return out
	}
	for _, g := range names(`spec.install({})`) {
		if !regexp.MustCompile(`(?m)^(function ` + g + `\(|` + g + ` = nil$)`).MatchString(globals) {
			t.Errorf("spec_globals.d.lua does not declare the global %s", g)
		}
	}
	check := func(expr, prefix string) {
		for _, f := range names(expr) {
			if strings.HasPrefix(f, "_") { // metamethods, internal fields
				continue
			}
			if !strings.Contains(types, prefix+f+"(") && !strings.Contains(types, "@field "+f+" ") {
				t.Errorf("spec.d.lua does not annotate %s%s", prefix, f)
			}
		}
	}
	check(`getmetatable(spy.new())`, "spy_obj:")
	check(`spy`, "spy_module.")
	check(`stub`, "stub_module.")
	check(`mock`, "mock_module.")
	check(`spy.new()`, "spy_obj.") // instance fields
	check(`stub.new()`, "stub.")
}
