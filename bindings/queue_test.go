package bindings

import (
	"context"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/core/queue"
	"github.com/shieldrt/shieldglobal/internal/edge"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

// testQueues is the queue capability on a fresh memory backend with the
// default config.
func testQueues(t *testing.T) *Queues {
	t.Helper()
	b := queue.NewMemory(queue.MemoryOptions{})
	t.Cleanup(func() { b.Close() })
	return &Queues{Backend: b, Config: config.Default().Queue, Inline: true}
}

func queueRuntime(t *testing.T, q *Queues, logs *syncBuffer) *runtime.Runtime {
	t.Helper()
	svc := &runtime.Services{Capabilities: []runtime.Capability{q}}
	if logs != nil {
		svc.Log = logTo(logs)
	}
	return newTestRuntime(t, svc)
}

func TestQueueArgumentErrors(t *testing.T) {
	rt := queueRuntime(t, testQueues(t), nil)
	for _, c := range []struct{ src, want string }{
		{`shield.queue()`, `shield: bad argument #1 to 'queue' (string expected, got no value)`},
		{`shield.queue("")`, `bad argument #1 to 'queue' (queue name must not be empty)`},
		{`shield.queue("}x")`, `test.lua:1: shield: bad argument #1 to 'queue' (queue name must not start with '}')`},
		{`shield.reliable_queue("}x")`, `test.lua:1: shield: bad argument #1 to 'reliable_queue' (queue name must not start with '}')`},
		{`shield.queue("q", { bogus = 1 })`, `bad argument #2 to 'queue' (unknown option "bogus" (known: max_length, message_ttl))`},
		{`shield.queue("q", { visibility_timeout = 5 })`, `unknown option "visibility_timeout" (known: max_length, message_ttl)`},
		{`shield.queue("q", { max_lenght = 5 })`, `unknown option "max_lenght" (known: max_length, message_ttl); did you mean "max_length"?)`},
		{`shield.queue("q", { 5 })`, `bad argument #2 to 'queue' (option keys must be strings, got number 1)`},
		{`shield.reliable_queue("r", { dead_letter = { [true] = 1 } })`, `(option keys must be strings, got boolean true)`},
		{`shield.reliable_queue("r", { visibility_timeout = 0 })`, `(option visibility_timeout must be a number of milliseconds from 1 to 1e+12, got 0)`},
		{`shield.reliable_queue("r", { dead_letter = { enabled = 1 } })`, `(option dead_letter.enabled: boolean expected, got number)`},
		{`shield.reliable_queue("r", { max_retries = -1 })`, `option max_retries must be a whole number from 0 to 2147483648, got -1`},
		{`shield.reliable_queue("r", { dead_letter = { size = 1 } })`, `unknown option "dead_letter.size" (known: enabled, max_length, ttl))`},
		{`shield.queue("q", { max_length = 1.5 })`, `option max_length must be a whole number from 1 to 2147483648, got 1.5`},
		{`shield.queue("q"):push()`, `shield.queue: bad argument #2 to 'push' (message expected, got no value)`},
		{`shield.queue("q"):push(nil)`, `shield.queue: bad argument #2 to 'push' (message expected, got nil)`},
		{`shield.queue("q"):push(print)`, `shield.queue: bad argument #2 to 'push'`},
		{`shield.queue("q").push("x")`, `shield.queue: bad argument #1 to 'push' (shield.queue expected, got string (call it with ':'))`},
		{`shield.queue("q").push(shield.delay_queue("d"), 1)`, `shield.queue expected, got userdata`},
		{`shield.queue("q"):pop(-1)`, `bad argument #2 to 'pop' (timeout must be >= 0 milliseconds`},
		{`shield.queue("q"):pop("5")`, `bad argument #2 to 'pop' (number expected, got string)`},
		{`shield.queue("q"):pop(math.huge)`, `bad argument #2 to 'pop' (timeout must be >= 0 milliseconds`},
		{`shield.queue("q"):push_batch({ 1, nil, 3 })`, `bad argument #2 to 'push_batch' (message #2 is nil)`},
		{`shield.queue("q"):push_batch("x")`, `bad argument #2 to 'push_batch' (table expected, got string)`},
		{`shield.queue("q"):push_batch({ first = 1, second = 2 })`, `bad argument #2 to 'push_batch' (a list of messages expected, got key "`},
		{`shield.queue("q"):push_batch({ "a", "b", extra = "c" })`, `bad argument #2 to 'push_batch' (a list of messages expected, got key "extra")`},
		{`shield.reliable_queue("rq"):push_batch({ x = 1 })`, `bad argument #2 to 'push_batch' (a list of messages expected, got key "x")`},
		{`shield.priority_queue("pq"):push_batch({ 1.5 })`, `shield.priority_queue has no method 'push_batch'`},
		{`shield.delay_queue("d"):push("x")`, `shield.delay_queue: bad argument #3 to 'push' (number expected, got no value)`},
		{`shield.delay_queue("d"):push("x", "soon")`, `bad argument #3 to 'push' (number expected, got string)`},
		{`shield.delay_queue("d"):push("x", -1)`, `bad argument #3 to 'push' (delay must be >= 0 milliseconds`},
		{`shield.delay_queue("d"):push_at("x", "tomorrow")`, `bad argument #3 to 'push_at' (number expected, got string)`},
		{`shield.delay_queue("d"):push_at("x", 0/0)`, `bad argument #3 to 'push_at' (time must be Unix seconds, got NaN)`},
		{`shield.priority_queue("p"):push("x")`, `shield.priority_queue: bad argument #3 to 'push' (number expected, got no value)`},
		{`shield.priority_queue("p"):push("x", "high")`, `bad argument #3 to 'push' (number expected, got string)`},
		{`shield.priority_queue("p"):push("x", 0/0)`, `bad argument #3 to 'push' (priority must be a number, got NaN)`},
		{`shield.queue("q"):consume("w")`, `bad argument #3 to 'consume' (function expected, got no value)`},
		{`shield.queue("q"):consume("", function() end)`, `bad argument #2 to 'consume' (consumer name must not be empty)`},
		{`shield.queue("q"):consume("w", function() end, { workers = 2 })`, `unknown option "workers" (known: concurrency)`},
		{`shield.queue("q"):consume("w", function() end, { [1] = 2 })`, `bad argument #4 to 'consume' (option keys must be strings, got number 1)`},
		{`shield.queue("q"):consume("w", function() end, { concurrency = "2" })`, `(option concurrency: number expected, got string)`},
		{`shield.queue("q"):consume("w", function() end, { concurrency = 0 })`, `option concurrency must be a whole number from 1 to 10000, got 0`},
		{`shield.broadcast_queue("b"):subscribe("", function() end)`, `bad argument #2 to 'subscribe' (group must not be empty)`},
		{`shield.reliable_queue("r"):dead_letter():range(-1)`, `bad argument #2 to 'range' (start must be a whole number >= 0, got -1)`},
		{`shield.queue("q"):dead_letter()`, `shield.queue has no method 'dead_letter'`},
		{`shield.queue("conflict"); shield.delay_queue("conflict")`, `conflicting open`},
	} {
		err := run(t, rt, c.src)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.src, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s:\n got %v\nwant %s", c.src, err, c.want)
		}
	}
}

func TestQueueReturnShapes(t *testing.T) {
	rt := queueRuntime(t, testQueues(t), nil)
	mustRun(t, rt, `
		local q = shield.queue("shapes", { max_length = 2 })
		assert(q == shield.queue("shapes", { max_length = 2 }), "the same object")
		assert(q:pop() == nil and select("#", q:pop()) == 1)
		local v, why = q:pop(10)
		assert(v == nil and why == "timeout", tostring(why))
		assert(q:push("a") == true and q:push({ x = 1 }) == true)
		local ok, why = q:push("c")
		assert(ok == nil and why == "full")
		ok, why = q:push_batch({ "c" })
		assert(ok == nil and why == "full")
		assert(q:length() == 2)
		assert(q:pop() == "a" and q:pop(0).x == 1)
		assert(q:purge() == 0)

		local r = shield.reliable_queue("rshapes", { max_retries = 1, retry_delay = 0 })
		local id = r:push("m")
		assert(type(id) == "string" and id ~= "", "push returns the id")
		local ids = r:push_batch({ "b1", "b2" })
		assert(#ids == 2)
		local msg, h = r:pop()
		assert(msg == "m" and h:id() == id and h:deliveries() == 1)
		assert(r:nack(h, 0) == true)
		assert(not pcall(h.ack, h), "settled handle")
		msg, h = r:pop(100) -- a due retry comes before new messages
		assert(msg == "m" and h:deliveries() == 2)
		local ok2, where = h:nack()
		assert(ok2 == true and where == "dead_letter", tostring(where))
		local dead = r:dead_letter()
		assert(dead:length() == 1)
		local l = dead:range()[1]
		assert(l.message == "m" and l.message_id == id and l.deliveries == 2 and type(l.at) == "number" and l.id)
		local nf, why2 = dead:requeue("0-1")
		assert(nf == nil and why2 == "not_found")
		assert(dead:requeue(l.id) == true and dead:length() == 0)
		for _, want in ipairs({ "b1", "b2", "m" }) do
			msg, h = r:pop()
			assert(msg == want, tostring(msg))
			assert(h:deliveries() == 1, "a requeued dead letter starts over")
			assert(h:ack())
		end
		assert(r:length() == 0)
		local st = r:stats()
		assert(st.kind == "reliable" and st.length == 0 and st.dead_lettered == 1 and st.nacked >= 1)

		local d = shield.delay_queue("dshapes")
		assert(d:push("later", 60000) and d:push_at("past", os.time() - 100))
		assert(d:pending() == 1 and d:ready() == 1 and d:length() == 2)
		assert(d:pop() == "past" and d:pop() == nil)

		local b = shield.broadcast_queue("bshapes")
		assert(type(b:push("e")) == "string")
		assert(b:stats().groups)
		result = "ok"
	`)
}

func TestQueueHandleErrors(t *testing.T) {
	rt := queueRuntime(t, testQueues(t), nil)
	for _, c := range []struct{ src, want string }{
		{`local r = shield.reliable_queue("h1"); r:push(1); local _, h = r:pop(); h:ack(); h:ack()`,
			`shield.queue_handle: ack: the message`},
		{`local r = shield.reliable_queue("h2"); r:push(1); local _, h = r:pop(); h:nack(0); h:nack(0)`,
			`already acked, nacked or released`},
		{`local r = shield.reliable_queue("h3"); local o = shield.reliable_queue("h3o"); r:push(1); local _, h = r:pop(); o:ack(h)`,
			`shield.reliable_queue: bad argument #2 to 'ack' (handle of another queue ("h3", not "h3o"))`},
		{`local r = shield.reliable_queue("h4"); r:ack("x")`, `bad argument #2 to 'ack' (shield.queue_handle expected, got string)`},
		{`local r = shield.reliable_queue("h5"); r:push(1); local _, h = r:pop(); h:nack(-5)`,
			`bad argument #2 to 'nack' (delay must be >= 0 milliseconds`},
		{`local r = shield.reliable_queue("h6"); r:push(1); local _, h = r:pop(); h.ack()`,
			`bad argument #1 to 'ack' (shield.queue_handle expected, got no value`},
	} {
		if err := run(t, rt, c.src); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %s", c.src, err, c.want)
		}
	}
}

// A task that ends holding a reliable handle releases it for immediate
// redelivery (not counted as a delivery), with a warning.
func TestQueueTaskEndReleasesItsHandle(t *testing.T) {
	var logs syncBuffer
	q := testQueues(t)
	rt := queueRuntime(t, q, &logs)
	mustRun(t, rt, `
		local r = shield.reliable_queue("rel")
		r:push("job")
		shield.spawn(function()
			local msg, h = r:pop()
			assert(msg == "job")
			-- ends without ack or nack
		end)
		shield.spawn(function()
			local msg, h = r:pop(2000)
			got, deliveries = msg, h:deliveries()
			h:ack()
		end)
	`)
	if _, err := rt.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g, n := global(t, rt, "got"), global(t, rt, "deliveries"); g.String() != "job" || n.String() != "1" {
		t.Fatalf("second task got %v with deliveries %v, want job, 1", g, n)
	}
	if !strings.Contains(logs.String(), "without ack or nack") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
	// And the same when the task fails.
	mustRun(t, rt, `
		local r = shield.reliable_queue("rel")
		r:push("job2")
		shield.spawn(function() local msg, h = r:pop(); error("boom") end)
		-- the failed task's release comes back on its own time: wait for it
		local msg, h = r:pop(2000)
		assert(msg == "job2" and h:deliveries() == 1, tostring(msg))
		h:ack()
	`)
}

// A task waiting in pop that the closing runtime ends withdraws its wait:
// the next message stays in the queue.
func TestQueueWaitEndsWhenTheRuntimeCloses(t *testing.T) {
	q := testQueues(t)
	L := lua.NewState()
	defer L.Close()
	rt, err := runtime.NewRuntime(L, &runtime.Services{Capabilities: []runtime.Capability{q}})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, `
		local p, r = shield.queue("plainwait"), shield.reliable_queue("relwait")
		shield.spawn(function() p:pop(60000) end)
		shield.spawn(function() r:pop(60000) end)
		shield.sleep(5)`)
	start := time.Now()
	rt.Close(5 * time.Second)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close waited %v for the pending pops", took)
	}
	if len(rt.Interrupted()) != 0 {
		t.Fatalf("interrupted %v: waits should end, not be interrupted", rt.Interrupted())
	}
	plain, _ := q.Backend.Plain("plainwait", edge.QueueOptions(q.Config))
	rel, _ := q.Backend.Reliable("relwait", edge.QueueOptions(q.Config))
	ctx := context.Background()
	_, _ = plain.Push([]byte(`"x"`)).Do(ctx)
	_, _ = rel.Push([]byte(`"y"`)).Do(ctx)
	if n, _ := plain.Length().Do(ctx); n != 1 {
		t.Fatalf("plain length %d after the closed runtime's wait: the message went to a dead waiter", n)
	}
	d, err := rel.Pop().Do(ctx)
	if err != nil || string(d.Body) != `"y"` || d.Deliveries != 1 {
		t.Fatalf("reliable pop: %v %v", d, err)
	}
}

// A handle held longer than the visibility timeout is extended through the
// loop, so no other consumer gets its message.
func TestQueueHeldHandleIsExtended(t *testing.T) {
	q := testQueues(t)
	rt := queueRuntime(t, q, nil)
	mustRun(t, rt, `
		local r = shield.reliable_queue("ext", { visibility_timeout = 150 })
		r:push("long")
		local msg, h = r:pop()
		shield.sleep(600) -- several visibility timeouts
		local other = r:pop()
		assert(other == nil, "the message went to another delivery while held")
		assert(h:ack() == true)
	`)
}

// A consumer: success acks, an error nacks with retry_delay (logged with its
// traceback and counted), the runtime stays busy until stop().
func TestQueueConsumerAcksNacksAndStops(t *testing.T) {
	var logs syncBuffer
	rt := queueRuntime(t, testQueues(t), &logs)
	mustRun(t, rt, `
		local r = shield.reliable_queue("cons", { retry_delay = 10 })
		seen = {}
		consumer = r:consume("w", function(msg)
			seen[#seen + 1] = msg
			if msg == "bad" and #seen == 1 then error("handler failed") end
		end, { concurrency = 2 })
		r:push("bad")
	`)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := rt.Wait(ctx); err == nil {
		t.Fatal("Wait returned while a consumer runs")
	}
	mustRun(t, rt, `
		local deadline = shield.now_ms() + 5000
		while #seen < 2 and shield.now_ms() < deadline do shield.sleep(5) end
		assert(#seen == 2 and seen[2] == "bad", "redelivered after the nack")
		assert(consumer:stop() == true)
		assert(consumer:stop() == true, "idempotent")
		local r = shield.reliable_queue("cons", { retry_delay = 10 })
		assert(r:length() == 0, "acked")
	`)
	if _, err := rt.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := rt.CallbackErrors(); n != 1 {
		t.Fatalf("callback errors = %d, want 1", n)
	}
	if !strings.Contains(logs.String(), "handler failed") || !strings.Contains(logs.String(), "stack traceback") {
		t.Fatalf("handler error not logged with its traceback:\n%s", logs.String())
	}
}

// Closing the runtime while a handler runs releases its message for
// immediate redelivery (not a nack, not counted).
func TestQueueConsumerShutdownReleasesInFlight(t *testing.T) {
	q := testQueues(t)
	L := lua.NewState()
	defer L.Close()
	rt, err := runtime.NewRuntime(L, &runtime.Services{Capabilities: []runtime.Capability{q}})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, `
		local r = shield.reliable_queue("inflight")
		started = false
		r:consume("w", function() started = true; shield.sleep(math.huge) end)
		r:push("job")
		while not started do shield.sleep(1) end`)
	rt.Close(100 * time.Millisecond)
	rel, _ := q.Backend.Reliable("inflight", edge.QueueOptions(q.Config))
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err := rel.Pop().Do(context.Background())
		if err == nil {
			if d.Deliveries != 1 || string(d.Body) != `"job"` {
				t.Fatalf("redelivered %s with deliveries %d, want job, 1", d.Body, d.Deliveries)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the in-flight message did not come back: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A consumer whose runtime is wedged (a task that never yields) stops
// extending, so its message goes to another consumer after the visibility
// timeout instead of being held forever.
func TestQueueWedgedConsumerLosesItsMessages(t *testing.T) {
	q := testQueues(t)
	wedged := queueRuntime(t, q, nil)
	started := make(chan struct{})
	if err := wedged.Set("started", func() { close(started) }); err != nil {
		t.Fatal(err)
	}
	mustRun(t, wedged, `
		local r = shield.reliable_queue("wedge", { visibility_timeout = 150 })
		r:consume("w", function() started(); local n = 0; while true do n = n + 1 end end)
		r:push("job")`)
	<-started // the wedged consumer holds the message (first delivery)
	other := queueRuntime(t, q, nil)
	mustRun(t, other, `
		local r = shield.reliable_queue("wedge", { visibility_timeout = 150 })
		local msg, h = r:pop(10000)
		assert(msg == "job" and h:deliveries() == 2, "reclaimed from the wedged consumer")
		h:ack()`)
}

// Messages of a plain queue consumed by a handler interrupted at shutdown
// are pushed back, not lost.
func TestQueuePlainConsumerShutdownPushesBack(t *testing.T) {
	q := testQueues(t)
	L := lua.NewState()
	defer L.Close()
	rt, err := runtime.NewRuntime(L, &runtime.Services{Capabilities: []runtime.Capability{q}})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, rt, `
		local p = shield.queue("pb")
		started = false
		p:consume("w", function() started = true; shield.sleep(math.huge) end)
		p:push("job")
		while not started do shield.sleep(1) end`)
	rt.Close(50 * time.Millisecond)
	q.Drain(time.Second)
	plain, _ := q.Backend.Plain("pb", edge.QueueOptions(q.Config))
	m, err := plain.Pop().Do(context.Background())
	if err != nil || string(m.Body) != `"job"` {
		t.Fatalf("pop after shutdown: %q %v", m.Body, err)
	}
}

func TestQueueStatsListsOpenedQueues(t *testing.T) {
	q := testQueues(t)
	rt := queueRuntime(t, q, nil)
	mustRun(t, rt, `
		local d = shield.delay_queue("s_delay"); d:push(1, 60000); d:push(2, 0)
		local p = shield.queue("s_plain"); p:push(1)
		consumer = shield.reliable_queue("s_rel"):consume("w", function() end)
		local st = p:stats()
		assert(st.length == 1 and st.kind == "plain" and st.local_consumers == 0)`)
	infos, err := q.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]QueueInfo{}
	for _, i := range infos {
		got[i.Name] = i
	}
	if d := got["s_delay"]; d.Kind != queue.KindDelay || d.Pending != 1 || d.Ready != 1 {
		t.Fatalf("delay stats %+v", d)
	}
	if p := got["s_plain"]; p.Length != 1 {
		t.Fatalf("plain stats %+v", p)
	}
	if r := got["s_rel"]; r.Kind != queue.KindReliable || r.LocalConsumers != 1 {
		t.Fatalf("reliable stats %+v", r)
	}
	mustRun(t, rt, `consumer:stop()`)
	infos, _ = q.Stats(context.Background())
	for _, i := range infos {
		if i.Name == "s_rel" && i.LocalConsumers != 0 {
			t.Fatalf("local consumers after stop: %d", i.LocalConsumers)
		}
	}
}

// Blocking pops also work outside tasks (host code on the main thread) and
// inside pcall and coroutines.
func TestQueuePopInEveryContext(t *testing.T) {
	rt := queueRuntime(t, testQueues(t), nil)
	mustRun(t, rt, `
		local q = shield.queue("ctx")
		shield.spawn(function() shield.sleep(10); q:push(1); q:push(2) end)
		local ok, v = pcall(q.pop, q, 2000)
		assert(ok and v == 1)
		local co = coroutine.wrap(function() return q:pop(2000) end)
		assert(co() == 2)
	`)
	var got lua.LValue
	if err := rt.Do(func(L *lua.LState) error {
		if err := L.DoString(`local q = shield.queue("ctx"); q:push(3); v = q:pop(100)`); err != nil {
			return err
		}
		got = L.GetGlobal("v")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got.String() != "3" {
		t.Fatalf("pop outside a task = %v", got)
	}
}
