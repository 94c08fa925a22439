package codec

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

func FuzzDecode(f *testing.F) {
	seeds := []string{
		`null`, `true`, `false`, `0`, `-0`, `1.5`, `-1e-300`, `1e300`, `9.007199254740992e+15`,
		`""`, `"hello"`, `"中文"`, `"a\"b\\c\n\u0001\ud83d\ude00\ud800"`,
		`{"$bin":"/w=="}`, `{"$bin":"AP/+IGJpbmFyeQ=="}`, `{"$$bin":"x"}`, `{"$bin":"/w==","a":1}`,
		`[]`, `{}`, `[1,2,3]`, `[1,null,3]`, `[null]`, `[[[[[]]]]]`,
		`{"a":1,"b":"x"}`, `{"$1":"a","$3":"c"}`, `{"$-1":1,"$1.5":2,"$0":3,"$1e+300":4}`,
		`{"$true":1,"$false":2}`, `{"$$x":1,"$":2,"$foo":3}`, `{"$b:/w==":1}`,
		`{"1":"s","$1":"n"}`, `{"$1":1,"$2":2,"n":3}`, `{"a":{"b":{"c":[1,{"d":null}]}}}`,
		`{"$1.0":1,"$1":2}`, `{"a":1,"a":null}`, `{"$100":1}`, `{"$5":null,"$2":1}`,
		// broken
		``, `{`, `[1,`, `[1,]`, `{"a"}`, `tru`, `01`, `1e999`, `"\x"`, `"abc`, "\"\xff\"",
		`{"$bin":5}`, `{"$bin":"!"}`, `{"$b:!":1}`, `1 2`, `[1]]`, `{"$60000000":1}`,
		strings.Repeat("[", 101) + strings.Repeat("]", 101),
		strings.Repeat(`{"a":`, 100) + `{"$bin":"/w=="}` + strings.Repeat("}", 100),
		"hello world",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	for _, v := range []lua.LValue{gameTable(), nested(60, arr("\xff", 1.25, tbl(true, false)))} {
		b, err := Encode(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data)
		lenient := DecodeLenient(data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset < 0 || de.Offset > len(data) {
				t.Fatalf("bad error %T %v", err, err)
			}
			if lenient != lua.LString(data) {
				t.Fatalf("DecodeLenient of invalid data is not the raw string")
			}
			return
		}
		if d := deepEqual(v, lenient); d != "" {
			t.Fatalf("DecodeLenient differs from Decode: %s", d)
		}
		// We only accept JSON (a strict subset of what encoding/json accepts).
		if !json.Valid(data) {
			t.Fatalf("Decode accepted invalid JSON %q", data)
		}
		enc, err := Encode(v)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)): %v", data, err)
		}
		v2, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))) = %s: %v", data, enc, err)
		}
		if d := deepEqual(v, v2); d != "" {
			t.Fatalf("round trip %q -> %s: %s", data, enc, d)
		}
		enc2, err := Encode(v2)
		if err != nil || string(enc2) != string(enc) {
			t.Fatalf("encoding not canonical: %s vs %s (%v)", enc, enc2, err)
		}
	})
}

func FuzzRoundTripString(f *testing.F) {
	for _, s := range []string{"", "hello", "中文", "\x00\xff\xfe binary", "\"\\\n\t\x01", "$bin", "$", "$$x", "1", "\xed\xa0\x80", "\uFFFD", "b:AA=="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check := func(v lua.LValue) {
			b, err := Encode(v)
			if err != nil {
				t.Fatalf("Encode(%q): %v", s, err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode(Encode(%q)) = Decode(%s): %v", s, b, err)
			}
			if d := deepEqual(v, got); d != "" {
				t.Fatalf("%q -> %s: %s", s, b, d)
			}
		}
		check(lua.LString(s))
		check(tbl(s, s))        // as a key
		check(tbl(s, 1, 1, s))  // next to a number key
		check(arr(s, s+"\xff")) // inside an array, plus a binary variant
		// A valid UTF-8 string encodes exactly like encoding/json would
		// (modulo HTML and U+2028/2029 escaping, which we don't do).
		if b, _ := Encode(lua.LString(s)); b[0] == '"' {
			var back string
			if err := json.Unmarshal(b, &back); err != nil || back != s {
				t.Fatalf("encoding/json reads %s as %q (%v), want %q", b, back, err, s)
			}
		}
	})
}

func FuzzParseNumber(f *testing.F) {
	for _, s := range []string{"5", " -3 ", "1.5e3", "01", "1e999", "-", "", "1 2", "\t0\n", "0.0e-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := ParseNumber([]byte(s))
		// Reference: encoding/json must see exactly one number, and strconv
		// must parse it without overflow.
		trimmed := strings.Trim(s, " \t\r\n")
		isNum := json.Valid([]byte(s)) && trimmed != "" &&
			(trimmed[0] == '-' || (trimmed[0] >= '0' && trimmed[0] <= '9'))
		want, err := strconv.ParseFloat(trimmed, 64)
		wantOK := isNum && err == nil // strconv reports overflow, not underflow
		if ok != wantOK || (ok && got != want) {
			t.Fatalf("ParseNumber(%q) = %v, %v; reference %v, %v (%v)", s, got, ok, want, wantOK, err)
		}
		if ok {
			v, derr := Decode([]byte(s))
			if derr != nil || v != lua.LNumber(got) {
				t.Fatalf("Decode(%q) = %v, %v; ParseNumber says %v", s, v, derr, got)
			}
		}
	})
}
