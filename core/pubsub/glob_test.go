package pubsub

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shieldrt/shieldglobal/core/store"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// globCases are stringmatchlen's answers: the examples of the Redis KEYS
// documentation, Redis's own regression tests, and the quirks of its C code.
var globCases = []struct {
	pattern, s string
	want       bool
}{
	// KEYS documentation: "h?llo matches hello, hallo and hxllo".
	{"h?llo", "hello", true}, {"h?llo", "hallo", true}, {"h?llo", "hxllo", true},
	{"h?llo", "hllo", false}, {"h?llo", "heello", false},
	// "h*llo matches hllo and heeeello".
	{"h*llo", "hllo", true}, {"h*llo", "heeeello", true}, {"h*llo", "hllx", false},
	// "h[ae]llo matches hello and hallo, but not hillo".
	{"h[ae]llo", "hello", true}, {"h[ae]llo", "hallo", true}, {"h[ae]llo", "hillo", false},
	// "h[^e]llo matches hallo, hbllo, ... but not hello".
	{"h[^e]llo", "hallo", true}, {"h[^e]llo", "hbllo", true}, {"h[^e]llo", "hello", false},
	// "h[a-b]llo matches hallo and hbllo".
	{"h[a-b]llo", "hallo", true}, {"h[a-b]llo", "hbllo", true}, {"h[a-b]llo", "hcllo", false},
	// "Use \ to escape special characters if you want to match them verbatim."
	{`h\?llo`, "h?llo", true}, {`h\?llo`, "hello", false},
	{`h\*llo`, "h*llo", true}, {`h\*llo`, "heello", false},
	{`h\[a\]llo`, "h[a]llo", true}, {`h\[a\]llo`, "hallo", false},
	{`\\`, `\`, true}, {`\a`, "a", true},

	// Plain strings, empty strings, stars.
	{"", "", true}, {"", "a", false}, {"abc", "abc", true}, {"abc", "abd", false},
	{"abc", "ab", false}, {"ab", "abc", false},
	{"*", "", false}, // the loop never runs on an empty string
	{"*", "anything", true}, {"**", "x", true}, {"a*", "a", true}, {"a**", "a", true},
	{"*a", "a", true}, {"*a", "ba", true}, {"*a", "ab", false},
	{"a*b", "ab", true}, {"a*b", "axxb", true}, {"a*b", "axxbx", false}, {"a*b*c", "a-b-c", true},
	{"?", "", false}, {"?", "a", true}, {"??", "a", false}, {"*?", "a", true}, {"?*", "", false},

	// Classes.
	{"[abc]", "b", true}, {"[abc]", "d", false}, {"[abc]", "", false},
	{"[^abc]", "d", true}, {"[^abc]", "a", false},
	{"[a-c]", "b", true}, {"[a-c]", "d", false},
	{"[c-a]", "b", true}, // reversed range is swapped
	{"[a-cx-z]", "y", true}, {"[a-cx-z]", "m", false},
	{`[\]]`, "]", true}, {`[\]]`, `\`, false},
	// An escaped '-' is no range.
	{`[a\-z]`, "-", true}, {`[a\-z]`, "b", false},
	// A lone '\' in a class is literal (and the class runs to the end).
	{`[\`, `\`, true},
	// "[]" is an empty class.
	{"[]", "]", false}, {"[]a]", "a", false}, {"[]a]", "]", false},
	// An unterminated class runs to the end of the pattern.
	{"[abc", "a", true}, {"[abc", "c", true}, {"[abc", "ab", false},
	{"[", "[", false}, {"[", "a", false},
	{"[^", "x", true}, {"[^", "", false},
	{"[a-]", "^", true}, {"[a-]", "b", false}, // the range a-] swapped: ']'..'a'
	{"x[a-c]y", "xby", true}, {"x[a-c]y", "xdy", false},

	// Escapes outside classes.
	{`a\`, `a\`, true}, {`a\`, "a", false}, // a trailing lone '\' is literal
	{`\*`, "*", true}, {`\*`, "a", false}, {`\?`, "?", true}, {`\[`, "[", true},

	// Bytes, not runes: binary safe, and ranges compare as signed char.
	{"a\x00b", "a\x00b", true}, {"a?b", "a\x00b", true}, {"é", "é", true}, {"?", "é", false}, {"??", "é", true},
	{"[a-\xff]", "\xff", true}, {"[a-\xff]", "b", false}, {"[a-\xff]", "\x90", false}, {"[a-\xff]", "A", true},
	{"[\x80-\xff]", "\x90", true}, {"[\x80-\xff]", "a", false}, {"[\x01-\x7f]", "\x90", false},

	// Redis regression tests: "pattern matching long nested loops" is false
	// (and fast), "very long nested loops" hits the nesting limit.
	{strings.Repeat("a*", 32) + "b", strings.Repeat("a", 80), false},
	{strings.Repeat("*?", 50000), strings.Repeat("a", 50000), false},
	{strings.Repeat("*?", 1000), strings.Repeat("a", 1000), true}, // nesting 1000 is allowed
	{strings.Repeat("*?", 1002), strings.Repeat("a", 1002), false},
}

func TestGlobMatch(t *testing.T) {
	for _, c := range globCases {
		if got := globMatch(c.pattern, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", trunc(c.pattern), trunc(c.s), got, c.want)
		}
	}
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func TestMatchChannel(t *testing.T) {
	// On a prefixed bus the empty channel is matched by patterns of stars.
	for _, c := range []struct {
		pattern, channel string
		want             bool
	}{
		{"*", "", true}, {"", "", true}, {"***", "", true}, {"?", "", false}, {"a*", "", false},
		{"*", "a", true}, {"", "a", false}, {"h?llo", "hello", true},
	} {
		if got := matchChannel(c.pattern, c.channel); got != c.want {
			t.Errorf("matchChannel(%q, %q) = %v, want %v", c.pattern, c.channel, got, c.want)
		}
	}
}

// TestGlobMatchesRedisKEYS compares the matcher with the real server on
// random patterns: KEYS uses the same stringmatchlen as PSUBSCRIBE.
func TestGlobMatchesRedisKEYS(t *testing.T) {
	c := testredis.Standalone(t)
	ctx := context.Background()
	prefix := testredis.Prefix(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const strAlpha = "ab-]^\\*?[\x00\x90\xff"
	const patAlpha = "ab-]^\\*?[[*\x00\x90\xff"
	gen := func(alpha string, max int) string {
		b := make([]byte, rng.IntN(max+1))
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return string(b)
	}
	strs := map[string]bool{"": true}
	for len(strs) < 300 {
		strs[gen(strAlpha, 5)] = true
	}
	var args []any
	for s := range strs {
		args = append(args, prefix+s, "1")
	}
	if err := c.MSet(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for s := range strs {
			c.Del(context.Background(), prefix+s)
		}
	})
	for range 1500 {
		p := gen(patAlpha, 7)
		keys, err := c.Keys(ctx, store.GlobEscape(prefix)+p).Result()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, k := range keys {
			got[strings.TrimPrefix(k, prefix)] = true
		}
		for s := range strs {
			if want := got[s]; matchChannel(p, s) != want {
				t.Errorf("pattern %q, string %q: Redis says %v, matchChannel %v", p, s, want, !want)
			}
		}
	}
}

func FuzzGlobMatch(f *testing.F) {
	for _, c := range globCases {
		if len(c.pattern) < 200 {
			f.Add(c.pattern, c.s)
		}
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		got := globMatch(pattern, s) // must not panic
		// A non-empty literal prefix is transparent except for the empty
		// string, which is what matchChannel encodes.
		if pre := globMatch("p"+pattern, "p"+s); matchChannel(pattern, s) != pre {
			t.Fatalf("matchChannel(%q, %q) = %v, but with a prefix Redis says %v", pattern, s, !pre, pre)
		}
		if s != "" && matchChannel(pattern, s) != got {
			t.Fatalf("matchChannel and globMatch disagree on a non-empty string")
		}
		// An escaped string matches itself (what the Redis bus relies on
		// for its prefix). store.GlobEscape works on runes, so it mangles
		// invalid UTF-8 that also contains a metacharacter ("*\xff"); bus
		// prefixes are UTF-8 configuration strings.
		if utf8.ValidString(s) && !globMatch(store.GlobEscape(s), s) {
			t.Fatalf("GlobEscape(%q) = %q does not match itself", s, store.GlobEscape(s))
		}
	})
}
