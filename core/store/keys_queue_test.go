package store

import (
	"strings"
	"testing"
)

func TestQueueKeysShareTheHashTag(t *testing.T) {
	k := Keys{Prefix: "shield:"}
	for _, name := range []string{"jobs", "a}b", "with:colons", "空"} {
		keys := []string{k.Queue(name), k.QueueMeta(name), k.QueueWaiting(name), k.QueueNotify(name),
			k.QueueRetry(name, "g"), k.QueueConsumers(name, ""), k.QueueConsumers(name, "g"), k.QueueDead(name)}
		want := "shield:queue:{" + name + "}"
		for _, key := range keys {
			if !strings.HasPrefix(key, want) {
				t.Fatalf("%q does not start with %q", key, want)
			}
		}
		if len(keys) != len(uniq(keys)) {
			t.Fatalf("keys collide: %q", keys)
		}
	}
	if got := k.Queue("jobs"); got != "shield:queue:{jobs}" {
		t.Fatalf("Queue = %q", got)
	}
}

func uniq(ss []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range ss {
		m[s] = true
	}
	return m
}
