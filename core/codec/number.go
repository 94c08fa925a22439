package codec

import (
	"math"
	"strconv"
)

// maxSafeInt is 2^53: integral floats below it in magnitude are written as
// plain integers.
const maxSafeInt = 1 << 53

// FormatNumber renders f exactly as Encode writes a number: integral values
// with |f| < 2^53 as plain integers ("5", "-3"; -0 is "0"), every other finite
// value with strconv.FormatFloat(f, 'g', -1, 64), the shortest text that
// parses back to the same float64. It returns ("", false) for NaN and ±Inf,
// which cannot be encoded.
func FormatNumber(f float64) (string, bool) {
	var buf [32]byte
	b, ok := appendNumber(buf[:0], f)
	if !ok {
		return "", false
	}
	return string(b), true
}

func appendNumber(buf []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return buf, false
	}
	if f > -maxSafeInt && f < maxSafeInt && f == math.Trunc(f) {
		return strconv.AppendInt(buf, int64(f), 10), true
	}
	return strconv.AppendFloat(buf, f, 'g', -1, 64), true
}

// ParseNumber parses data as a number if, and only if, the whole of data is
// one JSON number, optionally surrounded by JSON whitespace (space, tab, CR,
// LF). It returns (0, false) for anything else, including numbers that
// overflow float64. It never returns an error value; callers such as INCR
// emulation report their own "not a number" error.
func ParseNumber(data []byte) (float64, bool) {
	i, j := 0, len(data)
	for i < j && isSpace(data[i]) {
		i++
	}
	for j > i && isSpace(data[j-1]) {
		j--
	}
	if i == j {
		return 0, false
	}
	end, simple := scanNumber(data, i)
	if end != j {
		return 0, false
	}
	return parseNumber(data[i:j], simple)
}

// IsNumber reports whether the whole of b, with no surrounding whitespace,
// is one JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. It is
// the module's one JSON number grammar (core/kv's INCR emulation uses it).
func IsNumber(b []byte) bool {
	end, _ := scanNumber(b, 0)
	return end == len(b)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// scanNumber matches the JSON number grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at data[i:]. It returns the
// end offset of the match, or -1 if there is no valid number there. simple is
// true for an integer of at most 15 digits (exactly representable, parsed
// without strconv).
func scanNumber(data []byte, i int) (end int, simple bool) {
	n := len(data)
	if i < n && data[i] == '-' {
		i++
	}
	if i >= n {
		return -1, false
	}
	digits := i
	switch c := data[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i++
		for i < n && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		return -1, false
	}
	simple = i-digits <= 15
	if i < n && data[i] == '.' {
		simple = false
		i++
		if i >= n || data[i] < '0' || data[i] > '9' {
			return -1, false
		}
		for i < n && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	}
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		simple = false
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= n || data[i] < '0' || data[i] > '9' {
			return -1, false
		}
		for i < n && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	}
	return i, simple
}

// parseNumber converts text already matched by scanNumber. ok is false if the
// number overflows float64.
func parseNumber(b []byte, simple bool) (float64, bool) {
	if simple {
		neg := false
		if b[0] == '-' {
			neg = true
			b = b[1:]
		}
		var v int64
		for _, c := range b {
			v = v*10 + int64(c-'0')
		}
		f := float64(v)
		if neg {
			f = -f
		}
		return f, true
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil && (math.IsInf(f, 0) || math.IsNaN(f)) {
		return 0, false
	}
	if err != nil {
		// Only a range error is possible for input that matched the JSON
		// grammar; an underflow result (0 or subnormal) is accepted.
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return 0, false
		}
	}
	return f, true
}
