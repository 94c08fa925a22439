package runtime

import (
	"fmt"
	"reflect"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// Reading gopher-lua's call frames.
//
// Whether a blocking call may yield is decided by looking at the running
// thread's Lua call frames, which gopher-lua keeps unexported: a frame's
// caller is either a Lua function that executed OP_CALL/OP_TAILCALL (a plain
// call, across which a yield works) or something else — a Go function that
// called back into Lua (table.sort, string.gsub, require, tostring, a host's
// L.Call), or a Lua function in the middle of another instruction (a
// metamethod run for OP_GETTABLE/OP_ADD/..., a for-in iterator run by
// OP_TFORLOOP). In those cases gopher-lua started a nested VM loop, and a
// yield would corrupt the state.
//
// frame mirrors gopher-lua's callFrame. frameLayoutErr, set once at start-up,
// compares the two by reflection (field names, types and offsets); when they
// differ (another gopher-lua version) callMode refuses to yield anywhere and
// says why, so a mismatch is a clear error, never a corrupted state.
type frame struct {
	Idx        int
	Fn         *lua.LFunction
	Parent     *frame
	Pc         int
	Base       int
	LocalBase  int
	ReturnBase int
	NArgs      int
	NRet       int
	TailCall   int
}

var (
	currentFrameOffset uintptr
	frameLayoutErr     = checkFrameLayout()
)

func checkFrameLayout() error {
	f, ok := reflect.TypeFor[lua.LState]().FieldByName("currentFrame")
	if !ok || f.Type.Kind() != reflect.Pointer || f.Type.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("gopher-lua's LState has no currentFrame *callFrame field")
	}
	theirs, ours := f.Type.Elem(), reflect.TypeFor[frame]()
	if theirs.NumField() != ours.NumField() || theirs.Size() != ours.Size() {
		return fmt.Errorf("gopher-lua's callFrame has another layout (%d fields, %d bytes)", theirs.NumField(), theirs.Size())
	}
	for i := 0; i < ours.NumField(); i++ {
		t, o := theirs.Field(i), ours.Field(i)
		sameType := t.Type == o.Type || (o.Name == "Parent" && t.Type == f.Type)
		if t.Name != o.Name || t.Offset != o.Offset || !sameType {
			return fmt.Errorf("gopher-lua's callFrame field %d is %s %s at %d", i, t.Name, t.Type, t.Offset)
		}
	}
	currentFrameOffset = f.Offset
	return nil
}

// currentFrame returns the frame L is executing (a Go function's own frame
// while it runs). Only valid when frameLayoutErr is nil.
func currentFrame(L *lua.LState) *frame {
	return *(**frame)(unsafe.Add(unsafe.Pointer(L), currentFrameOffset))
}

// plainCalls reports whether every Lua frame of thread L, from its running
// Go function down to the thread's first frame, was entered by a plain call
// from a Lua function: no nested VM loop on this thread.
func plainCalls(L *lua.LState) bool {
	f := currentFrame(L)
	if f == nil {
		return false
	}
	for p := f.Parent; p != nil; p = p.Parent {
		if p.Fn == nil || p.Fn.IsG || p.Fn.Proto == nil || p.Pc <= 0 || p.Pc > len(p.Fn.Proto.Code) {
			return false
		}
		switch int(p.Fn.Proto.Code[p.Pc-1] >> 26) {
		case lua.OP_CALL, lua.OP_TAILCALL:
		default:
			return false
		}
	}
	return true
}

// currentLine returns "source:line" of the script code L is running, or ""
// (a Go function, or no frame). Runtime frames are skipped, and so is a
// thread with only those (a pcall worker): the line is the script's own,
// the one that called into the runtime (`pcall(go_fn)` returning into the
// prelude said <shield>/prelude.lua:112).
func currentLine(L *lua.LState) string {
	if frameLayoutErr != nil {
		return ""
	}
	for th := L; th != nil; th = th.Parent {
		for f := currentFrame(th); f != nil; f = f.Parent {
			if f.Fn == nil || f.Fn.IsG || f.Fn.Proto == nil {
				continue
			}
			p := f.Fn.Proto
			if isRuntimeSource(p.SourceName) {
				continue
			}
			if f.Pc > 0 && f.Pc <= len(p.DbgSourcePositions) {
				return fmt.Sprintf("%s:%d", p.SourceName, p.DbgSourcePositions[f.Pc-1])
			}
			return p.SourceName
		}
	}
	return ""
}
