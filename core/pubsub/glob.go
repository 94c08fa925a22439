package pubsub

// This file is a port of Redis's glob matcher, stringmatchlen in src/util.c
// (Redis 7.x, case-sensitive as PSUBSCRIBE uses it), including its quirks:
//
//   - '*' matches any run of bytes, '?' exactly one byte;
//   - "[abc]", "[^abc]" and "[a-z]" are classes; a reversed range "[z-a]"
//     is swapped; inside a class "\x" is the literal x; a class left open at
//     the end of the pattern ("[abc") runs to the end of the pattern;
//   - "\x" outside a class is the literal x, a trailing lone "\" is the
//     literal "\";
//   - ranges compare bytes as C's signed char on x86-64 builds, so bytes
//     0x80-0xff sort below 0x00 ("[a-\xff]" is the range -1..'a');
//   - nesting of '*' deeper than 1000 never matches (Redis's protection
//     against abusive patterns).
//
// The C code reads the NUL byte that terminates every Redis string when it
// runs past the end of the pattern; here every such read is an explicit bound
// check with the same outcome.

// maxGlobNesting is Redis's limit on '*' recursion.
const maxGlobNesting = 1000

// globMatch reports whether s matches pattern exactly as Redis's
// stringmatchlen(pattern, s, nocase=0) decides.
func globMatch(pattern, s string) bool {
	skipLonger := false
	return globMatchImpl(pattern, s, &skipLonger, 0)
}

// matchChannel reports whether a PSUBSCRIBE of pattern on a bus receives a
// PUBLISH to channel. The Redis bus puts a non-empty literal prefix in front
// of both, which changes one case: after the prefix the string is exhausted
// when channel is "", and Redis then skips any '*' left in the pattern, so a
// pattern made only of '*' (or the empty pattern) matches the empty channel.
// For every other channel the prefix is transparent.
func matchChannel(pattern, channel string) bool {
	if channel == "" {
		for i := 0; i < len(pattern); i++ {
			if pattern[i] != '*' {
				return false
			}
		}
		return true
	}
	return globMatch(pattern, channel)
}

func globMatchImpl(p, s string, skipLonger *bool, nesting int) bool {
	if nesting > maxGlobNesting {
		return false
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) >= 2 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for len(s) > 0 {
				if globMatchImpl(p[1:], s, skipLonger, nesting+1) {
					return true
				}
				if *skipLonger {
					return false
				}
				s = s[1:]
			}
			// The rest of the pattern matches no suffix of s, so no earlier
			// '*' can succeed by consuming more of the string either.
			*skipLonger = true
			return false
		case '?':
			p = p[1:]
		case '[':
			p = p[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			match := false
			for len(p) > 0 && p[0] != ']' { // an unterminated class runs to the end
				switch {
				case len(p) >= 2 && p[0] == '\\':
					p = p[1:]
					match = match || p[0] == s[0]
				case len(p) >= 3 && p[1] == '-':
					start, end, c := int8(p[0]), int8(p[2]), int8(s[0])
					if start > end {
						start, end = end, start
					}
					p = p[2:]
					match = match || (c >= start && c <= end)
				default:
					match = match || p[0] == s[0]
				}
				p = p[1:]
			}
			if len(p) > 0 {
				p = p[1:] // the closing ']'
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if p[0] != s[0] {
				return false
			}
			p = p[1:]
		}
		s = s[1:]
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}
