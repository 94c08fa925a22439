package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// A holder whose task spins (never yields) renews nothing: its lease lapses
// and, while it is still waiting out its shutdown grace after SIGTERM,
// another process gets the lock once the ttl has passed.
func TestSpinningLockHolderLetsTheLeaseLapseAfterSIGTERM(t *testing.T) {
	cfg := writeFile(t, "spin.yaml", fmt.Sprintf("global:\n  redis:\n    url: %q\n    prefix: %q\n  runtime:\n    shutdown_grace: 5000\n",
		testredis.URL(t), testredis.Prefix(t)))
	holder := writeFile(t, "holder.lua", `
		local l = shield.distributed_mutex("spin", { ttl = 1000 })
		assert(l:acquire())
		print("ready")
		while true do end`)
	cmd, stderr, exited := startShield(t, "ready", "run", "--config", cfg, holder)
	cmd.Process.Signal(syscall.SIGTERM)
	next := runShield(t, context.Background(), "run", "--config", cfg, writeFile(t, "next.lua", `
		local l = shield.distributed_mutex("spin", { ttl = 1000 })
		local ok, why = l:acquire(15000)
		print("acquired=" .. tostring(ok) .. " why=" .. tostring(why))
		l:release()`))
	if next.code != 0 || !strings.Contains(next.stdout, "acquired=true") {
		t.Fatalf("the second process: exit %d, stdout %q, stderr:\n%s", next.code, next.stdout, next.stderr)
	}
	select {
	case err := <-exited:
		t.Fatalf("the holder exited (%v) before the other process got the lock: its lease did not lapse while it spun\n%s", err, stderr.String())
	default:
	}
	select {
	case err := <-exited:
		if err == nil {
			t.Fatal("the interrupted holder exited 0")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the holder did not exit after its grace period")
	}
}

// Writer preference across processes (not fair): three processes keep
// overlapping reads going; a writer from a fourth process gets in while
// they still read, instead of waiting until the readers stop.
func TestRWLockWriterGetsInAcrossReaderProcesses(t *testing.T) {
	cfg, _ := redisConfigFile(t)
	reader := writeFile(t, "reader.lua", `
		local g = shield.global()
		local rw = shield.distributed_rwlock("pref", { ttl = 5000 })
		local deadline = shield.now_ms() + 20000
		local reads, after, running = 0, 0, 3
		g:incr("readers_up")
		for i = 1, 3 do
			shield.spawn(function()
				shield.sleep(i * 13)
				while shield.now_ms() < deadline and not g:get("writer_done") do
					local l = rw:read_lock()
					if l:acquire(5000) then
						reads = reads + 1
						if g:get("writer_in") then after = after + 1 end
						shield.sleep(40) -- reads overlap: some reader always holds
						l:release()
					end
				end
				running = running - 1
			end)
		end
		while running > 0 do shield.sleep(10) end
		print("reads=" .. reads .. " after_writer=" .. after .. " stopped_by_deadline=" .. tostring(shield.now_ms() >= deadline))`)
	writer := writeFile(t, "writer.lua", `
		local g = shield.global()
		while (g:get("readers_up") or 0) < 3 do shield.sleep(10) end
		shield.sleep(300) -- the readers are reading
		local w = shield.distributed_rwlock("pref", { ttl = 5000 }):write_lock()
		local t0 = shield.now_ms()
		local ok, why = w:acquire(15000)
		g:set("writer_in", true)
		print("acquired=" .. tostring(ok) .. " why=" .. tostring(why) .. " waited=" .. (shield.now_ms() - t0))
		if ok then shield.sleep(50); w:release() end
		g:set("writer_done", true)`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	readers := make(chan result, 3)
	for range 3 {
		go func() { readers <- runShield(t, ctx, "run", "--config", cfg, reader) }()
	}
	w := runShield(t, ctx, "run", "--config", cfg, writer)
	if w.code != 0 || !strings.Contains(w.stdout, "acquired=true") {
		t.Fatalf("the writer did not get in while readers kept reading: exit %d, %s\n%s", w.code, w.stdout, w.stderr)
	}
	for i := range 3 {
		r := <-readers
		if r.code != 0 {
			t.Fatalf("reader exited %d:\n%s", r.code, r.stderr)
		}
		f := fields(t, r.stdout)
		if f["stopped_by_deadline"] != "false" || atoi(t, f["reads"]) == 0 {
			t.Fatalf("reader %d: %s (the readers must still be reading when the writer gets in)", i, r.stdout)
		}
	}
	t.Logf("writer: %s", strings.TrimSpace(w.stdout))
}
