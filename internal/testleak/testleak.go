// Package testleak checks, in tests, that code started no goroutine that
// outlives it: a snapshot of the goroutines before, and a bounded poll
// after for new ones whose stacks mention the code's packages. Other
// goroutines of the test binary (the runtime's, the testing package's,
// earlier tests' ending ones) do not count, unlike a NumGoroutine count.
package testleak

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Goroutines is a snapshot: every goroutine's stack by its id.
type Goroutines map[string]string

// Snapshot returns the stack of every goroutine by its id.
func Snapshot() Goroutines {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	all := Goroutines{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
		all[id] = g
	}
	return all
}

// NoNew fails the test unless, within 2 s, no goroutine absent from
// before has a stack mentioning one of marks (package paths: the goroutine
// runs or was created by their code). One that ends within 2 s does not
// count; one that keeps running does, and is printed.
func NoNew(t testing.TB, before Goroutines, marks ...string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		var extra []string
		for id, g := range Snapshot() {
			if _, old := before[id]; old {
				continue
			}
			for _, m := range marks {
				if strings.Contains(g, m) {
					extra = append(extra, g)
					break
				}
			}
		}
		if len(extra) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines started:\n%s", len(extra), strings.Join(extra, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
