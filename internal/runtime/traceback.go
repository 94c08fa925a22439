package runtime

import (
	"fmt"
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// traceback renders L's Lua stack like debug.traceback, leaving out the
// runtime's own frames.
func traceback(L *lua.LState) string {
	frames := stackFrames(L)
	var b strings.Builder
	b.WriteString("stack traceback:")
	for i, dbg := range frames {
		calledByRuntime := i+1 < len(frames) && isRuntimeSource(frames[i+1].Source)
		if isRuntimeSource(dbg.Source) || (dbg.What == "G" && calledByRuntime) {
			continue
		}
		b.WriteString("\n\t")
		if dbg.What == "G" {
			b.WriteString("[G]: in ")
		} else {
			b.WriteString(dbg.Source)
			if dbg.CurrentLine > 0 {
				b.WriteString(":" + itoa(dbg.CurrentLine))
			}
			b.WriteString(": in ")
		}
		// A function the runtime called (a task body, a callback) has only the
		// runtime's name for it: show where it was defined instead.
		switch {
		case dbg.What != "G" && dbg.LineDefined == 0:
			b.WriteString("main chunk")
		case dbg.Name != "" && !calledByRuntime:
			b.WriteString("function '" + dbg.Name + "'")
		default:
			b.WriteString("function <" + dbg.Source + ":" + itoa(dbg.LineDefined) + ">")
		}
	}
	return b.String()
}

// maxTraceLevels bounds the levels a traceback shows (a runaway recursion
// stops at CallStackSize frames; its first levels say where).
const maxTraceLevels = 200

// stackFrames returns L's stack, innermost first, up to maxTraceLevels.
//
// gopher-lua counts every tail call its frames made as a level of their own,
// and a pooled task thread's body (the prelude's loop) tail-calls itself
// once per task it has run: past the real frames, GetStack answers each of
// those levels with the bottom frame again. A thread that had run 200 000
// tasks made one failing task's traceback walk 200 000 levels. The walk
// stops at the first runtime frame that repeats the one before it.
func stackFrames(L *lua.LState) []*lua.Debug {
	var frames []*lua.Debug
	for level := 0; level < maxTraceLevels; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			break
		}
		if _, err := L.GetInfo("Sln", dbg, lua.LNil); err != nil {
			break
		}
		if n := len(frames); n > 0 && isRuntimeSource(dbg.Source) && sameFrame(frames[n-1], dbg) {
			break
		}
		frames = append(frames, dbg)
	}
	return frames
}

func sameFrame(a, b *lua.Debug) bool {
	return a.Source == b.Source && a.CurrentLine == b.CurrentLine && a.LineDefined == b.LineDefined && a.What == b.What
}

// describeTable renders a table's fields for an error message, one level
// deep and sorted: {code = 1, reason = "busy"}.
func describeTable(t *lua.LTable) string {
	var parts []string
	t.ForEach(func(k, v lua.LValue) {
		if len(parts) > 20 {
			return
		}
		key := k.String()
		if ks, ok := k.(lua.LString); !ok || !isIdent(string(ks)) {
			key = "[" + quote(k) + "]"
		}
		parts = append(parts, key+" = "+quote(v))
	})
	sort.Strings(parts)
	if len(parts) > 20 {
		parts = append(parts[:20], "...")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func quote(v lua.LValue) string {
	if s, ok := v.(lua.LString); ok {
		return fmt.Sprintf("%q", string(s))
	}
	return v.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
