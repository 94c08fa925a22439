package codec

import (
	"encoding/base64"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

var strictBase64 = base64.StdEncoding.Strict()

// Decode parses wire-format bytes (see the package documentation) back into a
// Lua value. Tables are created without an *lua.LState and have LNil as
// metatable, so they can be used with any LState.
//
// Errors are *DecodeError values carrying the byte offset of the problem and
// wrapping ErrInvalidData (malformed JSON, invalid UTF-8, trailing data,
// number overflow, malformed "$bin" / "$b:" base64), ErrTooDeep (tables
// nested deeper than MaxDepth) or ErrTooSparse (see MaxSparseSlots).
func Decode(data []byte) (lua.LValue, error) {
	d := decoder{data: data, budget: MaxSparseSlots + len(data)}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return nil, d.invalid(d.pos, "unexpected data after value")
	}
	return v, nil
}

// DecodeLenient is Decode, except that bytes that are not valid wire format
// (for example a plain string another service SET) are returned as a Lua
// string holding exactly those bytes. It never fails.
func DecodeLenient(data []byte) lua.LValue {
	v, err := Decode(data)
	if err != nil {
		return lua.LString(data)
	}
	return v
}

// newTable returns an empty table usable without an LState. The metatable
// must be LNil (not a Go nil): gopher-lua compares it against LNil.
func newTable() *lua.LTable {
	return &lua.LTable{Metatable: lua.LNil}
}

type decoder struct {
	data    []byte
	pos     int
	budget  int    // array slots Decode may still allocate
	holes   int    // empty array slots in finished tables
	scratch []byte // for strings with escapes
}

func (d *decoder) invalid(off int, msg string) error {
	return &DecodeError{Err: ErrInvalidData, Offset: off, Msg: msg}
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) && isSpace(d.data[d.pos]) {
		d.pos++
	}
}

func describe(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	const hex = "0123456789abcdef"
	return "byte 0x" + string([]byte{hex[c>>4], hex[c&0xf]})
}

// value parses one JSON value. depth is the number of tables enclosing it.
func (d *decoder) value(depth int) (lua.LValue, error) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return nil, d.invalid(d.pos, "unexpected end of input")
	}
	switch c := d.data[d.pos]; c {
	case '{':
		return d.object(depth + 1)
	case '[':
		return d.array(depth + 1)
	case '"':
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		return lua.LString(s), nil
	case 't':
		return d.literal("true", lua.LTrue)
	case 'f':
		return d.literal("false", lua.LFalse)
	case 'n':
		return d.literal("null", lua.LNil)
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return d.number()
		}
		return nil, d.invalid(d.pos, "unexpected "+describe(c))
	}
}

func (d *decoder) literal(word string, v lua.LValue) (lua.LValue, error) {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return nil, d.invalid(d.pos, "invalid literal, expected "+word)
	}
	d.pos += len(word)
	return v, nil
}

func (d *decoder) number() (lua.LValue, error) {
	start := d.pos
	end, simple := scanNumber(d.data, start)
	if end < 0 {
		return nil, d.invalid(start, "malformed number")
	}
	f, ok := parseNumber(d.data[start:end], simple)
	if !ok {
		return nil, d.invalid(start, "number "+clip(d.data[start:end])+" overflows float64")
	}
	d.pos = end
	return lua.LNumber(f), nil
}

func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// str parses a JSON string starting at the opening quote.
func (d *decoder) str() (string, error) {
	data := d.data
	d.pos++ // opening quote
	start := d.pos
	// Fast path: no escapes.
	for i := start; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return string(data[start:i]), nil
		case c == '\\':
			return d.strSlow(start, i)
		case c < 0x20:
			return "", d.invalid(i, "control character "+describe(c)+" in string")
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return "", d.invalid(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
	return "", d.invalid(len(data), "unterminated string")
}

func (d *decoder) strSlow(start, i int) (string, error) {
	data := d.data
	buf := append(d.scratch[:0], data[start:i]...)
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			d.scratch = buf
			return string(buf), nil
		case c == '\\':
			if i+1 >= len(data) {
				return "", d.invalid(len(data), "unterminated string")
			}
			esc := data[i+1]
			switch esc {
			case '"', '\\', '/':
				buf = append(buf, esc)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(data, i+2)
				if !ok {
					return "", d.invalid(i, `malformed \u escape`)
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if r2, ok := hex4(data, i+2); ok && i+1 < len(data) && data[i] == '\\' && data[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							buf = utf8.AppendRune(buf, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError // lone surrogate
				}
				buf = utf8.AppendRune(buf, r)
				continue
			default:
				return "", d.invalid(i, "invalid escape "+describe(esc))
			}
			i += 2
		case c < 0x20:
			return "", d.invalid(i, "control character "+describe(c)+" in string")
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return "", d.invalid(i, "invalid UTF-8 in string")
			}
			buf = append(buf, data[i:i+size]...)
			i += size
		}
	}
	return "", d.invalid(len(data), "unterminated string")
}

func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// expect skips whitespace and consumes c.
func (d *decoder) expect(c byte, what string) error {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return d.invalid(d.pos, "unexpected end of input, expected "+what)
	}
	if d.data[d.pos] != c {
		return d.invalid(d.pos, "unexpected "+describe(d.data[d.pos])+", expected "+what)
	}
	d.pos++
	return nil
}

func (d *decoder) tooDeep(off int) error {
	return &DecodeError{Err: ErrTooDeep, Offset: off}
}

func (d *decoder) tooSparse(off int) error {
	return &DecodeError{Err: ErrTooSparse, Offset: off}
}

// array parses a JSON array at depth (the table's own nesting level).
func (d *decoder) array(depth int) (lua.LValue, error) {
	open := d.pos
	if depth > MaxDepth {
		return nil, d.tooDeep(open)
	}
	d.pos++
	t := newTable()
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return t, nil
	}
	n, cnt, last := 0, 0, 0
	for {
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		n++
		if d.budget <= 0 {
			return nil, d.tooSparse(open)
		}
		d.budget--
		t.RawSetInt(n, v)
		if v != lua.LNil && isArrayKey(float64(n)) {
			cnt++
			last = n
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, d.invalid(d.pos, "unexpected end of input, expected ',' or ']'")
		}
		if c := d.data[d.pos]; c == ']' {
			d.pos++
			break
		} else if c != ',' {
			return nil, d.invalid(d.pos, "unexpected "+describe(c)+", expected ',' or ']'")
		}
		d.pos++
	}
	d.holes += last - cnt
	if d.holes > MaxSparseSlots {
		return nil, d.tooSparse(open)
	}
	return t, nil
}

// object parses a JSON object at depth (the table's own nesting level; a
// {"$bin":...} object is a string, not a table, so it may sit one level
// deeper than MaxDepth).
func (d *decoder) object(depth int) (lua.LValue, error) {
	open := d.pos
	if depth > MaxDepth+1 {
		return nil, d.tooDeep(open)
	}
	d.pos++
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		if depth > MaxDepth {
			return nil, d.tooDeep(open)
		}
		return newTable(), nil
	}
	var t *lua.LTable
	maxArr := 0
	for first := true; ; first = false {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			if d.pos >= len(d.data) {
				return nil, d.invalid(d.pos, "unexpected end of input, expected object key")
			}
			return nil, d.invalid(d.pos, "unexpected "+describe(d.data[d.pos])+", expected object key")
		}
		keyOff := d.pos
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		if err := d.expect(':', "':' after object key"); err != nil {
			return nil, err
		}
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, d.invalid(d.pos, "unexpected end of input, expected ',' or '}'")
		}
		c := d.data[d.pos]
		if c != ',' && c != '}' {
			return nil, d.invalid(d.pos, "unexpected "+describe(c)+", expected ',' or '}'")
		}
		d.pos++
		if first && c == '}' && k == "$bin" {
			s, ok := v.(lua.LString)
			if !ok {
				return nil, d.invalid(keyOff, `"$bin" value must be a base64 string`)
			}
			b, err := strictBase64.DecodeString(string(s))
			if err != nil {
				return nil, d.invalid(keyOff, `malformed base64 in "$bin" value`)
			}
			return lua.LString(b), nil
		}
		if t == nil {
			if depth > MaxDepth {
				return nil, d.tooDeep(open)
			}
			t = newTable()
		}
		if err := d.member(t, k, v, &maxArr, keyOff); err != nil {
			return nil, err
		}
		if c == '}' {
			break
		}
	}
	if maxArr > 0 {
		cnt, last := 0, 0
		for i := 1; i <= maxArr; i++ {
			if t.RawGetInt(i) != lua.LNil {
				cnt++
				last = i
			}
		}
		d.holes += last - cnt
		if d.holes > MaxSparseSlots {
			return nil, d.tooSparse(open)
		}
	}
	return t, nil
}

// member stores the object member with wire key k and value v in t, mapping
// k back to a Lua key and keeping gopher-lua's array allocation within
// budget.
func (d *decoder) member(t *lua.LTable, k string, v lua.LValue, maxArr *int, off int) error {
	if len(k) < 2 || k[0] != '$' {
		t.RawSetString(k, v)
		return nil
	}
	rest := k[1:]
	switch {
	case rest[0] == '$':
		t.RawSetString(rest, v)
		return nil
	case rest == "true":
		t.RawSetH(lua.LTrue, v)
		return nil
	case rest == "false":
		t.RawSetH(lua.LFalse, v)
		return nil
	case strings.HasPrefix(rest, "b:"):
		b, err := strictBase64.DecodeString(rest[2:])
		if err != nil {
			return d.invalid(off, `malformed base64 in "$b:" key`)
		}
		t.RawSetString(string(b), v)
		return nil
	case rest[0] == '-' || (rest[0] >= '0' && rest[0] <= '9'):
		end, simple := scanNumber([]byte(rest), 0)
		if end != len(rest) {
			break // not a number: literal key
		}
		f, ok := parseNumber([]byte(rest), simple)
		if !ok {
			return d.invalid(off, "number key "+clip([]byte(rest))+" overflows float64")
		}
		if !isArrayKey(f) {
			t.RawSetH(lua.LNumber(f), v)
			return nil
		}
		i := int(f)
		if i > *maxArr {
			if v == lua.LNil {
				return nil // nothing there to delete
			}
			grow := i - *maxArr
			if grow > d.budget {
				return d.tooSparse(off)
			}
			d.budget -= grow
			*maxArr = i
		}
		t.RawSetInt(i, v)
		return nil
	}
	t.RawSetString(k, v) // unrecognised "$..." key: literal
	return nil
}
