package rank

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/shieldrt/shieldglobal/core/store"
)

// The archive format, written byte for byte the same by both backends
// (scripts/lib.lua has the Lua twins of formatNumber and quote):
//
//	[{"uid":"p3","score":1100,"rank":1},{"uid":"p1","score":0.5,"rank":2}]
//
// Numbers: integers with |x| <= 2^53 in plain digits, other values in the
// shortest of %.15g, %.16g and %.17g that reads back as exactly x. Strings:
// `"` and `\` backslash-escaped, control bytes (0x00-0x1f, 0x7f) as \u00XX,
// every other byte as it is (uids are expected to be UTF-8).

// formatNumber is the exact decimal text of x.
func formatNumber(x float64) string {
	if x == 0 {
		return "0"
	}
	if x == math.Trunc(x) && math.Abs(x) <= 1<<53 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	for _, prec := range [...]int{15, 16} {
		if s := fmt.Sprintf("%.*g", prec, x); parses(s, x) {
			return s
		}
	}
	return fmt.Sprintf("%.17g", x)
}

func parses(s string, x float64) bool {
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f == x
}

// quote is s as a JSON string under the archive rule.
func quote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// encodeArchive is the archive JSON of entries.
func encodeArchive(entries []Entry) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"uid":`)
		quote(&b, e.UID)
		b.WriteString(`,"score":`)
		b.WriteString(formatNumber(e.Score))
		b.WriteString(`,"rank":`)
		b.WriteString(strconv.Itoa(e.Rank))
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String()
}

// decodeArchive reads archive JSON (written by either backend, or by
// another service following the format). Errors wrap store.ErrReply.
func decodeArchive(what string, data []byte) ([]Entry, error) {
	var raw []struct {
		UID   *string  `json:"uid"`
		Score *float64 `json:"score"`
		Rank  *int     `json:"rank"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w: archive is not a JSON array of entries: %v", what, store.ErrReply, err)
	}
	entries := make([]Entry, len(raw))
	for i, r := range raw {
		if r.UID == nil || r.Score == nil || r.Rank == nil {
			return nil, fmt.Errorf("%s: %w: archive entry %d lacks uid, score or rank", what, store.ErrReply, i+1)
		}
		entries[i] = Entry{UID: *r.UID, Score: *r.Score, Rank: *r.Rank}
	}
	return entries, nil
}
