package shieldglobal

import (
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
)

// A plain or priority message whose consumer handler the shutdown
// interrupted is given back to its place — ahead of the messages pushed
// after it — as a message that reached a waiter that gave up always was
// (core/queue's unpop). It used to be pushed again, at the tail (plain) or
// behind its equal priorities: two meanings of "give back", and the queue's
// FIFO order broken by every restart of a consumer.
func TestInterruptedConsumerGivesItsMessageBackInPlace(t *testing.T) {
	backends := map[string]func(t *testing.T) Config{
		"memory":   func(*testing.T) Config { return config.Default() },
		"redis":    redisConfig,
		"cluster":  clusterConfig,
		"sentinel": sentinelConfig,
	}
	for name, cfg := range backends {
		t.Run(name, func(t *testing.T) {
			m := newModule(t, cfg(t))
			for _, kind := range []struct{ ctor string }{{"queue"}, {"priority_queue"}} {
				t.Run(kind.ctor, func(t *testing.T) {
					L := lua.NewState()
					defer L.Close()
					worker, err := m.NewRuntime(L)
					if err != nil {
						t.Fatal(err)
					}
					src := `
						local kind, name = ...
						local q = shield[kind](name)
						local function push(msg)
							if kind == "queue" then q:push(msg) else q:push(msg, 5) end
						end
						started = false
						q:consume("w", function() started = true; shield.sleep(math.huge) end)
						push("first")
						while not started do shield.sleep(1) end
						push("second")`
					qname := "giveback_" + kind.ctor
					if err := worker.RunString(src, "worker.lua", lua.LString(kind.ctor), lua.LString(qname)); err != nil {
						t.Fatal(err)
					}
					worker.Close(50 * time.Millisecond) // interrupts the handler holding "first"

					reader := newRuntime(t, m)
					if err := reader.RunString(`
						local kind, name = ...
						local q = shield[kind](name)
						local deadline = shield.now_ms() + 5000
						while q:length() < 2 and shield.now_ms() < deadline do shield.sleep(5) end
						assert(q:length() == 2, "the interrupted message was not given back: length " .. q:length())
						local a, b = q:pop(), q:pop()
						assert(a == "first" and b == "second",
							"popped " .. tostring(a) .. ", " .. tostring(b) .. "; want first, second (given back in place)")`,
						"reader.lua", lua.LString(kind.ctor), lua.LString(qname)); err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
}
