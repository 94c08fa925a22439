package store

import "testing"

func TestHashTag(t *testing.T) {
	for key, want := range map[string]string{
		"shield:lock:{a}":      "a",
		"x{a}y{b}":             "a",
		"x{}y{b}":              "x{}y{b}", // an empty first tag: the whole key
		"no tag":               "no tag",
		"open{only":            "open{only",
		"shield:rank:{r}:2025": "r",
	} {
		if got := HashTag(key); got != want {
			t.Errorf("HashTag(%q) = %q, want %q", key, got, want)
		}
	}
}
