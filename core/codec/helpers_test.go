package codec

import (
	"fmt"
	"math"

	lua "github.com/yuin/gopher-lua"
)

// lv converts a Go test literal to a Lua value.
func lv(x any) lua.LValue {
	switch x := x.(type) {
	case nil:
		return lua.LNil
	case lua.LValue:
		return x
	case string:
		return lua.LString(x)
	case int:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	case bool:
		return lua.LBool(x)
	}
	panic(fmt.Sprintf("lv: unsupported %T", x))
}

// tbl builds a table from alternating keys and values.
func tbl(kv ...any) *lua.LTable {
	t := newTable()
	for i := 0; i < len(kv); i += 2 {
		t.RawSet(lv(kv[i]), lv(kv[i+1]))
	}
	return t
}

// arr builds a sequence {v1, v2, ...}.
func arr(vs ...any) *lua.LTable {
	t := newTable()
	for i, v := range vs {
		t.RawSetInt(i+1, lv(v))
	}
	return t
}

// deepEqual compares two acyclic Lua values key by key with exact types.
// It returns "" if equal, else a description of the first difference.
func deepEqual(a, b lua.LValue) string { return deepEqualAt(a, b, "$", 0) }

func deepEqualAt(a, b lua.LValue, path string, depth int) string {
	if depth > 1000 {
		return path + ": too deep (cycle?)"
	}
	if a == nil {
		a = lua.LNil
	}
	if b == nil {
		b = lua.LNil
	}
	if a.Type() != b.Type() {
		return fmt.Sprintf("%s: type %s != %s (%q vs %q)", path, a.Type(), b.Type(), a.String(), b.String())
	}
	switch x := a.(type) {
	case *lua.LNilType:
		return ""
	case lua.LBool:
		if x != b.(lua.LBool) {
			return fmt.Sprintf("%s: %v != %v", path, x, b)
		}
	case lua.LNumber:
		y := b.(lua.LNumber)
		if x != y && !(math.IsNaN(float64(x)) && math.IsNaN(float64(y))) {
			return fmt.Sprintf("%s: number %v != %v", path, float64(x), float64(y))
		}
	case lua.LString:
		if x != b.(lua.LString) {
			return fmt.Sprintf("%s: string %q != %q", path, string(x), string(b.(lua.LString)))
		}
	case *lua.LTable:
		y := b.(*lua.LTable)
		na, nb := 0, 0
		diff := ""
		x.ForEach(func(k, v lua.LValue) {
			na++
			if diff != "" {
				return
			}
			kp := fmt.Sprintf("%s[%s %q]", path, k.Type(), k.String())
			w := y.RawGet(k)
			if w == lua.LNil {
				diff = kp + ": missing in second table"
				return
			}
			// RawGet looks keys up by dynamic type and value, so the string
			// "1" and the number 1 are distinct keys here.
			diff = deepEqualAt(v, w, kp, depth+1)
		})
		if diff != "" {
			return diff
		}
		y.ForEach(func(_, _ lua.LValue) { nb++ })
		if na != nb {
			return fmt.Sprintf("%s: %d entries != %d entries", path, na, nb)
		}
	default:
		if a != b {
			return fmt.Sprintf("%s: %v != %v", path, a, b)
		}
	}
	return ""
}
