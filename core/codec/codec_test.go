package codec

import (
	"errors"
	"math"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

func nested(depth int, leaf lua.LValue) lua.LValue {
	v := leaf
	for i := 0; i < depth; i++ {
		v = tbl("a", v)
	}
	return v
}

func roundTrip(t *testing.T, v lua.LValue) []byte {
	t.Helper()
	b, err := Encode(v)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode(%s): %v", b, err)
	}
	if d := deepEqual(v, got); d != "" {
		t.Fatalf("round trip of %s differs: %s", b, d)
	}
	// Encoding is canonical: re-encoding the decoded value gives the same bytes.
	b2, err := Encode(got)
	if err != nil {
		t.Fatalf("re-Encode: %v", err)
	}
	if string(b2) != string(b) {
		t.Fatalf("re-encode differs:\n%s\n%s", b, b2)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	mixed := arr("a", "b", "c")
	mixed.RawSetString("name", lua.LString("x"))
	mixed.RawSetString("n", lua.LNumber(3))

	cases := map[string]lua.LValue{
		"nil":                      lua.LNil,
		"true":                     lua.LTrue,
		"false":                    lua.LFalse,
		"zero":                     lua.LNumber(0),
		"one":                      lua.LNumber(1),
		"minus one":                lua.LNumber(-1),
		"2^53":                     lua.LNumber(1 << 53),
		"-2^53":                    lua.LNumber(-(1 << 53)),
		"2^53-1":                   lua.LNumber(1<<53 - 1),
		"2^63":                     lua.LNumber(math.Pow(2, 63)),
		"1.5":                      lua.LNumber(1.5),
		"0.1":                      lua.LNumber(0.1),
		"1e300":                    lua.LNumber(1e300),
		"-1e-300":                  lua.LNumber(-1e-300),
		"max float":                lua.LNumber(math.MaxFloat64),
		"min subnorm":              lua.LNumber(math.SmallestNonzeroFloat64),
		"pi":                       lua.LNumber(math.Pi),
		"empty string":             lua.LString(""),
		"hello":                    lua.LString("hello"),
		"chinese":                  lua.LString("中文"),
		"emoji":                    lua.LString("😀 ok"),
		"binary":                   lua.LString("\x00\xff\xfe binary"),
		"nul only":                 lua.LString("\x00"),
		"surrogate utf8 (invalid)": lua.LString("\xed\xa0\x80"),
		"replacement char":         lua.LString("\uFFFD"),
		"quotes etc":               lua.LString("say \"hi\"\n\tback\\slash\r\b\f\x01\x1f\x7f </script> & '"),
		"u2028":                    lua.LString("a\u2028b\u2029c"),
		"looks like json":          lua.LString(`{"$bin":"/w=="}`),
		"empty table":              newTable(),
		"array":                    arr(1, 2, 3),
		"array of mixed":           arr("x", 1.5, true, arr(), tbl("k", "v")),
		"nested 50":                nested(50, lua.LString("deep")),
		"nested 100":               nested(99, arr(1)),
		"binary at depth 101":      nested(100, lua.LString("\xff")),
		"sparse":                   tbl(1, "a", 3, "c"),
		"only key 2":               tbl(2, "b"),
		"negative and float keys":  tbl(-1, "neg", 0, "zero", 1.5, "float", -2.25, "f2", 1e300, "big", math.Pow(2, 53), "2^53", float64(1<<26), "maxarr"),
		"bool keys":                tbl(true, "t", false, "f"),
		"dollar keys":              tbl("$", 1, "$$", 2, "$x", 3, "$1", 4, "$true", 5, "$b:AA==", 6, "$bin", 7),
		"binary keys":              tbl("\xff", 1, "\x00\xfe", 2, "ok", 3),
		"array part + string keys": mixed,
		"string key 1 vs number 1": tbl("1", "string", 1, "number"),
		"string key 1 only":        tbl("1", "string"),
		"$bin table":               tbl("$bin", "x"),
		"$bin table with binary":   tbl("$bin", "\xff"),
		"empty key":                tbl("", "empty"),
		"key with quote":           tbl("a\"b", 1, "a\nb", 2),
		"binary values in table":   tbl("k", "\xff\xfe", "arr", arr("\x80", "ok")),
		"dag":                      func() lua.LValue { s := arr(1, 2); return tbl("a", s, "b", s, "c", arr(s, s)) }(),
		"big array": func() lua.LValue {
			vs := make([]any, 1000)
			for i := range vs {
				vs[i] = i
			}
			return arr(vs...)
		}(),
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) { roundTrip(t, v) })
	}
}

func TestRoundTripNegativeZero(t *testing.T) {
	// The sign of zero is not preserved (documented): -0 is written "0".
	b, err := Encode(lua.LNumber(math.Copysign(0, -1)))
	if err != nil || string(b) != "0" {
		t.Fatalf("Encode(-0) = %q, %v", b, err)
	}
	v, err := Decode([]byte("-0"))
	if err != nil || v != lua.LNumber(0) {
		t.Fatalf("Decode(-0) = %v, %v", v, err)
	}
}

func TestEncodeExact(t *testing.T) {
	cases := []struct {
		name string
		v    lua.LValue
		want string
	}{
		{"nil", lua.LNil, `null`},
		{"go nil", nil, `null`},
		{"true", lua.LTrue, `true`},
		{"false", lua.LFalse, `false`},
		{"int", lua.LNumber(5), `5`},
		{"neg int", lua.LNumber(-3), `-3`},
		{"float", lua.LNumber(1.5), `1.5`},
		{"2^53", lua.LNumber(1 << 53), `9.007199254740992e+15`},
		{"2^53-1", lua.LNumber(1<<53 - 1), `9007199254740991`},
		{"1e300", lua.LNumber(1e300), `1e+300`},
		{"small", lua.LNumber(0.000001), `1e-06`},
		{"array", arr(1, 2, 3), `[1,2,3]`},
		{"object", tbl("a", 1, "b", "x"), `{"a":1,"b":"x"}`},
		{"object sorted", tbl("b", 1, "a", 2, "$1", 3, 1.5, 4, "B", 5), `{"$$1":3,"$1.5":4,"B":5,"a":2,"b":1}`},
		{"binary", lua.LString("\xff"), `{"$bin":"/w=="}`},
		{"empty table", newTable(), `{}`},
		{"sparse", tbl(1, "a", 3, "c"), `{"$1":"a","$3":"c"}`},
		{"negative key", tbl(-1, true, -1.5, false), `{"$-1":true,"$-1.5":false}`},
		{"zero key", tbl(0, "z"), `{"$0":"z"}`},
		{"bool keys", tbl(true, 1, false, 2), `{"$false":2,"$true":1}`},
		{"dollar key", tbl("$x", 1), `{"$$x":1}`},
		{"$bin key", tbl("$bin", "x"), `{"$$bin":"x"}`},
		{"string key 1", tbl("1", 1), `{"1":1}`},
		{"binary key", tbl("\xff", 1), `{"$b:/w==":1}`},
		{"array + hash", tbl(1, "a", 2, "b", "n", 2), `{"$1":"a","$2":"b","n":2}`},
		{"no html escaping", lua.LString("<a&b>"), `"<a&b>"`},
		{"escapes", lua.LString("q\"b\\n\nr\rt\tb\bf\f\x01\x1f\x7f"), `"q\"b\\n\nr\rt\tb\bf\f\u0001\u001f` + "\x7f" + `"`},
		{"utf8 verbatim", lua.LString("中文\u2028"), "\"中文\u2028\""},
		{"nested", tbl("p", tbl("x", 1.5, "y", -2), "inv", arr(101, 102)), `{"inv":[101,102],"p":{"x":1.5,"y":-2}}`},
		{"dag", func() lua.LValue { s := tbl("x", 1); return tbl("a", s, "b", s) }(), `{"a":{"x":1},"b":{"x":1}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := Encode(c.v)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if string(b) != c.want {
				t.Fatalf("Encode = %s, want %s", b, c.want)
			}
		})
	}
}

func TestEncodeDeterministic(t *testing.T) {
	keys := []any{"z", "a", "$m", 3, -7, 2.5, true, false, "\xff", "mid", "1"}
	var first string
	for rot := 0; rot < len(keys); rot++ {
		tb := newTable()
		for i := range keys {
			k := keys[(i+rot)%len(keys)]
			tb.RawSet(lv(k), lua.LString("v"))
		}
		b, err := Encode(tb)
		if err != nil {
			t.Fatal(err)
		}
		if rot == 0 {
			first = string(b)
		} else if string(b) != first {
			t.Fatalf("insertion order changed output:\n%s\n%s", first, b)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	fn := L.NewFunction(func(*lua.LState) int { return 0 })

	cyc := tbl("y", 1)
	cyc.RawSetString("x", cyc)
	deepCyc := tbl()
	deepCyc.RawSetString("a", tbl("b", arr(1, deepCyc)))

	cases := []struct {
		name string
		v    lua.LValue
		is   error
		msg  string
	}{
		{"function top", fn, ErrUnsupportedType, `codec: cannot encode function`},
		{"function nested", tbl("a", tbl("b", fn)), ErrUnsupportedType, `codec: cannot encode function at key "a.b"`},
		{"function in array", tbl("list", arr(1, fn)), ErrUnsupportedType, `codec: cannot encode function at key "list[2]"`},
		{"function odd key", tbl("x y", tbl(true, fn)), ErrUnsupportedType, `codec: cannot encode function at key "['x y'][true]"`},
		{"userdata", tbl("u", L.NewUserData()), ErrUnsupportedType, `codec: cannot encode userdata at key "u"`},
		{"thread", tbl("co", L), ErrUnsupportedType, `codec: cannot encode thread at key "co"`},
		{"channel", tbl("ch", lua.LChannel(make(chan lua.LValue))), ErrUnsupportedType, `codec: cannot encode channel at key "ch"`},
		{"cycle", cyc, ErrCycle, `codec: cyclic table at key "x"`},
		{"deep cycle", deepCyc, ErrCycle, `codec: cyclic table at key "a.b[2]"`},
		{"NaN", lua.LNumber(math.NaN()), ErrNotFinite, `codec: cannot encode NaN`},
		{"NaN nested", tbl("a", tbl("b", math.NaN())), ErrNotFinite, `codec: cannot encode NaN at key "a.b"`},
		{"+Inf", lua.LNumber(math.Inf(1)), ErrNotFinite, `codec: cannot encode +Inf`},
		{"-Inf", arr(math.Inf(-1)), ErrNotFinite, `codec: cannot encode -Inf at key "[1]"`},
		{"Inf key", tbl("t", tbl(math.Inf(1), 1)), ErrUnsupportedKey, `codec: cannot encode +Inf as a table key at key "t"`},
		{"function key", tbl("t", tbl(fn, 1)), ErrUnsupportedKey, `codec: cannot encode function as a table key at key "t"`},
		{"table key", tbl(tbl(), 1), ErrUnsupportedKey, `codec: cannot encode table as a table key`},
		{"depth 101", nested(101, lua.LNumber(1)), ErrTooDeep, `codec: table nesting deeper than 100 at key "` + strings.TrimSuffix(strings.Repeat("a.", 100), ".") + `"`},
		{"too sparse", tbl("t", tbl(MaxSparseSlots+2, true)), ErrTooSparse, `codec: integer table keys too sparse (more than 1048576 empty array slots) at key "t"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := Encode(c.v)
			if err == nil {
				t.Fatalf("Encode succeeded: %s", b)
			}
			if b != nil {
				t.Errorf("Encode returned bytes with error: %q", b)
			}
			if !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
			var ee *EncodeError
			if !errors.As(err, &ee) {
				t.Errorf("error %T is not *EncodeError", err)
			}
			if err.Error() != c.msg {
				t.Errorf("message\n got %s\nwant %s", err, c.msg)
			}
		})
	}
}

func TestEncodeLimits(t *testing.T) {
	// Exactly MaxDepth levels is fine, in both directions.
	b := roundTrip(t, nested(MaxDepth, lua.LTrue))
	if _, err := Decode([]byte(strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth))); err != nil {
		t.Fatalf("100 nested arrays: %v", err)
	}
	if _, err := Decode(b); err != nil {
		t.Fatal(err)
	}
	// Moderately sparse tables are fine.
	roundTrip(t, tbl(1000, "x", 100000, "y"))
	roundTrip(t, tbl(MaxSparseSlots+1, true))
	// The sparse budget is global: two tables with 600k holes each fail.
	_, err := Encode(arr(tbl(600001, 1), tbl(600001, 1)))
	if !errors.Is(err, ErrTooSparse) || !strings.HasSuffix(err.Error(), `at key "[2]"`) {
		t.Fatalf("global sparse budget: %v", err)
	}
	// Keys at or beyond gopher-lua's array limit cost nothing.
	roundTrip(t, tbl(float64(lua.MaxArrayIndex), 1, 1e15, 2))
}

func TestDecodeValues(t *testing.T) {
	holes := newTable()
	holes.RawSetInt(1, lua.LNumber(1))
	holes.RawSetInt(3, lua.LNumber(3))
	cases := []struct {
		in   string
		want lua.LValue
	}{
		{`null`, lua.LNil},
		{` true `, lua.LTrue},
		{"\t\r\nfalse\n", lua.LFalse},
		{`-0`, lua.LNumber(0)},
		{`1e-400`, lua.LNumber(0)},
		{`12345678901234567890`, lua.LNumber(12345678901234567890)},
		{`-1.5E+2`, lua.LNumber(-150)},
		{`"a\/b\u00e9\ud83d\ude00"`, lua.LString("a/bé😀")},
		{`"\ud800x"`, lua.LString("\uFFFDx")},
		{`"\udc00\ud800"`, lua.LString("\uFFFD\uFFFD")},
		{`"\u0000"`, lua.LString("\x00")},
		{`[1,null,3]`, holes},
		{`[null,2]`, tbl(2, 2)},
		{`[1,null]`, arr(1)},
		{`[]`, newTable()},
		{`{}`, newTable()},
		{`{"$bin":"aGk="}`, lua.LString("hi")},
		{`{"$bin":""}`, lua.LString("")},
		{`{ "$bin" : "/w==" }`, lua.LString("\xff")},
		{`{"$bin":"/w==","x":1}`, tbl("$bin", "/w==", "x", 1)},
		{`{"x":1,"$bin":"/w=="}`, tbl("$bin", "/w==", "x", 1)},
		{`{"$$bin":"x"}`, tbl("$bin", "x")},
		{`{"$foo":1,"$":2,"$-":3,"$01":4,"$1x":5,"$b":6,"$tru":7}`, tbl("$foo", 1, "$", 2, "$-", 3, "$01", 4, "$1x", 5, "$b", 6, "$tru", 7)},
		{`{"$1.0":"a","$2e0":"b","$-0":"z","$1e300":"big"}`, tbl(1, "a", 2, "b", 0, "z", 1e300, "big")},
		{`{"$b:aGk=":1}`, tbl("hi", 1)},
		{`{"a":1,"a":2}`, tbl("a", 2)},
		{`{"a":1,"a":null}`, newTable()},
		{`{"a":null}`, newTable()},
		{`{"$5":null}`, newTable()},
		{`{"$1":1,"$1":null}`, newTable()},
		{`{"$true":null,"$1.5":null}`, newTable()},
		{`{"$3":"c","$1":"a"}`, tbl(1, "a", 3, "c")},
	}
	for _, c := range cases {
		got, err := Decode([]byte(c.in))
		if err != nil {
			t.Errorf("Decode(%s): %v", c.in, err)
			continue
		}
		if d := deepEqual(c.want, got); d != "" {
			t.Errorf("Decode(%s): %s", c.in, d)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		in  string
		is  error
		off int // -1: don't check
	}{
		{``, ErrInvalidData, 0},
		{`   `, ErrInvalidData, 3},
		{`{`, ErrInvalidData, 1},
		{`[1,`, ErrInvalidData, 3},
		{`[1,]`, ErrInvalidData, 3},
		{`[1 2]`, ErrInvalidData, 3},
		{`[1,2,x]`, ErrInvalidData, 5},
		{`{"a"}`, ErrInvalidData, 4},
		{`{"a":}`, ErrInvalidData, 5},
		{`{"a":1,}`, ErrInvalidData, 7},
		{`{a:1}`, ErrInvalidData, 1},
		{`{'a':1}`, ErrInvalidData, 1},
		{`tru`, ErrInvalidData, 0},
		{`nul`, ErrInvalidData, 0},
		{`True`, ErrInvalidData, 0},
		{`01`, ErrInvalidData, 1},
		{`1.`, ErrInvalidData, 0},
		{`.5`, ErrInvalidData, 0},
		{`+1`, ErrInvalidData, 0},
		{`1e`, ErrInvalidData, 0},
		{`--1`, ErrInvalidData, 0},
		{`0x10`, ErrInvalidData, 1},
		{`NaN`, ErrInvalidData, 0},
		{`Infinity`, ErrInvalidData, 0},
		{`1e999`, ErrInvalidData, 0},
		{`[-1e400]`, ErrInvalidData, 1},
		{`{"$1e999":1}`, ErrInvalidData, 1},
		{`"abc`, ErrInvalidData, 4},
		{`"\x"`, ErrInvalidData, 1},
		{`"\u12"`, ErrInvalidData, 1},
		{"\"a\x01\"", ErrInvalidData, 2},
		{"\"\xff\"", ErrInvalidData, 1},
		{"\"a\\n\xff\"", ErrInvalidData, 4},
		{"\xef\xbb\xbf1", ErrInvalidData, 0}, // BOM
		{`1 2`, ErrInvalidData, 2},
		{`[1]]`, ErrInvalidData, 3},
		{`{} x`, ErrInvalidData, 3},
		{`{"$bin":5}`, ErrInvalidData, 1},
		{`{"$bin":"!!"}`, ErrInvalidData, 1},
		{`{"$bin":"/w"}`, ErrInvalidData, 1},
		{`{"$bin":"/x=="}`, ErrInvalidData, 1}, // non-zero padding bits (strict)
		{`[{"$b:!!":1}]`, ErrInvalidData, 2},
		{strings.Repeat("[", 101) + strings.Repeat("]", 101), ErrTooDeep, 100},
		{strings.Repeat(`{"a":`, 101) + "1" + strings.Repeat("}", 101), ErrTooDeep, 500},
		{strings.Repeat(`{"a":`, 100) + `{}` + strings.Repeat("}", 100), ErrTooDeep, 500},
		{strings.Repeat(`[`, 1000000), ErrTooDeep, 100},
		{strings.Repeat(`{"":`, 1000000), ErrTooDeep, -1},
		{`{"$60000000":1}`, ErrTooSparse, 1},
		{`{"$2000000":1}`, ErrTooSparse, 1},
		{`[{"$600001":1},{"$600001":1}]`, ErrTooSparse, 16},
		{`[` + strings.Repeat(`null,`, 1100000) + `1]`, ErrTooSparse, 0},
		// Allocation guard while parsing (slots allocated, then emptied again).
		{`[{"$900000":1,"$900000":null},{"$900000":1,"$900000":null}]`, ErrTooSparse, 31},
	}
	for _, c := range cases {
		name := c.in
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		v, err := Decode([]byte(c.in))
		if err == nil {
			t.Errorf("Decode(%q) = %v, want error", name, v)
			continue
		}
		if !errors.Is(err, c.is) {
			t.Errorf("Decode(%q): %v is not %v", name, err, c.is)
		}
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("Decode(%q): %T is not *DecodeError", name, err)
			continue
		}
		if c.off >= 0 && de.Offset != c.off {
			t.Errorf("Decode(%q): offset %d, want %d (%v)", name, de.Offset, c.off, err)
		}
		if !strings.HasPrefix(err.Error(), "codec: ") || !strings.Contains(err.Error(), " at offset ") {
			t.Errorf("Decode(%q): bad message %q", name, err)
		}
	}
}

func TestDecodeErrorMessages(t *testing.T) {
	cases := map[string]string{
		`[1,2,x]`:                `codec: invalid data at offset 5: unexpected 'x'`,
		`{"a" 1}`:                `codec: invalid data at offset 5: unexpected '1', expected ':' after object key`,
		`[1] x`:                  `codec: invalid data at offset 4: unexpected data after value`,
		`1e999`:                  `codec: invalid data at offset 0: number 1e999 overflows float64`,
		"\"\x01\"":               `codec: invalid data at offset 1: control character byte 0x01 in string`,
		`{"$bin":1}`:             `codec: invalid data at offset 1: "$bin" value must be a base64 string`,
		strings.Repeat("[", 101): `codec: table nesting deeper than 100 at offset 100`,
	}
	for in, want := range cases {
		_, err := Decode([]byte(in))
		if err == nil || err.Error() != want {
			t.Errorf("Decode(%q):\n got %v\nwant %s", in, err, want)
		}
	}
}

func TestDecodedTableWorksInLua(t *testing.T) {
	v, err := Decode([]byte(`{"$1":10,"$2":20,"$3":30,"name":"hero","$true":"yes","$1.5":"f","$$x":"dollar","inv":[1,null,3]}`))
	if err != nil {
		t.Fatal(err)
	}
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("t", v)
	err = L.DoString(`
		assert(getmetatable(t) == nil, "metatable")
		assert(#t == 3, "len " .. #t)
		local s = 0
		for i, x in ipairs(t) do s = s + x end
		assert(s == 60, "ipairs sum " .. s)
		local n = 0
		for k, x in pairs(t) do n = n + 1 end
		assert(n == 8, "pairs count " .. n)
		assert(t.name == "hero" and t[true] == "yes" and t[1.5] == "f" and t["$x"] == "dollar")
		assert(t.inv[1] == 1 and t.inv[2] == nil and t.inv[3] == 3)
		table.insert(t, 40)
		assert(t[4] == 40)
		setmetatable(t, {__index = function() return "dflt" end})
		assert(t.missing == "dflt")
		out = {}
		for k, x in pairs(t.inv) do out[#out+1] = k end
	`)
	if err != nil {
		t.Fatal(err)
	}
	// A table built by Lua encodes the same as the decoded one.
	if err := L.DoString(`u = {10, 20, 30, name = "hero"}`); err != nil {
		t.Fatal(err)
	}
	b, err := Encode(L.GetGlobal("u"))
	if err != nil || string(b) != `{"$1":10,"$2":20,"$3":30,"name":"hero"}` {
		t.Fatalf("Encode(lua table) = %s, %v", b, err)
	}
}

func TestDecodeLenient(t *testing.T) {
	cases := []struct {
		in   string
		want lua.LValue
	}{
		{"hello world", lua.LString("hello world")},
		{"", lua.LString("")},
		{"\xff\x00\xfe", lua.LString("\xff\x00\xfe")},
		{`{"broken":`, lua.LString(`{"broken":`)},
		{"1 2", lua.LString("1 2")},
		{`"hi"`, lua.LString("hi")},
		{`42`, lua.LNumber(42)},
		{` true`, lua.LTrue},
		{`{"$bin":"aGk="}`, lua.LString("hi")},
		{`{"a":[1]}`, tbl("a", arr(1))},
	}
	for _, c := range cases {
		got := DecodeLenient([]byte(c.in))
		if d := deepEqual(c.want, got); d != "" {
			t.Errorf("DecodeLenient(%q): %s", c.in, d)
		}
	}
}

func TestFormatNumber(t *testing.T) {
	cases := []struct {
		f    float64
		want string
		ok   bool
	}{
		{0, "0", true},
		{math.Copysign(0, -1), "0", true},
		{5, "5", true},
		{-3, "-3", true},
		{1.5, "1.5", true},
		{-0.25, "-0.25", true},
		{0.1, "0.1", true},
		{1e15, "1000000000000000", true},
		{1<<53 - 1, "9007199254740991", true},
		{-(1<<53 - 1), "-9007199254740991", true},
		{1 << 53, "9.007199254740992e+15", true},
		{-(1 << 53), "-9.007199254740992e+15", true},
		{1e21, "1e+21", true},
		{1e300, "1e+300", true},
		{-1e-300, "-1e-300", true},
		{0.000001, "1e-06", true},
		{123.456, "123.456", true},
		{math.MaxFloat64, "1.7976931348623157e+308", true},
		{math.SmallestNonzeroFloat64, "5e-324", true},
		{math.NaN(), "", false},
		{math.Inf(1), "", false},
		{math.Inf(-1), "", false},
	}
	for _, c := range cases {
		got, ok := FormatNumber(c.f)
		if got != c.want || ok != c.ok {
			t.Errorf("FormatNumber(%v) = %q, %v; want %q, %v", c.f, got, ok, c.want, c.ok)
		}
		if ok {
			back, pok := ParseNumber([]byte(got))
			if !pok || back != c.f {
				t.Errorf("ParseNumber(FormatNumber(%v)) = %v, %v", c.f, back, pok)
			}
			b, err := Encode(lua.LNumber(c.f))
			if err != nil || string(b) != got {
				t.Errorf("Encode(%v) = %s, %v; FormatNumber says %s", c.f, b, err, got)
			}
		}
	}
}

func TestParseNumber(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"5", 5, true},
		{"-3", -3, true},
		{" 42\n", 42, true},
		{"\t\r\n 1.5 \t", 1.5, true},
		{"0", 0, true},
		{"-0", 0, true},
		{"1e3", 1000, true},
		{"1E+3", 1000, true},
		{"2.5e-1", 0.25, true},
		{"9007199254740993", 9007199254740992, true}, // rounds like strconv
		{"123456789012345", 123456789012345, true},
		{"1e-400", 0, true},
		{"1.7976931348623157e308", math.MaxFloat64, true},
		{"", 0, false},
		{"   ", 0, false},
		{"1e309", 0, false},
		{"-1e309", 0, false},
		{"abc", 0, false},
		{"1a", 0, false},
		{"01", 0, false},
		{"+1", 0, false},
		{".5", 0, false},
		{"5.", 0, false},
		{"1e", 0, false},
		{"0x10", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"1 2", 0, false},
		{`"5"`, 0, false},
		{"[5]", 0, false},
		{"\v5", 0, false}, // not JSON whitespace
		{"5\x00", 0, false},
		{"１", 0, false}, // fullwidth digit
	}
	for _, c := range cases {
		got, ok := ParseNumber([]byte(c.in))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("ParseNumber(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestEncodeConcurrent(t *testing.T) {
	// Encoders are pooled; run in parallel under -race.
	v := gameTable()
	want, err := Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 200; i++ {
				b, err := Encode(v)
				if err != nil || string(b) != string(want) {
					done <- "mismatch"
					return
				}
				if _, err := Encode(tbl("f", lua.LChannel(nil))); err == nil {
					done <- "no error"
					return
				}
			}
			done <- ""
		}()
	}
	for g := 0; g < 8; g++ {
		if msg := <-done; msg != "" {
			t.Fatal(msg)
		}
	}
}

// gameTable is a 10-field player record.
func gameTable() *lua.LTable {
	return tbl(
		"id", 1234567,
		"name", "Dragon Slayer",
		"level", 42,
		"hp", 1250.5,
		"alive", true,
		"guild", "Knights of Ni",
		"pos", tbl("x", 10.5, "y", -3, "z", 0),
		"inventory", arr(101, 102, 103, 2001),
		"tags", arr("pvp", "raid"),
		"last_login", 1712345678,
	)
}

func BenchmarkEncodeTable(b *testing.B) {
	v := gameTable()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeTable(b *testing.B) {
	data, err := Encode(gameTable())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
