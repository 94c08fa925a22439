package codec

import (
	"encoding/base64"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// Encode converts a Lua value to the wire format (JSON text, see the package
// documentation). A Go nil is treated like lua.LNil. The returned slice is
// newly allocated and owned by the caller.
//
// Errors are *EncodeError values wrapping ErrUnsupportedType (function,
// userdata, thread, channel), ErrUnsupportedKey, ErrNotFinite (NaN/±Inf),
// ErrCycle, ErrTooDeep or ErrTooSparse, and name the key path of the
// offending value.
func Encode(v lua.LValue) ([]byte, error) {
	e := encoderPool.Get().(*encoder)
	err := e.encodeValue(v)
	var out []byte
	if err == nil {
		out = make([]byte, len(e.buf))
		copy(out, e.buf)
	}
	e.reset()
	encoderPool.Put(e)
	return out, err
}

type entry struct {
	wkey string // key as written on the wire (object case only)
	key  lua.LValue
	val  lua.LValue
}

type encoder struct {
	buf     []byte
	entries []entry       // stack of table entries being written
	path    []lua.LValue  // keys from the root to the value being written
	tables  []*lua.LTable // tables on the current path, for cycle detection
	holes   int           // empty array slots seen so far (see MaxSparseSlots)
}

var encoderPool = sync.Pool{New: func() any {
	return &encoder{buf: make([]byte, 0, 256)}
}}

func (e *encoder) reset() {
	if cap(e.buf) > 64<<10 {
		e.buf = make([]byte, 0, 256)
	}
	e.buf = e.buf[:0]
	if cap(e.entries) > 4096 {
		e.entries = nil
	}
	clear(e.entries[:cap(e.entries)])
	e.entries = e.entries[:0]
	clear(e.path[:cap(e.path)])
	e.path = e.path[:0]
	clear(e.tables[:cap(e.tables)])
	e.tables = e.tables[:0]
	e.holes = 0
}

func (e *encoder) fail(err error, what string) error {
	return &EncodeError{Err: err, What: what, Path: formatPath(e.path)}
}

func notFiniteName(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case f > 0:
		return "+Inf"
	default:
		return "-Inf"
	}
}

func (e *encoder) encodeValue(v lua.LValue) error {
	switch v := v.(type) {
	case nil, *lua.LNilType:
		e.buf = append(e.buf, "null"...)
	case lua.LBool:
		if v {
			e.buf = append(e.buf, "true"...)
		} else {
			e.buf = append(e.buf, "false"...)
		}
	case lua.LNumber:
		var ok bool
		e.buf, ok = appendNumber(e.buf, float64(v))
		if !ok {
			return e.fail(ErrNotFinite, notFiniteName(float64(v)))
		}
	case lua.LString:
		e.appendString(string(v))
	case *lua.LTable:
		return e.encodeTable(v)
	default:
		return e.fail(ErrUnsupportedType, typeName(v))
	}
	return nil
}

// appendString writes s as a JSON string, or as {"$bin":...} if s is not
// valid UTF-8.
func (e *encoder) appendString(s string) {
	var ok bool
	if e.buf, ok = appendJSONString(e.buf, s); !ok {
		e.buf = append(e.buf, `{"$bin":"`...)
		e.buf = base64.StdEncoding.AppendEncode(e.buf, []byte(s))
		e.buf = append(e.buf, `"}`...)
	}
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a quoted JSON string. If s is not valid UTF-8
// it returns buf unchanged and false.
func appendJSONString(buf []byte, s string) ([]byte, bool) {
	start := len(buf)
	buf = append(buf, '"')
	run := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[run:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			run = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return buf[:start], false
		}
		i += size
	}
	buf = append(buf, s[run:]...)
	buf = append(buf, '"')
	return buf, true
}

// isArrayKey reports whether gopher-lua stores number key f in a table's
// dense array part (mirrors gopher-lua's unexported isArrayKey).
func isArrayKey(f float64) bool {
	return f >= 1 && f < float64(lua.MaxArrayIndex) && f == math.Trunc(f)
}

func (e *encoder) encodeTable(t *lua.LTable) error {
	for _, p := range e.tables {
		if p == t {
			return e.fail(ErrCycle, "")
		}
	}
	if len(e.tables) >= MaxDepth {
		return e.fail(ErrTooDeep, "")
	}
	e.tables = append(e.tables, t)

	start := len(e.entries)
	t.ForEach(func(k, v lua.LValue) {
		e.entries = append(e.entries, entry{key: k, val: v})
	})
	ents := e.entries[start:]

	// Classify: count the keys gopher-lua keeps in its array part.
	arrMax, arrCnt := 0.0, 0
	for i := range ents {
		if n, ok := ents[i].key.(lua.LNumber); ok && isArrayKey(float64(n)) {
			arrCnt++
			arrMax = max(arrMax, float64(n))
		}
	}
	isArray := len(ents) > 0 && arrCnt == len(ents) && arrMax == float64(len(ents))

	var err error
	if isArray {
		err = e.writeArray(ents)
	} else {
		e.holes += int(arrMax) - arrCnt
		if e.holes > MaxSparseSlots {
			err = e.fail(ErrTooSparse, "")
		} else {
			err = e.writeObject(ents)
		}
	}

	clear(ents)
	e.entries = e.entries[:start]
	e.tables[len(e.tables)-1] = nil
	e.tables = e.tables[:len(e.tables)-1]
	return err
}

func (e *encoder) writeArray(ents []entry) error {
	// ForEach yields the array part in order; sort only if some integer keys
	// live in the hash part (possible when Go code used RawSetH).
	for i := range ents {
		if ents[i].key != lua.LNumber(i+1) {
			slices.SortFunc(ents, func(a, b entry) int {
				x, y := a.key.(lua.LNumber), b.key.(lua.LNumber)
				switch {
				case x < y:
					return -1
				case x > y:
					return 1
				}
				return 0
			})
			break
		}
	}
	e.buf = append(e.buf, '[')
	for i := range ents {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.path = append(e.path, ents[i].key)
		if err := e.encodeValue(ents[i].val); err != nil {
			return err
		}
		e.path = e.path[:len(e.path)-1]
	}
	e.buf = append(e.buf, ']')
	return nil
}

func (e *encoder) writeObject(ents []entry) error {
	for i := range ents {
		switch k := ents[i].key.(type) {
		case lua.LString:
			s := string(k)
			switch {
			case !utf8.ValidString(s):
				ents[i].wkey = "$b:" + base64.StdEncoding.EncodeToString([]byte(s))
			case strings.HasPrefix(s, "$"):
				ents[i].wkey = "$" + s
			default:
				ents[i].wkey = s
			}
		case lua.LNumber:
			var buf [33]byte
			buf[0] = '$'
			b, ok := appendNumber(buf[:1], float64(k))
			if !ok {
				return e.fail(ErrUnsupportedKey, notFiniteName(float64(k)))
			}
			ents[i].wkey = string(b)
		case lua.LBool:
			if k {
				ents[i].wkey = "$true"
			} else {
				ents[i].wkey = "$false"
			}
		default:
			return e.fail(ErrUnsupportedKey, typeName(k))
		}
	}
	if len(ents) > 1 {
		slices.SortFunc(ents, func(a, b entry) int { return strings.Compare(a.wkey, b.wkey) })
	}
	e.buf = append(e.buf, '{')
	for i := range ents {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf, _ = appendJSONString(e.buf, ents[i].wkey) // wkey is valid UTF-8
		e.buf = append(e.buf, ':')
		e.path = append(e.path, ents[i].key)
		if err := e.encodeValue(ents[i].val); err != nil {
			return err
		}
		e.path = e.path[:len(e.path)-1]
	}
	e.buf = append(e.buf, '}')
	return nil
}
