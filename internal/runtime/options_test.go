package runtime

import (
	"sort"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

var testSpec = NewOptSpec(
	Opt{Name: "ttl", Kind: OptMillis, Min: 1},
	Opt{Name: "count", Kind: OptWhole, Min: 0, Max: 10},
	Opt{Name: "rate", Kind: OptNumber},
	Opt{Name: "mode", Kind: OptString},
	Opt{Name: "fair", Kind: OptBoolean},
	Opt{Name: "on_lost", Kind: OptFunction},
	Opt{Name: "list", Kind: OptTable},
	Opt{Name: "any", Kind: OptAny},
	Opt{Name: "dead", Kind: OptTable, Sub: NewOptSpec(Opt{Name: "enabled", Kind: OptBoolean}, Opt{Name: "ttl", Kind: OptMillis})},
)

const testKnown = "ttl, count, rate, mode, fair, on_lost, list, any, dead"

// readOpts runs opts(...) in a fresh state, a Go function reading its
// argument #1 with testSpec; it returns the keys set (in call order), the
// result of Options, and the error message ("" when none).
func readOpts(t *testing.T, lua_ string) (keys []string, read bool, msg string) {
	t.Helper()
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("opts", L.NewFunction(func(L *lua.LState) int {
		read = ArgsOf(L, "shield", "opts").Options(1, testSpec, func(key string, v lua.LValue) {
			keys = append(keys, key)
			if key == "mode" && v.String() != "a" {
				ArgsOf(L, "shield", "opts").BadOption(1, key, `must be "a", got %q`, v.String())
			}
		})
		return 0
	}))
	if err := L.DoString(lua_); err != nil {
		msg = err.(*lua.ApiError).Object.String()
	}
	return keys, read, msg
}

func TestOptionsReadsKnownKeysInNameOrder(t *testing.T) {
	keys, read, msg := readOpts(t, `opts({ ttl = 1.5, count = 3, rate = -1.5, mode = "a", fair = false,
		on_lost = function() end, list = {}, any = 1, dead = { enabled = true, ttl = 0 } })`)
	if msg != "" || !read {
		t.Fatalf("read=%v err=%q", read, msg)
	}
	want := []string{"any", "count", "dead.enabled", "dead.ttl", "fair", "list", "mode", "on_lost", "rate", "ttl"}
	if strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Fatalf("set called for %v, want %v", keys, want)
	}
}

func TestOptionsNilAndAbsent(t *testing.T) {
	for _, code := range []string{`opts()`, `opts(nil)`} {
		keys, read, msg := readOpts(t, code)
		if msg != "" || read || keys != nil {
			t.Fatalf("%s: read=%v keys=%v err=%q", code, read, keys, msg)
		}
	}
	if _, read, msg := readOpts(t, `opts({})`); msg != "" || !read {
		t.Fatalf("empty table: read=%v err=%q", read, msg)
	}
}

func TestOptionsErrors(t *testing.T) {
	for _, c := range []struct{ code, want string }{
		{`opts(5)`, `shield: bad argument #1 to 'opts' (table expected, got number)`},
		{`opts("ttl")`, `(table expected, got string)`},
		{`opts({ tll = 1 })`, `shield: bad argument #1 to 'opts' (unknown option "tll" (known: ` + testKnown + `); did you mean "ttl"?)`},
		{`opts({ fiar = true })`, `(unknown option "fiar" (known: ` + testKnown + `); did you mean "fair"?)`},
		{`opts({ bogus = 1 })`, `(unknown option "bogus" (known: ` + testKnown + `))`},
		{`opts({ dead = { enabeld = true } })`, `(unknown option "dead.enabeld" (known: enabled, ttl); did you mean "dead.enabled"?)`},
		{`opts({ 100 })`, `(option keys must be strings, got number 1)`},
		{`opts({ [true] = 1 })`, `(option keys must be strings, got boolean true)`},
		{`opts({ [{}] = 1 })`, `(option keys must be strings, got table)`},
		{`opts({ ttl = "5" })`, `(option ttl: number expected, got string)`},
		{`opts({ count = "5" })`, `(option count: number expected, got string)`},
		{`opts({ rate = true })`, `(option rate: number expected, got boolean)`},
		{`opts({ mode = 1 })`, `(option mode: string expected, got number)`},
		{`opts({ fair = 1 })`, `(option fair: boolean expected, got number)`},
		{`opts({ on_lost = {} })`, `(option on_lost: function expected, got table)`},
		{`opts({ list = "x" })`, `(option list: table expected, got string)`},
		{`opts({ dead = 1 })`, `(option dead: table expected, got number)`},
		{`opts({ dead = { ttl = -1 } })`, `(option dead.ttl must be a number of milliseconds from 0 to 1e+15, got -1)`},
		{`opts({ ttl = 0.5 - 0.5 })`, `(option ttl must be a number of milliseconds from 1 to 1e+15, got 0)`},
		{`opts({ ttl = 1/0 })`, `(option ttl must be a number of milliseconds from 1 to 1e+15, got inf)`},
		{`opts({ ttl = 0/0 })`, `(option ttl must be a number of milliseconds from 1 to 1e+15, got nan)`},
		{`opts({ count = 1.5 })`, `(option count must be a whole number from 0 to 10, got 1.5)`},
		{`opts({ count = 11 })`, `(option count must be a whole number from 0 to 10, got 11)`},
		{`opts({ mode = "b" })`, `(option mode must be "a", got "b")`},
	} {
		_, _, msg := readOpts(t, c.code)
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.code, msg, c.want)
		}
	}
}

// With several mistakes the first by key name is reported, whatever the
// table's iteration order (non-string keys first of all): run each table
// many times with its keys inserted in every order.
func TestOptionsFirstMistakeByName(t *testing.T) {
	for _, c := range []struct {
		keys []string // Lua "k = v" fields
		want string
	}{
		{[]string{`zzz = 1`, `count = "x"`, `ttl = 0`, `aaa = 1`}, `unknown option "aaa"`},
		{[]string{`zzz = 1`, `count = "x"`, `ttl = 0`}, `option count: number expected`},
		{[]string{`zzz = 1`, `ttl = 0`, `mode = "b"`}, `option mode must be "a"`},
		{[]string{`zzz = 1`, `ttl = 0`}, `option ttl must be`},
		{[]string{`tz = 1`, `ttl = 0`}, `option ttl must be`},
		{[]string{`zzz = 1`, `[2] = 1`, `[1] = 1`, `aaa = 1`}, `got number 1)`},
	} {
		perms := permutations(c.keys)
		for _, p := range perms {
			code := "opts({ " + strings.Join(p, ", ") + " })"
			if _, _, msg := readOpts(t, code); !strings.Contains(msg, c.want) {
				t.Errorf("%s: got %q, want %q", code, msg, c.want)
			}
		}
	}
}

func permutations(s []string) [][]string {
	if len(s) <= 1 {
		return [][]string{append([]string(nil), s...)}
	}
	var out [][]string
	for i := range s {
		rest := append(append([]string(nil), s[:i]...), s[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{s[i]}, p...))
		}
	}
	return out
}

func TestOptSpecWithKeepsDeclaredOrder(t *testing.T) {
	s := NewOptSpec(Opt{Name: "b"}, Opt{Name: "a"}).With(Opt{Name: "c"})
	if s.known != "b, a, c" {
		t.Fatalf("known = %q", s.known)
	}
	names := make([]string, len(s.opts))
	for i, o := range s.opts {
		names[i] = o.Name
	}
	if !sort.StringsAreSorted(names) {
		t.Fatalf("opts not in name order: %v", names)
	}
}

func TestMillisRoundsUp(t *testing.T) {
	for in, want := range map[float64]time.Duration{0: 0, 0.5: time.Millisecond, 1: time.Millisecond, 1500.2: 1501 * time.Millisecond} {
		if got := Millis(lua.LNumber(in)); got != want {
			t.Errorf("Millis(%v) = %v, want %v", in, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"ttl", "ttl", 0}, {"tll", "ttl", 1}, {"brust", "burst", 1}, {"", "ab", 2}, {"retries", "max_retries", 4}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

// A nil options argument costs no allocation.
func TestOptionsNilAllocatesNothing(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	L.Push(lua.LNil)
	a := ArgsOf(L, "shield", "opts")
	set := func(string, lua.LValue) {}
	if n := testing.AllocsPerRun(100, func() { a.Options(1, testSpec, set) }); n != 0 {
		t.Fatalf("Options(nil) allocates %v times", n)
	}
}
