package queue

import (
	"bytes"
	"fmt"
	"testing"
)

// FuzzParseElements feeds the decoders of what Redis holds (which other
// services may write to) with arbitrary strings: they must never panic, and
// must read back what the scripts write.
func FuzzParseElements(f *testing.F) {
	f.Add("1718000000000:hello", "3.5", "1718000000000-7")
	f.Add(":", "inf", "-")
	f.Add("00000000000000011718000000000:x:y", "-0", "1-")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, raw, score, id string) {
		if m, ok := parseListElement(raw); ok {
			if !bytes.HasSuffix([]byte(raw), m.Body) {
				t.Fatalf("body %q not the tail of %q", m.Body, raw)
			}
		}
		for _, k := range []Kind{KindDelay, KindPriority} {
			_, _ = parseZsetMember(raw, score, k)
		}
		if key, ok := parseKey(id); ok && key.String() != id {
			// Leading zeros and signs parse but do not round-trip; the
			// scripts never write them.
			_ = key
		}
		// What the scripts write reads back.
		member := fmt.Sprintf("%016x%d:%s", 42, 1718000000000, raw)
		m, err := parseZsetMember(member, "12", KindPriority)
		if err != nil || string(m.Body) != raw || m.Priority != 12 || m.EnqueuedAt.UnixMilli() != 1718000000000 {
			t.Fatalf("member %q: %+v %v", member, m, err)
		}
	})
}
