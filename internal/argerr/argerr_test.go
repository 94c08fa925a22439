package argerr

import (
	"errors"
	"fmt"
	"testing"
)

func TestNew(t *testing.T) {
	errInvalid := errors.New("rank: invalid argument")
	err := fmt.Errorf("shield.rank:incr: %w", New(errInvalid, "rank", "incr", "daily", "1e308 + 1e308 overflows"))
	if !errors.Is(err, errInvalid) {
		t.Fatal("does not match its sentinel")
	}
	if got, want := err.Error(), `shield.rank:incr: rank: incr "daily": invalid argument: 1e308 + 1e308 overflows`; got != want {
		t.Fatalf("%q; want %q", got, want)
	}
}

func TestDetail(t *testing.T) {
	errInvalid := errors.New("queue: invalid argument")
	err := Detail(errInvalid, "queue", `group name "" must be non-empty`)
	if !errors.Is(err, errInvalid) || err.Error() != `queue: invalid argument: group name "" must be non-empty` {
		t.Fatalf("%v", err)
	}
}
