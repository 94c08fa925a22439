package queue

import (
	"context"
	"testing"
)

// The notifier gives a delay or priority message popped for a waiter that
// gave up back with unpop. zset_unpop.lua used to read its score, member
// pairs the other way round (ZADD key member score): every such give back
// failed with "value is not a valid float", so the message stayed stashed
// in this process — out of other processes' reach, and lost when the
// notifier stopped.
func TestRedisSortedUnpopRestoresScoreAndMember(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		if e.memory {
			return // unpop of the notifier is the Redis backend's
		}
		pq, err := e.b.Priority("unpop_zset_prio", testOptions())
		if err != nil {
			t.Fatal(err)
		}
		dq, err := e.b.Delay("unpop_zset_delay", testOptions())
		if err != nil {
			t.Fatal(err)
		}
		do(t, pq.Push([]byte("p"), 7))
		do(t, dq.Push([]byte("d"), 0))
		for _, c := range []struct {
			s   *redisSorted
			pop func() (Message, error)
		}{
			{pq.(*redisPriority).redisSorted, func() (Message, error) { return pq.Pop().Do(context.Background()) }},
			{dq.(*redisDelay).redisSorted, func() (Message, error) { return dq.Pop().Do(context.Background()) }},
		} {
			m, err := c.pop()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.s.unpop([]Message{m}).Do(context.Background()); err != nil {
				t.Fatalf("%s: unpop: %v", c.s.name, err)
			}
			again, err := c.pop()
			if err != nil {
				t.Fatalf("%s: pop after unpop: %v", c.s.name, err)
			}
			if string(again.Body) != string(m.Body) || again.Priority != m.Priority || !again.Due.Equal(m.Due) ||
				!again.EnqueuedAt.Equal(m.EnqueuedAt) {
				t.Fatalf("%s: popped %+v after unpop, want %+v", c.s.name, again, m)
			}
		}
	})
}
