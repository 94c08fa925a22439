package kv

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/codec"
)

func TestParseNumber(t *testing.T) {
	if f, ok := parseNumber([]byte("1e+300")); !ok || f != 1e300 {
		t.Fatalf("parseNumber(1e+300) = %v, %v", f, ok)
	}
	if _, ok := parseNumber([]byte("1e400")); ok {
		t.Fatal("parseNumber accepted a number beyond float64")
	}
}

func TestFormatNumber(t *testing.T) {
	tenth := 0.1 // a variable: constant arithmetic would be exact
	for _, c := range []struct {
		x    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {5, "5"}, {-3, "-3"}, {6, "6"}, {1.5, "1.5"},
		{tenth + 0.2, "0.30000000000000004"}, {1 << 53, "9007199254740992"},
		{1e20, "100000000000000000000"}, {1e21, "1e+21"}, {1e300, "1e+300"},
		{1234567.5, "1234567.5"}, {1e-6, "0.000001"}, {1e-7, "1e-07"}, {-2.5e-8, "-2.5e-08"},
	} {
		got := string(formatNumber(c.x))
		if got != c.want {
			t.Errorf("formatNumber(%v) = %q; want %q", c.x, got, c.want)
		}
		if !codec.IsNumber([]byte(got)) {
			t.Errorf("formatNumber(%v) = %q is not a JSON number", c.x, got)
		}
		if back, _ := strconv.ParseFloat(got, 64); back != c.x {
			t.Errorf("formatNumber(%v) = %q does not round-trip", c.x, got)
		}
	}
}

func TestNormTTL(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{-time.Second, 0}, {0, 0}, {1, time.Millisecond}, {time.Millisecond, time.Millisecond},
		{1999 * time.Microsecond, time.Millisecond}, {time.Hour + 1, time.Hour},
	} {
		if got := normTTL(c.in); got != c.want {
			t.Errorf("normTTL(%v) = %v; want %v", c.in, got, c.want)
		}
	}
}
