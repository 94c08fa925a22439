package main

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// How the REPL prints values: a value on its own as tostring does (a
// string without quotes), a table expanded as a Lua constructor, keys
// sorted, the sequence part first. A table that fits in replWidth
// characters prints on one line, a wider one one field per line, indented.
// A table met again inside itself prints as <cycle>; below replDepth levels
// a table prints as {...}. Must run on the runtime's loop (it reads tables).
const (
	replWidth = 80
	replDepth = 16
)

func formatTop(v lua.LValue) string {
	if t, ok := v.(*lua.LTable); ok {
		return formatTable(t, 0, map[*lua.LTable]bool{})
	}
	return v.String()
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var keywords = map[string]bool{"and": true, "break": true, "do": true, "else": true, "elseif": true, "end": true,
	"false": true, "for": true, "function": true, "goto": true, "if": true, "in": true, "local": true, "nil": true,
	"not": true, "or": true, "repeat": true, "return": true, "then": true, "true": true, "until": true, "while": true}

func formatValue(v lua.LValue, indent int, path map[*lua.LTable]bool) string {
	switch v := v.(type) {
	case lua.LString:
		return strconv.Quote(string(v))
	case *lua.LTable:
		return formatTable(v, indent, path)
	default:
		return v.String()
	}
}

func formatTable(t *lua.LTable, indent int, path map[*lua.LTable]bool) string {
	if path[t] {
		return "<cycle>"
	}
	if indent >= replDepth {
		return "{...}"
	}
	path[t] = true
	defer delete(path, t)
	n := 0 // the sequence part: 1..n, no nil in between (Len may stop at a later border)
	for t.RawGetInt(n+1) != lua.LNil {
		n++
	}
	var fields []string
	for i := 1; i <= n; i++ {
		fields = append(fields, formatValue(t.RawGetInt(i), indent+1, path))
	}
	type kv struct {
		key  lua.LValue
		sort string
	}
	var keys []kv
	t.ForEach(func(k, _ lua.LValue) {
		if f, ok := k.(lua.LNumber); ok && float64(f) == float64(int(f)) && int(f) >= 1 && int(f) <= n {
			return // in the sequence part
		}
		sortKey := k.Type().String() + ":" + k.String()
		if f, ok := k.(lua.LNumber); ok {
			sortKey = fmt.Sprintf("number:%020.6f", float64(f)) // numeric order for the usual keys
		}
		keys = append(keys, kv{k, sortKey})
	})
	sort.Slice(keys, func(i, j int) bool { return keys[i].sort < keys[j].sort })
	for _, k := range keys {
		var name string
		if s, ok := k.key.(lua.LString); ok && identifier.MatchString(string(s)) && !keywords[string(s)] {
			name = string(s)
		} else {
			name = "[" + formatValue(k.key, indent+1, path) + "]"
		}
		fields = append(fields, name+" = "+formatValue(t.RawGet(k.key), indent+1, path))
	}
	if len(fields) == 0 {
		return "{}"
	}
	line := "{" + strings.Join(fields, ", ") + "}"
	if len(line)+2*indent <= replWidth && !strings.Contains(line, "\n") {
		return line
	}
	pad := strings.Repeat("  ", indent+1)
	return "{\n" + pad + strings.Join(fields, ",\n"+pad) + "\n" + strings.Repeat("  ", indent) + "}"
}
