package codec

import "testing"

func TestIsNumber(t *testing.T) {
	for _, s := range []string{"0", "-0", "5", "-3", "1.5", "0.25", "1e5", "1E5", "1e+300", "1e-7", "-1.25E-3", "123456789012345678901234567890"} {
		if !IsNumber([]byte(s)) {
			t.Errorf("IsNumber(%q) = false", s)
		}
	}
	for _, s := range []string{"", "-", "+1", ".5", "5.", "01", "-01", "1e", "1e+", "1.e5", "0x10", "inf", "NaN", "Infinity",
		" 5", "5 ", "5\n", `"5"`, "true", "null", "1_000", "1.5.5", "--1", "5e5e5"} {
		if IsNumber([]byte(s)) {
			t.Errorf("IsNumber(%q) = true", s)
		}
	}
}
