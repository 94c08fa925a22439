package pubsub

import (
	"strings"
	"testing"
)

func TestInsideHandler(t *testing.T) {
	if !strings.HasSuffix(callHandlerName, "/core/pubsub.callHandler") {
		t.Fatalf("callHandlerName = %q", callHandlerName)
	}
	if insideHandler() {
		t.Fatal("insideHandler outside a handler")
	}
	var inside, nested bool
	var deep func(int) bool
	deep = func(n int) bool {
		if n == 0 {
			return insideHandler()
		}
		return deep(n - 1)
	}
	callHandler(newSubscriber(func(Message) {
		inside = insideHandler()
		nested = deep(500) // beyond the first batch of frames
	}, subActive), Message{})
	if !inside || !nested {
		t.Fatalf("insideHandler in a handler = %v, %v (nested)", inside, nested)
	}
}

func TestGoid(t *testing.T) {
	a := goid()
	ch := make(chan uint64)
	go func() { ch <- goid() }()
	if b := <-ch; a == 0 || b == 0 || a == b || goid() != a {
		t.Fatalf("goid: %d %d", a, b)
	}
}
