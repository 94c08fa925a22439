package pubsub

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// goroutines returns the stack of every goroutine by its id.
func goroutines() map[string]string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	all := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
		all[id] = g
	}
	return all
}

// noNewGoroutines fails the test unless, within 2 s, no goroutine absent
// from before (goroutines()) has a stack mentioning one of marks (package
// paths: the goroutine runs or was created by their code). Other code's
// goroutines (the runtime's, the testing package's) do not count, nor do
// ones that end within 2 s; one the code under test started and that
// keeps running does, and is printed.
func noNewGoroutines(t *testing.T, before map[string]string, marks ...string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		var extra []string
		for id, g := range goroutines() {
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
