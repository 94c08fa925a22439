package runtime

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// The option-table reader. Every capability that takes an options table
// ({ ttl = 5000, fair = true }) declares its keys once in an OptSpec and
// reads the table with Args.Options, so that the same mistake reads the
// same way everywhere:
//
//	bad argument #2 to 'mutex' (unknown option "tll" (known: ttl, retry, ...); did you mean "ttl"?)
//	bad argument #2 to 'mutex' (option keys must be strings, got number 1)
//	bad argument #2 to 'mutex' (option ttl: number expected, got string)
//	bad argument #2 to 'mutex' (option ttl must be a number of milliseconds from 1 to 1e+15, got inf)
//	bad argument #2 to 'queue' (option max_length must be a whole number from 1 to 2147483647, got 1.5)
//
// Errors are stable: when a table has several mistakes the one reported is
// the first by key name (non-string keys before every name), whatever
// order the table iterates in. Checks that span keys or that a value must
// be one of a few words stay with the caller (the set callback runs after
// the key's kind is checked, in key-name order, and raises with BadOption).

// Kind is what an option's value must be.
type Kind uint8

const (
	// OptAny is any value: the caller checks it.
	OptAny Kind = iota
	// OptNumber is any number (NaN and infinities too: the caller bounds it).
	OptNumber
	// OptWhole is a whole number within [Min, Max] (Max 0: math.MaxInt32).
	OptWhole
	// OptMillis is a number of milliseconds within [Min, Max] (Max 0:
	// MaxMillis); read it with Millis, which rounds 0.5 ms up to 1 ms.
	OptMillis
	// OptString is a string.
	OptString
	// OptBoolean is true or false.
	OptBoolean
	// OptFunction is a Lua function.
	OptFunction
	// OptTable is a table; with Sub set, a nested options table whose keys
	// are reported as "outer.inner".
	OptTable
)

var kindNames = [...]string{OptAny: "value", OptNumber: "number", OptWhole: "number", OptMillis: "number",
	OptString: "string", OptBoolean: "boolean", OptFunction: "function", OptTable: "table"}

// MaxMillis bounds Millis options by default (about 31 700 years): longer
// values are unit mistakes, and overflow time.Duration.
const MaxMillis = 1e15

// Opt declares one option key.
type Opt struct {
	Name     string
	Kind     Kind
	Min, Max float64  // bounds of Whole and Millis (inclusive)
	Sub      *OptSpec // keys of a nested table (Kind OptTable)
}

// OptSpec is the set of keys an options table may have. Build it once (a
// package variable) with NewOptSpec; it is read-only afterwards.
type OptSpec struct {
	opts   []Opt  // in name order
	known  string // "ttl, retry, ...": as declared
	byName map[string]int
}

// NewOptSpec declares the keys of an options table. The "known:" list of
// an unknown-key error keeps the order given here.
func NewOptSpec(opts ...Opt) *OptSpec {
	s := &OptSpec{opts: append([]Opt(nil), opts...), byName: make(map[string]int, len(opts))}
	names := make([]string, len(opts))
	for i, o := range opts {
		names[i] = o.Name
		if o.Kind == OptWhole && o.Max == 0 {
			s.opts[i].Max = math.MaxInt32
		}
		if o.Kind == OptMillis && o.Max == 0 {
			s.opts[i].Max = MaxMillis
		}
	}
	s.known = strings.Join(names, ", ")
	sort.Slice(s.opts, func(i, j int) bool { return s.opts[i].Name < s.opts[j].Name })
	for i, o := range s.opts {
		s.byName[o.Name] = i
	}
	return s
}

// With is a spec with the keys of s and more.
func (s *OptSpec) With(more ...Opt) *OptSpec {
	return NewOptSpec(append(s.Opts(), more...)...)
}

// Opts are the keys of s, in the order they were declared.
func (s *OptSpec) Opts() []Opt {
	all := make([]Opt, 0, len(s.opts))
	for _, name := range strings.Split(s.known, ", ") {
		all = append(all, s.opts[s.byName[name]])
	}
	return all
}

// Options reads the options table at argument n: nothing (false) when it
// is nil or absent, else (true) set is called for every key present, in
// key-name order, after its kind was checked. Mistakes raise "bad argument
// #n" errors of the forms above. set may raise too (with BadOption).
func (a Args) Options(n int, s *OptSpec, set func(key string, v lua.LValue)) bool {
	v := a.L.Get(n)
	if v == lua.LNil {
		return false
	}
	t, ok := v.(*lua.LTable)
	if !ok {
		a.TypeError(n, "table")
	}
	ReadOptions(t, s, func(msg string) { a.Bad(n, msg) }, set)
	return true
}

// BadOption raises that option key of argument n is wrong: "bad argument
// #n to 'fn' (option key msg)"; it does not return.
func (a Args) BadOption(n int, key, format string, v ...any) {
	a.Bad(n, "option "+key+" "+fmt.Sprintf(format, v...))
}

// ReadOptions is Options for a table that is not an argument (a task
// file's returned table): bad raises msg and does not return.
func ReadOptions(t *lua.LTable, s *OptSpec, bad func(msg string), set func(key string, v lua.LValue)) {
	readOptions(t, s, "", bad, set)
}

func readOptions(t *lua.LTable, s *OptSpec, prefix string, bad func(string), set func(string, lua.LValue)) {
	// Pass 1: the keys the spec does not know, without raising yet: the
	// first mistake by name wins, and ForEach's order is not by name.
	var nonString lua.LValue
	unknown := ""
	t.ForEach(func(k, _ lua.LValue) {
		key, ok := k.(lua.LString)
		if !ok {
			if nonString == nil || keyText(k) < keyText(nonString) {
				nonString = k
			}
			return
		}
		if _, known := s.byName[string(key)]; !known && (unknown == "" || string(key) < unknown) {
			unknown = string(key)
		}
	})
	if nonString != nil {
		bad("option keys must be strings, got " + keyText(nonString))
	}
	// Pass 2: the known keys in name order; an unknown key raises when its
	// name comes.
	for i := range s.opts {
		o := &s.opts[i]
		if unknown != "" && unknown < o.Name {
			break
		}
		v := t.RawGetString(o.Name)
		if v == lua.LNil {
			continue
		}
		key := prefix + o.Name
		if msg := checkKind(o, v); msg != "" {
			bad("option " + key + msg)
		}
		if o.Sub != nil {
			readOptions(v.(*lua.LTable), o.Sub, key+".", bad, set)
			continue
		}
		set(key, v)
	}
	if unknown != "" {
		msg := fmt.Sprintf("unknown option %q (known: %s)", prefix+unknown, s.known)
		if m := closest(unknown, s.opts); m != "" {
			msg += fmt.Sprintf("; did you mean %q?", prefix+m)
		}
		bad(msg)
	}
}

// checkKind is "" when v is of o's kind, else the rest of the error after
// "option key".
func checkKind(o *Opt, v lua.LValue) string {
	var ok bool
	switch o.Kind {
	case OptAny:
		return ""
	case OptNumber, OptWhole, OptMillis:
		f, isNum := v.(lua.LNumber)
		if !isNum {
			break
		}
		x := float64(f)
		switch {
		case o.Kind == OptWhole && !(x == math.Trunc(x) && x >= o.Min && x <= o.Max):
			return " must be a whole number from " + boundText(o.Min) + " to " + boundText(o.Max) + ", got " + NumberText(x)
		case o.Kind == OptMillis && !(x >= o.Min && x <= o.Max):
			return " must be a number of milliseconds from " + boundText(o.Min) + " to " + boundText(o.Max) + ", got " + NumberText(x)
		}
		return ""
	case OptString:
		_, ok = v.(lua.LString)
	case OptBoolean:
		_, ok = v.(lua.LBool)
	case OptFunction:
		_, ok = v.(*lua.LFunction)
	case OptTable:
		_, ok = v.(*lua.LTable)
	}
	if ok {
		return ""
	}
	return ": " + kindNames[o.Kind] + " expected, got " + v.Type().String()
}

// Millis is the duration of a Millis option (or any number of
// milliseconds): rounded up to whole milliseconds, so that 0.5 is 1 ms,
// never "none".
func Millis(v lua.LValue) time.Duration {
	f, _ := v.(lua.LNumber)
	return time.Duration(math.Ceil(float64(f))) * time.Millisecond
}

// NumberText writes a number as Lua users read it: inf, -inf, nan, 1.5.
func NumberText(f float64) string {
	switch {
	case f != f:
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return lua.LNumber(f).String()
}

// boundText writes a bound: 1e+15 rather than 1000000000000000, and
// 9007199254740992 rather than 9.007199254740992e+15.
func boundText(f float64) string {
	if f >= 1e12 && f == math.Pow10(int(math.Round(math.Log10(f)))) {
		return fmt.Sprintf("%g", f)
	}
	if f == math.Trunc(f) && !math.IsInf(f, 0) {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return NumberText(f)
}

// keyText names a non-string key: its type, and its value when that is
// short and stable (a number or a boolean; not a table's address).
func keyText(k lua.LValue) string {
	switch k.(type) {
	case lua.LNumber, lua.LBool:
		return k.Type().String() + " " + k.String()
	}
	return k.Type().String()
}

// closest is the known key within edit distance 2 of key (and less than
// half its length), "" when none is.
func closest(key string, opts []Opt) string {
	best, bestD := "", 3
	for _, o := range opts {
		if d := editDistance(key, o.Name); d < bestD && 2*d < len(key) {
			best, bestD = o.Name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, with a swap of two
// neighbours counting one ("brust" is one from "burst").
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
