package codec

import (
	"errors"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// MaxDepth is the deepest table nesting Encode and Decode accept: a table
// holding a table is 2 levels deep.
const MaxDepth = 100

// MaxSparseSlots bounds the total number of empty array slots of a value:
// the sum over all its tables of (largest integer key k with 1 <= k < 2^26)
// minus (number of such keys). gopher-lua allocates one slot for each of them,
// so without this bound an input like {"$60000000":1} would allocate ~1 GiB.
// Encode and Decode enforce the same bound, so whatever Encode produces,
// Decode accepts. Decode additionally never allocates more than
// MaxSparseSlots+len(data) array slots in total while parsing (this only
// matters for contrived input such as {"$900000":1,"$900000":null}).
const MaxSparseSlots = 1 << 20

// Sentinel errors. Errors returned by Encode are *EncodeError and errors
// returned by Decode are *DecodeError; both unwrap to one of these, so use
// errors.Is to classify them.
var (
	// ErrUnsupportedType: a function, userdata, thread or channel value.
	ErrUnsupportedType = errors.New("codec: cannot encode value of this type")
	// ErrUnsupportedKey: a table key that is not a string, number or boolean,
	// or a NaN / ±Inf number key.
	ErrUnsupportedKey = errors.New("codec: cannot encode table key")
	// ErrNotFinite: a NaN or ±Inf number value.
	ErrNotFinite = errors.New("codec: cannot encode NaN or Inf")
	// ErrCycle: a table that (directly or indirectly) contains itself.
	ErrCycle = errors.New("codec: cyclic table")
	// ErrTooDeep: tables nested more than MaxDepth levels.
	ErrTooDeep = errors.New("codec: table nesting deeper than " + strconv.Itoa(MaxDepth))
	// ErrTooSparse: integer keys leave more than MaxSparseSlots empty array
	// slots (see MaxSparseSlots).
	ErrTooSparse = errors.New("codec: integer table keys too sparse (more than " +
		strconv.Itoa(MaxSparseSlots) + " empty array slots)")
	// ErrInvalidData: the bytes are not valid wire format.
	ErrInvalidData = errors.New("codec: invalid data")
)

// EncodeError is the error type returned by Encode.
type EncodeError struct {
	// Err is one of ErrUnsupportedType, ErrUnsupportedKey, ErrNotFinite,
	// ErrCycle, ErrTooDeep, ErrTooSparse.
	Err error
	// What names the offending value for ErrUnsupportedType and
	// ErrUnsupportedKey (a Lua type name such as "function", or "NaN",
	// "+Inf", "-Inf") and for ErrNotFinite ("NaN", "+Inf", "-Inf").
	What string
	// Path is the key path of the offending value (for ErrUnsupportedKey: of
	// the table holding the key), e.g. `a.b[3]['x y']`; empty at top level.
	Path string
}

// Error returns messages such as
// `codec: cannot encode function at key "a.b"`.
func (e *EncodeError) Error() string {
	var msg string
	switch e.Err {
	case ErrUnsupportedType, ErrNotFinite:
		msg = "codec: cannot encode " + e.What
	case ErrUnsupportedKey:
		msg = "codec: cannot encode " + e.What + " as a table key"
	default:
		msg = e.Err.Error()
	}
	if e.Path != "" {
		msg += " at key " + strconv.Quote(e.Path)
	}
	return msg
}

// Unwrap returns the sentinel error.
func (e *EncodeError) Unwrap() error { return e.Err }

// DecodeError is the error type returned by Decode.
type DecodeError struct {
	// Err is one of ErrInvalidData, ErrTooDeep, ErrTooSparse.
	Err error
	// Offset is the byte offset in the input where the problem was found.
	Offset int
	// Msg describes the problem (may be empty for ErrTooDeep/ErrTooSparse).
	Msg string
}

// Error returns messages such as
// `codec: invalid data at offset 5: unexpected '1', expected ':' after object key`.
func (e *DecodeError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	b.WriteString(" at offset ")
	b.WriteString(strconv.Itoa(e.Offset))
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	return b.String()
}

// Unwrap returns the sentinel error.
func (e *DecodeError) Unwrap() error { return e.Err }

// formatPath renders a key path Lua-style: identifiers joined by dots, other
// keys in brackets, e.g. a.b[3]['x y'][true].
func formatPath(keys []lua.LValue) string {
	var b strings.Builder
	for i, k := range keys {
		switch k := k.(type) {
		case lua.LString:
			s := string(k)
			if isIdent(s) {
				if i > 0 {
					b.WriteByte('.')
				}
				b.WriteString(s)
			} else {
				q := strconv.Quote(s)
				q = strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
				q = strings.ReplaceAll(q, `'`, `\'`)
				b.WriteString("['")
				b.WriteString(q)
				b.WriteString("']")
			}
		case lua.LNumber:
			b.WriteByte('[')
			if s, ok := FormatNumber(float64(k)); ok {
				b.WriteString(s)
			} else {
				b.WriteString(k.String())
			}
			b.WriteByte(']')
		case lua.LBool:
			if k {
				b.WriteString("[true]")
			} else {
				b.WriteString("[false]")
			}
		default:
			b.WriteString("[?]")
		}
	}
	return b.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// typeName is lua.LValue.Type().String() without the panic for foreign
// LValue implementations with an out-of-range type.
func typeName(v lua.LValue) string {
	t := v.Type()
	if t >= lua.LTNil && t <= lua.LTChannel {
		return t.String()
	}
	return "value of unknown type"
}
