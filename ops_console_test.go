package shieldglobal

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/config"
	"github.com/shieldrt/shieldglobal/internal/testbrowser"
	"github.com/shieldrt/shieldglobal/ops"
)

// consoleScenario is what an operator should see on the console: a reliable
// queue with two dead letters and one message waiting, a plain queue, three
// tasks (one failing), a board of 20, a distributed lock, a mutex and an
// rwlock's two read sides held by tasks, a rate limiter that refused once.
const consoleScenario = `
	local jobs = shield.reliable_queue("console_jobs", { max_retries = 0, retry_delay = 0 })
	jobs:push({ job = 1, player = "p1" }); jobs:push({ job = 2, player = "p2" })
	for i = 1, 2 do local _, h = jobs:pop(2000); assert(h:nack(0)) end
	assert(jobs:dead_letter():length() == 2)
	local mail = shield.queue("console_mail"); mail:push("hello"); mail:push("world")

	local s = shield.scheduler()
	s:interval("console_tick", 3600000, function() end)
	s:cron("console_nightly", "0 3 * * *", function() end)
	s:interval("console_fail", 3600000, function() error("disk full") end, { max_retries = 0 })
	s:trigger("console_fail")

	local arena = shield.rank("console_arena")
	for i = 1, 20 do arena:update("p" .. i, i * 10) end

	local m = shield.distributed_mutex("console_lock")
	shield.spawn(function() m:acquire(); held = true; shield.sleep(math.huge) end)
	local inv = shield.mutex("console_inventory:42")
	shield.spawn(function() inv:acquire(); inv_held = true; shield.sleep(math.huge) end)
	local tbl = shield.rwlock("console_table")
	for i = 1, 2 do shield.spawn(function() tbl:read_lock():acquire(); readers = (readers or 0) + 1; shield.sleep(math.huge) end) end
	while not (held and inv_held and readers == 2) do shield.sleep(1) end

	local l = shield.rate_limiter("console_rl", { rate = 1, burst = 1 })
	assert(l:allow("ip")); assert(not l:allow("ip"))
	shield.sleep(50)`

// The console in a real headless Chromium, on Redis: an operator opens
// /ops/, is refused until they enter the token, sees what the scenario
// created on every page, requeues a dead letter and sees it leave the list
// (and the queue grow), pauses a task and sees /ops/scheduler say so; a
// page without the token cannot act. SHIELD_UPDATE_SCREENSHOTS=1 writes
// docs/img/ops-*.png from this run's browser.
func TestOpsConsoleBrowser(t *testing.T) {
	cfg := redisConfig(t)
	cfg.Ops.Enabled, cfg.Ops.Listen, cfg.Ops.Token, cfg.Ops.Admin = true, "127.0.0.1:0", "s3cret", true
	m := newModule(t, cfg)
	rt := newRuntime(t, m)
	if err := rt.RunString(consoleScenario, "console.lua"); err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.OpsAddr() + "/ops/"
	ctx := testbrowser.Start(t, 3*time.Minute)
	update := os.Getenv("SHIELD_UPDATE_SCREENSHOTS") != ""

	fail := func(what string, err error) {
		t.Helper()
		status, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#status")))
		t.Fatalf("%s: %v (console status: %q)", what, err, status)
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			fail(what, err)
		}
	}
	// until waits for a JS condition to hold (generous: the page refreshes
	// every 2 s, and CI is a busy machine).
	until := func(what, cond string) {
		t.Helper()
		run(what, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(30*time.Second)))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			fail("read "+sel, err)
		}
		return strings.TrimSpace(s)
	}
	shot := func(name string) {
		t.Helper()
		if !update {
			return
		}
		run("settle", chromedp.Sleep(300*time.Millisecond))
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			fail("screenshot "+name, err)
		}
		path := filepath.Join("docs", "img", "ops-"+name+".png")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// fetchStatus posts from the page (same origin) and returns the status.
	fetchStatus := func(path string, withToken bool) int {
		t.Helper()
		auth := ""
		if withToken {
			auth = `"Authorization": "Bearer s3cret",`
		}
		status, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`fetch(%q, {method: "POST", headers: {%s "Content-Type": "application/json"}, body: '{"all": true}'}).then(r => r.status)`,
			path, auth), chromedp.EvalAwaitPromise))
		if err != nil {
			fail("fetch "+path, err)
		}
		return status
	}

	// Without the token the page says so, and can neither read nor act.
	run("open /ops/", chromedp.Navigate(base))
	until("the 401 shown", `document.getElementById("status").textContent.includes("unauthorized")`)
	if got := fetchStatus("api/queues/console_jobs/requeue", false); got != http.StatusUnauthorized {
		t.Fatalf("requeue without the token: %d, want 401", got)
	}
	if got := fetchStatus("api/tasks/console_tick/pause", false); got != http.StatusUnauthorized {
		t.Fatalf("pause without the token: %d, want 401", got)
	}

	// With it: the queues.
	run("enter the token", chromedp.SendKeys(chromedp.CSS("#token"), "s3cret"), chromedp.Click(chromedp.CSS("#save-token")))
	until("the queues", `document.querySelector('tr[data-queue="console_jobs"]') !== null && document.body.classList.contains("admin")`)
	if got := text(`tr[data-queue="console_jobs"] td[data-col="dead"]`); got != "2" {
		t.Fatalf("console_jobs dead letters %q, want 2", got)
	}
	if got := text(`tr[data-queue="console_mail"] td[data-col="length"]`); got != "2" {
		t.Fatalf("console_mail length %q, want 2", got)
	}
	if got := text(`tr[data-queue="console_mail"] td[data-col="oldest"]`); got == "–" || got == "" {
		t.Fatalf("console_mail oldest age %q, want an age", got)
	}
	if got := text(`tr[data-queue="console_jobs"] td[data-col="oldest"]`); got != "–" {
		t.Fatalf("console_jobs (nothing held) oldest age %q, want –", got)
	}
	run("open the dead letters", chromedp.Click(chromedp.CSS(`button[data-dead="console_jobs"]`)))
	until("two dead letters", `document.querySelectorAll("#dead-letters tr[data-dead-id]").length === 2`)
	if got := text(`#dead-letters tr[data-dead-id] td.payload`); !strings.Contains(got, `"player":"p1"`) {
		t.Fatalf("dead letter preview %q, want the message's JSON", got)
	}
	shot("queues")

	// Requeue the first from the page: it leaves the list, the queue grows.
	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`#dead-letters tr[data-dead-id]`), "data-dead-id"))
	if err != nil || !attr.Exists {
		fail("read the first id", err)
	}
	id := attr.Value
	run("requeue it", chromedp.Click(chromedp.CSS(`#dead-letters tr[data-dead-id] button[data-action="requeue"]`)))
	until("one dead letter left", fmt.Sprintf(`document.querySelectorAll("#dead-letters tr[data-dead-id]").length === 1 && !document.querySelector('tr[data-dead-id=%q]')`, id))
	until("the queue holds it", `document.querySelector('tr[data-queue="console_jobs"] td[data-col="length"]').textContent === "1"`)

	// Tasks: the failing one says so; pause one from the page.
	run("tasks page", chromedp.Navigate(base+"#tasks"))
	until("the tasks", `document.querySelector('tr[data-task="console_tick"]') !== null`)
	until("the failing task", `document.querySelector('tr[data-task="console_fail"] td[data-col="status"]').textContent === "failing"`)
	if got := text(`tr[data-task="console_fail"] td.payload`); !strings.Contains(got, "disk full") {
		t.Fatalf("console_fail last error %q", got)
	}
	run("pause console_tick", chromedp.Click(chromedp.CSS(`tr[data-task="console_tick"] button[data-action="pause"]`)))
	until("paused on the page", `document.querySelector('tr[data-task="console_tick"] td[data-col="status"]').textContent === "paused"`)
	shot("scheduler")
	status, body := opsGet(t, "http://"+m.OpsAddr()+"/ops/scheduler", "Bearer s3cret")
	var rep struct {
		Tasks []struct{ Name, Status string }
	}
	if err := json.Unmarshal([]byte(body), &rep); status != http.StatusOK || err != nil {
		t.Fatalf("/ops/scheduler: %d %v %s", status, err, body)
	}
	paused := false
	for _, tk := range rep.Tasks {
		paused = paused || tk.Name == "console_tick" && tk.Status == "paused"
	}
	if !paused {
		t.Fatalf("/ops/scheduler does not show console_tick paused: %s", body)
	}

	// A leaderboard: top 10 and a member's neighbours.
	run("boards page", chromedp.Navigate(base+"#boards"))
	until("the board", `document.querySelector('tr[data-board="console_arena"] td[data-col="count"]')?.textContent === "20"`)
	run("open it", chromedp.Click(chromedp.CSS(`button[data-open="console_arena"]`)))
	until("its top 10", `document.querySelectorAll("#board-top-table tr[data-uid]").length === 10`)
	if got := text(`#board-top-table tr[data-uid]`); !strings.HasPrefix(got, "1") || !strings.Contains(got, "p20") {
		t.Fatalf("first of the top %q, want rank 1 p20", got)
	}
	run("find p10", chromedp.SendKeys(chromedp.CSS("#member"), "p10"), chromedp.Click(chromedp.CSS("#board-form button[type=submit]")))
	until("p10 and 3 on each side", `document.querySelectorAll("#board-around tr[data-uid]").length === 7 && document.querySelector('#board-around tr.me[data-uid="p10"]') !== null`)
	shot("boards")

	// Locks: four holds here, listed by name with their kind, the
	// distributed one with its token from Redis; the named lock's owner
	// from Redis.
	run("locks page", chromedp.Navigate(base+"#locks"))
	until("four held", `document.querySelector('#lock-facts dd[data-fact="held"]')?.textContent === "4"`)
	until("the held locks by name", `document.querySelectorAll("#held-locks tr[data-lock]").length === 3`)
	for name, kind := range map[string]string{"console_lock": "distributed_mutex", "console_inventory:42": "mutex", "console_table": "rwlock"} {
		if got := text(fmt.Sprintf(`#held-locks tr[data-lock=%q] td[data-col="kind"]`, name)); got != kind {
			t.Fatalf("held lock %s: kind %q, want %q", name, got, kind)
		}
	}
	if got := text(`#held-locks tr[data-lock="console_table"] td[data-col="holders"]`); got != "2 readers" {
		t.Fatalf("console_table holders %q", got)
	}
	if got := text(`#held-locks tr[data-lock="console_lock"] td[data-col="token"]`); got == "" || strings.Trim(got, "0123456789") != "" {
		t.Fatalf("console_lock token %q, want the fencing token", got)
	}
	run("look up console_lock", chromedp.SendKeys(chromedp.CSS("#lock-name"), "console_lock"), chromedp.Click(chromedp.CSS("#lock-form button[type=submit]")))
	until("its owner", `document.querySelector('#lock-info dd[data-fact="lock-held"]')?.textContent === "yes" && document.querySelectorAll('#lock-owners td[data-col="owner"]').length === 1`)
	if ttl := text(`#lock-info dd[data-fact="lock-ttl"]`); !strings.HasSuffix(ttl, " ms") {
		t.Fatalf("lock ttl %q, want a lease in ms", ttl)
	}
	shot("locks")

	run("limiters page", chromedp.Navigate(base+"#limiters"))
	until("one rejected", `document.querySelector('#limiter-facts dd[data-fact="rejected"]')?.textContent === "1"`)
	shot("limiters")
	run("runtime page", chromedp.Navigate(base+"#runtime"))
	until("the tasks alive", `Number(document.querySelector('#runtime-facts dd[data-fact="tasks"]')?.textContent) >= 1`)
	shot("runtime")

	// The page with the token can still act, but not with the token removed.
	if got := fetchStatus("api/boards/console_arena/clear", false); got != http.StatusUnauthorized {
		t.Fatalf("clear without the token: %d, want 401", got)
	}
}

// opsPost posts body to the console API with the token.
func opsPost(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	return resp.StatusCode, b.String()
}

// Every admin action through the Module's console, over HTTP, on memory and
// Redis: each changes what Lua then sees, and unknown names are 404.
func TestOpsConsoleActions(t *testing.T) {
	for _, b := range []struct {
		name string
		cfg  func(*testing.T) Config
	}{
		{"memory", func(*testing.T) Config { return config.Default() }},
		{"redis", redisConfig},
	} {
		t.Run(b.name, func(t *testing.T) {
			cfg := b.cfg(t)
			cfg.Ops.Enabled, cfg.Ops.Listen, cfg.Ops.Token, cfg.Ops.Admin = true, "127.0.0.1:0", "s3cret", true
			m := newModule(t, cfg)
			rt := newRuntime(t, m)
			if err := rt.RunString(consoleScenario+`
				runs = 0
				shield.scheduler():interval("console_count", 3600000, function() runs = runs + 1 end)`, "console.lua"); err != nil {
				t.Fatal(err)
			}
			api := "http://" + m.OpsAddr() + "/ops/api/"
			get := func(path string, v any) {
				t.Helper()
				status, body := opsGet(t, api+path, "Bearer s3cret")
				if status != http.StatusOK {
					t.Fatalf("GET %s: %d %s", path, status, body)
				}
				if err := json.Unmarshal([]byte(body), v); err != nil {
					t.Fatalf("GET %s: %v %s", path, err, body)
				}
			}
			post := func(path, body string, want int) string {
				t.Helper()
				status, out := opsPost(t, api+path, body)
				if status != want {
					t.Fatalf("POST %s %s: %d %s, want %d", path, body, status, out, want)
				}
				return out
			}
			lua := func(expr string) string {
				t.Helper()
				var got string
				if err := rt.RunString(`result = tostring(`+expr+`)`, "check.lua"); err != nil {
					t.Fatal(err)
				}
				if err := rt.Do(func(L *lua.LState) error { got = L.GetGlobal("result").String(); return nil }); err != nil {
					t.Fatal(err)
				}
				return got
			}
			// The locks held in this process, by name and kind; the
			// distributed one with the backend's token and its holder.
			var locks struct {
				Held    int64
				Process ops.HeldLocksView
			}
			get("locks", &locks)
			byName := map[string]ops.HeldLockView{}
			for _, l := range locks.Process.Locks {
				byName[l.Name] = l
			}
			if locks.Held != 4 || locks.Process.Total != 3 || len(byName) != 3 {
				t.Fatalf("locks page: %+v", locks)
			}
			if l := byName["console_lock"]; l.Kind != "distributed_mutex" || !l.Distributed || l.Token == nil || *l.Token <= 0 ||
				l.TTLMs <= 0 || len(l.Owners) != 1 || l.Owners[0].State != "held" || l.BackendError != "" {
				t.Fatalf("console_lock: %+v", l)
			}
			if l := byName["console_inventory:42"]; l.Kind != "mutex" || l.Distributed || l.Holders != 1 || l.Token != nil || l.TTLMs != -1 ||
				l.HeldSince == nil || len(l.Owners) != 1 || !strings.Contains(l.Owners[0].Owner, ":coroutine-") {
				t.Fatalf("console_inventory:42: %+v", l)
			}
			if l := byName["console_table"]; l.Kind != "rwlock" || l.Readers != 2 || l.Writers != 0 || len(l.Owners) != 2 {
				t.Fatalf("console_table: %+v", l)
			}

			var dead struct {
				DeadLetters []struct{ ID string } `json:"dead_letters"`
			}
			get("queues/console_jobs/dead", &dead)
			if len(dead.DeadLetters) != 2 {
				t.Fatalf("dead letters %+v", dead)
			}
			post("queues/console_jobs/dead/delete", fmt.Sprintf(`{"ids": [%q]}`, dead.DeadLetters[0].ID), 200)
			if got := lua(`shield.reliable_queue("console_jobs", { max_retries = 0, retry_delay = 0 }):dead_letter():length()`); got != "1" {
				t.Fatalf("dead letters after delete: %s", got)
			}
			post("queues/console_jobs/dead/delete", `{"all": true}`, 200)
			if got := lua(`shield.reliable_queue("console_jobs", { max_retries = 0, retry_delay = 0 }):dead_letter():length()`); got != "0" {
				t.Fatalf("dead letters after delete all: %s", got)
			}
			if out := post("queues/console_mail/purge", "", 200); !strings.Contains(out, `"purged": 2`) {
				t.Fatalf("purge: %s", out)
			}
			if got := lua(`shield.queue("console_mail"):length()`); got != "0" {
				t.Fatalf("console_mail after purge: %s", got)
			}
			post("queues/nosuch/purge", "", 404)
			post("queues/console_mail/requeue", `{"all": true}`, 400) // a plain queue has no dead letters

			post("tasks/console_count/trigger", "", 200)
			if err := rt.RunString(`for _ = 1, 200 do if runs > 0 then break end shield.sleep(10) end`, "wait.lua"); err != nil {
				t.Fatal(err)
			}
			if got := lua("runs"); got != "1" {
				t.Fatalf("runs after trigger: %s", got)
			}
			post("tasks/console_tick/pause", "", 200)
			post("tasks/console_tick/resume", "", 200)
			if got := lua(`shield.scheduler():get("console_tick"):status()`); got != "active" {
				t.Fatalf("console_tick after resume: %s", got)
			}
			post("tasks/console_tick/disable", "", 200)
			if got := lua(`shield.scheduler():get("console_tick"):status()`); got != "disabled" {
				t.Fatalf("console_tick after disable: %s", got)
			}
			post("tasks/console_tick/enable", "", 200)
			if got := lua(`shield.scheduler():get("console_tick"):status()`); got != "active" {
				t.Fatalf("console_tick after enable: %s", got)
			}
			post("tasks/console_tick/remove", "", 200)
			if got := lua(`shield.scheduler():get("console_tick")`); got != "nil" {
				t.Fatalf("console_tick after remove: %s", got)
			}
			post("tasks/console_tick/pause", "", 404)

			var board struct {
				Count  int
				Found  bool
				Around []struct{ UID string }
			}
			get("boards/console_arena?top=3&member=p1&around=2", &board)
			if board.Count != 20 || !board.Found || len(board.Around) != 3 || board.Around[2].UID != "p1" {
				t.Fatalf("board: %+v", board)
			}
			if out := post("boards/console_arena/clear", "", 200); !strings.Contains(out, `"cleared": 20`) {
				t.Fatalf("clear: %s", out)
			}
			if got := lua(`shield.rank("console_arena"):count()`); got != "0" {
				t.Fatalf("board after clear: %s", got)
			}
			post("boards/nosuch/clear", "", 404)
		})
	}
}
