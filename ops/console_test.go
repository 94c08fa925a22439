package ops

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/shieldrt/shieldglobal/config"
)

// recorder is a Console that records the actions it is asked for (the
// Module's real one is driven by the browser test in the root package).
type recorder struct {
	mu      sync.Mutex
	actions []string
	held    HeldLocksView
}

func (r *recorder) did(s string) { r.mu.Lock(); r.actions = append(r.actions, s); r.mu.Unlock() }
func (r *recorder) done() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.actions...)
}

func (r *recorder) Queues(context.Context) ([]QueueView, error) { return nil, nil }
func (r *recorder) DeadLetters(context.Context, string, int) ([]DeadLetterView, error) {
	return nil, nil
}
func (r *recorder) Tasks(context.Context) ([]TaskView, error)   { return nil, nil }
func (r *recorder) Boards(context.Context) ([]BoardView, error) { return nil, nil }
func (r *recorder) Board(_ context.Context, name string, _ int, _ string, _ int) (BoardDetail, error) {
	return BoardDetail{}, fmt.Errorf("%w: board %q", ErrNotFound, name)
}
func (r *recorder) Lock(context.Context, string) (LockView, error) { return LockView{}, nil }
func (r *recorder) LoopLag() LagView                               { return LagView{} }
func (r *recorder) HeldLocks(context.Context) (HeldLocksView, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held, nil
}
func (r *recorder) Requeue(_ context.Context, q string, ids []string) (int64, error) {
	r.did(fmt.Sprintf("requeue %s %v", q, ids))
	return int64(len(ids)), nil
}
func (r *recorder) DeleteDead(_ context.Context, q string, ids []string) (int64, error) {
	r.did(fmt.Sprintf("delete %s %v", q, ids))
	return 0, nil
}
func (r *recorder) Purge(_ context.Context, q string) (int64, error) {
	r.did("purge " + q)
	return 0, nil
}
func (r *recorder) TaskAction(_ context.Context, name, a string) error {
	r.did(a + " " + name)
	return nil
}
func (r *recorder) ClearBoard(_ context.Context, name string) (int64, error) {
	r.did("clear " + name)
	return 0, nil
}

func startConsole(t *testing.T, admin bool, token string, log *slog.Logger) (string, *recorder) {
	t.Helper()
	rec := &recorder{}
	srv, err := Listen(config.Ops{Listen: "127.0.0.1:0", Token: token, Admin: admin}, Sources{Console: rec}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return "http://" + srv.Addr(), rec
}

func do(t *testing.T, method, url string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Every way an action can be refused, and the one way it is done: POST,
// admin on, the token, same origin, a JSON body; each done action logged
// with who and what.
func TestConsoleActionRefusals(t *testing.T) {
	var logBuf strings.Builder
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logBuf}, nil))
	base, rec := startConsole(t, true, "s3cret", log)
	auth := map[string]string{"Authorization": "Bearer s3cret", "Content-Type": "application/json"}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{}
		for k, v := range auth {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	requeue := base + "/ops/api/queues/jobs/requeue"
	cases := []struct {
		name   string
		method string
		hdr    map[string]string
		body   string
		want   int
	}{
		{"no token", "POST", map[string]string{"Content-Type": "application/json"}, `{"all":true}`, 401},
		{"wrong token", "POST", with(map[string]string{"Authorization": "Bearer nope"}), `{"all":true}`, 401},
		{"GET", "GET", auth, "", 405},
		{"other origin", "POST", with(map[string]string{"Origin": "http://evil.example"}), `{"all":true}`, 403},
		{"cross-site fetch", "POST", with(map[string]string{"Sec-Fetch-Site": "cross-site"}), `{"all":true}`, 403},
		{"form body", "POST", with(map[string]string{"Content-Type": "application/x-www-form-urlencoded"}), `all=true`, 403},
		{"no content type", "POST", map[string]string{"Authorization": "Bearer s3cret"}, ``, 403},
		{"neither ids nor all", "POST", auth, `{}`, 400},
		{"unknown field", "POST", auth, `{"everything":true}`, 400},
		{"both", "POST", auth, `{"all":true,"ids":["1-0"]}`, 400},
	}
	for _, c := range cases {
		if got, body := do(t, c.method, requeue, c.hdr, c.body); got != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, got, body, c.want)
		}
	}
	if got := rec.done(); len(got) != 0 {
		t.Fatalf("refused requests acted: %v", got)
	}
	if got, body := do(t, "POST", base+"/ops/api/tasks/t1/explode", auth, ""); got != 400 {
		t.Fatalf("unknown task action: %d %s", got, body)
	}

	// Accepted: same origin (the console's own page) and clients that send
	// no Origin (curl).
	host := strings.TrimPrefix(base, "http://")
	ok := []struct {
		path, body string
		hdr        map[string]string
	}{
		{"/ops/api/queues/jobs/requeue", `{"ids":["1-0","2-0"]}`, with(map[string]string{"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"})},
		{"/ops/api/queues/jobs/dead/delete", `{"all":true}`, auth},
		{"/ops/api/queues/jobs/purge", "", auth},
		{"/ops/api/tasks/t1/pause", "", with(map[string]string{"X-Shield-Operator": "alice"})},
		{"/ops/api/tasks/t1/trigger", "", auth},
		{"/ops/api/boards/arena/clear", "", auth},
	}
	for _, c := range ok {
		if got, body := do(t, "POST", base+c.path, c.hdr, c.body); got != 200 {
			t.Fatalf("%s: %d %s", c.path, got, body)
		}
	}
	want := []string{"requeue jobs [1-0 2-0]", "delete jobs []", "purge jobs", "pause t1", "trigger t1", "clear arena"}
	if got := rec.done(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("actions %v, want %v", got, want)
	}
	logMu.Lock()
	logged := logBuf.String()
	logMu.Unlock()
	for _, s := range []string{`action=requeue queue=jobs ids="[1-0 2-0]"`, `task=t1 task_action=pause remote=127.0.0.1:`, `operator=alice`, `action="clear board" board=arena`} {
		if !strings.Contains(logged, s) {
			t.Errorf("log lacks %q:\n%s", s, logged)
		}
	}

	// A missing board is 404; the console's files need no token, its data does.
	if got, _ := do(t, "GET", base+"/ops/api/boards/nope", auth, ""); got != 404 {
		t.Fatalf("missing board: %d", got)
	}
	if got, body := do(t, "GET", base+"/ops/", nil, ""); got != 200 || !strings.Contains(body, "assets/console.js") {
		t.Fatalf("GET /ops/ without token: %d %.100s", got, body)
	}
	if got, body := do(t, "GET", base+"/ops/assets/console.js", nil, ""); got != 200 || !strings.Contains(body, "Authorization") {
		t.Fatalf("GET console.js: %d", got)
	}
	if got, _ := do(t, "GET", base+"/ops/api/queues", nil, ""); got != 401 {
		t.Fatalf("GET /ops/api/queues without token: %d", got)
	}
}

// With ops.admin off (the default) the console is read-only: every action
// is 403, whatever the token, and the page is told so.
func TestConsoleAdminOff(t *testing.T) {
	base, rec := startConsole(t, false, "", slog.New(slog.DiscardHandler))
	hdr := map[string]string{"Content-Type": "application/json"}
	for _, p := range []string{"/ops/api/queues/jobs/requeue", "/ops/api/queues/jobs/purge", "/ops/api/tasks/t1/pause", "/ops/api/boards/a/clear"} {
		if got, body := do(t, "POST", base+p, hdr, `{"all":true}`); got != 403 || !strings.Contains(body, "ops.admin") {
			t.Fatalf("%s: %d %s, want 403", p, got, body)
		}
	}
	if got := rec.done(); len(got) != 0 {
		t.Fatalf("acted: %v", got)
	}
	if got, body := do(t, "GET", base+"/ops/api/info", nil, ""); got != 200 || !strings.Contains(body, `"admin": false`) {
		t.Fatalf("info: %d %s", got, body)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
