package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// hangBound is how long a test waits for something that must not hang (a
// hang is forever; a loaded machine is slow but not that slow).
const hangBound = 15 * time.Second

// Wait returns when its context ends even while a spawned task hogs the
// loop (it never yields), and Close then interrupts that task. Wait used to
// read its failure count through the loop after ctx ended, and never
// returned: `shield run` ignored SIGTERM.
func TestWaitAndCloseWithALoopHoggedByASpawnedTask(t *testing.T) {
	var logs syncBuffer
	rt := newTestRuntime(t, &Services{Log: logTo(&logs)})
	mustRun(t, rt, "shield.spawn(function() shield.sleep(50); while true do end end)")
	deadline := time.Now().Add(hangBound)
	for rt.Responsive(100*time.Millisecond) && time.Now().Before(deadline) { // until the task spins
		time.Sleep(10 * time.Millisecond)
	}
	if rt.Responsive(100 * time.Millisecond) {
		t.Fatal("the spawned task did not start spinning")
	}
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { _, err := rt.Wait(ctx); waited <- err }()
	cancel()
	select {
	case err := <-waited:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
	case <-time.After(hangBound):
		t.Fatal("Wait did not return after its context ended while a task hogged the loop")
	}
	closed := make(chan struct{})
	go func() { rt.Close(100 * time.Millisecond); close(closed) }()
	select {
	case <-closed:
	case <-time.After(hangBound):
		t.Fatal("Close did not return")
	}
	got := rt.InterruptedTasks()
	if len(got) != 1 || got[0].Name != "spawn" || !got[0].Running || !strings.HasPrefix(got[0].At, "test.lua:1") {
		t.Fatalf("InterruptedTasks() = %+v, want the spinning spawn at test.lua:1", got)
	}
	out := logs.String()
	if !strings.Contains(out, `tasks="spawn (did not yield; at test.lua:1)"`) || !strings.Contains(out, "count=1") {
		t.Fatalf("the interrupted-tasks line does not name the spinning task:\n%s", out)
	}
}

// A task parked in a blocking call when the grace period ends is named as
// waiting in that call at its line, never as one that did not yield; the
// counts take in a task spawned but not started yet.
func TestCloseNamesParkedTasksAndCountsEveryTask(t *testing.T) {
	var logs syncBuffer
	rt := newTestRuntime(t, &Services{Log: logTo(&logs)})
	mustRun(t, rt, "shield.spawn(function()\n  shield.sleep(1e9)\nend)\nshield.sleep(1)")
	mainErr := make(chan error, 1)
	go func() {
		// Spawns a task, then spins: the spawned task never starts before
		// the interrupt.
		mainErr <- rt.RunString("shield.spawn(function() end)\nlocal n = 0\nwhile true do n = n + 1 end", "spin.lua")
	}()
	deadline := time.Now().Add(hangBound)
	for rt.Responsive(100*time.Millisecond) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := rt.Tasks(); n != 3 {
		t.Fatalf("Tasks() = %d with the parked task, the spinning one and the one it spawned", n)
	}
	rt.Close(100 * time.Millisecond)
	select {
	case err := <-mainErr:
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("the spinning main chunk ended with %v", err)
		}
	case <-time.After(hangBound):
		t.Fatal("RunString did not return")
	}
	out := logs.String()
	for _, want := range []string{
		`msg="shield: tasks still alive after the shutdown grace period; interrupting them" grace=100ms tasks=3 running=spin.lua`,
		`count=3`,
		`spawn (waiting in shield.sleep at test.lua:2)`,
		`spin.lua (did not yield; at spin.lua:3)`,
		`spawn (ready to run)`,
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("the log lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "did not yield") != 1 {
		t.Fatalf("only the spinning task did not yield:\n%s", out)
	}
}

// The error a parked main chunk ends with says where it was waiting, and
// still matches ErrInterrupted: also when the waiting call's line is in the
// thread that resumed it (pcall of the blocking function itself; a parked
// coroutine has no Parent, so the line was missing).
func TestAParkedTaskEndsWithAnErrorSayingWhereItWaited(t *testing.T) {
	for _, src := range []string{"started()\nshield.sleep(600000)", "started()\npcall(shield.sleep, 600000)"} {
		rt := newTestRuntime(t, &Services{Log: logTo(&syncBuffer{})})
		mainErr := make(chan error, 1)
		started := make(chan struct{})
		if err := rt.Do(func(L *lua.LState) error {
			L.SetGlobal("started", L.NewFunction(func(*lua.LState) int { close(started); return 0 }))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		go func() { mainErr <- rt.RunString(src, "nap.lua") }()
		<-started
		rt.Close(50 * time.Millisecond)
		select {
		case err := <-mainErr:
			var te *TaskError
			if !errors.As(err, &te) || !errors.Is(err, ErrInterrupted) ||
				te.Message != "shield: task interrupted: still waiting in shield.sleep at nap.lua:2 when the shutdown grace period ended" {
				t.Fatalf("%s: the parked main chunk ended with %v", src, err)
			}
		case <-time.After(hangBound):
			t.Fatal("RunString did not return")
		}
	}
}

// A Go function called from Lua that never returns wedges the loop: Close
// gives up on it, and every wait on the loop — Do, Wait, a second Close —
// ends with it instead of hanging.
func TestCloseGivesUpOnAGoFunctionThatNeverReturns(t *testing.T) {
	L := lua.NewState(StateOptions())
	var logs syncBuffer
	rt, err := NewRuntime(L, &Services{Log: logTo(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	t.Cleanup(func() {
		close(release)
		// Let the loop's holder finish before the state is closed.
		for end := time.Now().Add(hangBound); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			rt.mu.Lock()
			owned := rt.owned
			rt.mu.Unlock()
			if !owned {
				break
			}
		}
		L.Close()
	})
	entered := make(chan struct{})
	if err := rt.Do(func(L *lua.LState) error {
		L.SetGlobal("block", L.NewFunction(func(*lua.LState) int { close(entered); <-release; return 0 }))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, "shield.spawn(function() block() end)")
	<-entered
	doErr := make(chan error, 1)
	go func() { doErr <- rt.Do(func(*lua.LState) error { return nil }) }()
	closed := make(chan struct{})
	go func() { rt.Close(50 * time.Millisecond); close(closed) }()
	for _, w := range []struct {
		what string
		ch   <-chan struct{}
	}{{"Close", closed}, {"a second Close", closeAsync(rt)}, {"Wait", waitAsync(rt)}} {
		select {
		case <-w.ch:
		case <-time.After(hangBound):
			t.Fatalf("%s did not return while a Go function wedged the loop", w.what)
		}
	}
	select {
	case err := <-doErr:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Do = %v, want ErrClosed", err)
		}
	case <-time.After(hangBound):
		t.Fatal("Do did not return after Close gave up on the loop")
	}
	if !strings.Contains(logs.String(), "a Go function called from Lua does not return; giving up on it\" task=spawn") {
		t.Fatalf("Close did not say which task wedged the loop:\n%s", logs.String())
	}
}

func closeAsync(rt *Runtime) <-chan struct{} {
	ch := make(chan struct{})
	go func() { rt.Close(time.Second); close(ch) }()
	return ch
}

func waitAsync(rt *Runtime) <-chan struct{} {
	ch := make(chan struct{})
	go func() { rt.Wait(context.Background()); close(ch) }()
	return ch
}
