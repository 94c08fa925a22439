package ops

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The web console (GET /ops/) and its JSON API (/ops/api/...): pages for
// queues, scheduler tasks, leaderboards, locks, rate limiters and the
// runtime, read through a Console (the Module), and the admin actions
// (POST, off unless ops.admin). docs/ops.md documents every endpoint.

//go:embed console
var consoleFiles embed.FS

// Errors a Console returns (wrapped) so that the API answers with the right
// status: ErrNotFound is 404, ErrInvalid 400; anything else 503.
var (
	ErrNotFound = errors.New("not found")
	ErrInvalid  = errors.New("invalid")
)

// Console is what the console's pages read and its admin actions do. The
// Module implements it on the core packages, whose operations the Lua API
// and the admin CLI share.
type Console interface {
	Queues(ctx context.Context) ([]QueueView, error)
	// DeadLetters returns up to limit dead letters of queue, oldest first.
	DeadLetters(ctx context.Context, queue string, limit int) ([]DeadLetterView, error)
	Tasks(ctx context.Context) ([]TaskView, error)
	Boards(ctx context.Context) ([]BoardView, error)
	// Board returns the top entries of a board and, with member set, the
	// member's rank with around neighbours on each side.
	Board(ctx context.Context, name string, top int, member string, around int) (BoardDetail, error)
	// Lock reads a distributed lock's state from the backend.
	Lock(ctx context.Context, name string) (LockView, error)
	// HeldLocks lists the locks tasks of this process hold or wait for
	// (see HeldLocksOf); a backend that cannot be read shows in the
	// distributed locks' BackendError, not as an error.
	HeldLocks(ctx context.Context) (HeldLocksView, error)
	// LoopLag summarizes the loop-lag probes so far.
	LoopLag() LagView

	// Requeue moves dead letters ids (all of them when ids is empty) back
	// to queue and returns how many moved.
	Requeue(ctx context.Context, queue string, ids []string) (int64, error)
	// DeleteDead drops dead letters ids (all when empty); returns how many.
	DeleteDead(ctx context.Context, queue string, ids []string) (int64, error)
	// Purge drops every message of queue; returns how many.
	Purge(ctx context.Context, queue string) (int64, error)
	// TaskAction is "pause", "resume", "disable", "enable", "trigger" or
	// "remove" of task name.
	TaskAction(ctx context.Context, name, action string) error
	// ClearBoard deletes every member of board name; returns how many.
	ClearBoard(ctx context.Context, name string) (int64, error)
}

// taskActions are the actions POST /ops/api/tasks/{name}/{action} takes.
var taskActions = map[string]bool{"pause": true, "resume": true, "disable": true, "enable": true, "trigger": true, "remove": true}

// mountConsole adds the console's files to open (no token: they hold no
// data; the page asks for the token when the API answers 401) and its API
// to api (behind the token).
func mountConsole(open, api *http.ServeMux, admin bool, src Sources, log *slog.Logger) {
	files, _ := fs.Sub(consoleFiles, "console")
	static := http.StripPrefix("/ops/", http.FileServerFS(files))
	open.Handle("GET /ops/{$}", noStore(static))
	open.Handle("GET /ops/assets/{file}", noStore(static)) // files only: no directory listing
	open.Handle("GET /ops", http.RedirectHandler("/ops/", http.StatusMovedPermanently))

	c := src.Console
	read := func(path, what string, fn func(r *http.Request, ctx context.Context) (any, error)) {
		api.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			if c == nil {
				writeError(w, log, what, fmt.Errorf("%w: the console has no source", ErrNotFound))
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), reportTimeout)
			defer cancel()
			v, err := fn(r, ctx)
			if err != nil {
				writeError(w, log, what, err)
				return
			}
			writeJSON(w, http.StatusOK, v)
		})
	}
	state := func(ctx context.Context) (State, error) {
		if src.State == nil {
			return State{}, nil
		}
		return src.State(ctx)
	}
	api.HandleFunc("GET /ops/api/info", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"admin": admin})
	})
	read("/ops/api/queues", "queues", func(r *http.Request, ctx context.Context) (any, error) {
		qs, err := c.Queues(ctx)
		if qs == nil {
			qs = []QueueView{}
		}
		return map[string]any{"queues": qs}, err
	})
	read("/ops/api/queues/{name}/dead", "dead letters", func(r *http.Request, ctx context.Context) (any, error) {
		limit, err := intParam(r, "limit", 50, 1, 1000)
		if err != nil {
			return nil, err
		}
		dl, err := c.DeadLetters(ctx, r.PathValue("name"), limit)
		if dl == nil {
			dl = []DeadLetterView{}
		}
		return map[string]any{"queue": r.PathValue("name"), "dead_letters": dl}, err
	})
	read("/ops/api/tasks", "tasks", func(r *http.Request, ctx context.Context) (any, error) {
		ts, err := c.Tasks(ctx)
		if ts == nil {
			ts = []TaskView{}
		}
		return map[string]any{"tasks": ts}, err
	})
	read("/ops/api/boards", "boards", func(r *http.Request, ctx context.Context) (any, error) {
		bs, err := c.Boards(ctx)
		if bs == nil {
			bs = []BoardView{}
		}
		return map[string]any{"boards": bs}, err
	})
	read("/ops/api/boards/{name}", "board", func(r *http.Request, ctx context.Context) (any, error) {
		top, err := intParam(r, "top", 10, 1, 1000)
		if err != nil {
			return nil, err
		}
		around, err := intParam(r, "around", 3, 1, 100)
		if err != nil {
			return nil, err
		}
		return c.Board(ctx, r.PathValue("name"), top, r.URL.Query().Get("member"), around)
	})
	read("/ops/api/locks", "locks", func(r *http.Request, ctx context.Context) (any, error) {
		s, err := state(ctx)
		if err != nil {
			return nil, err
		}
		p := locksPage{Held: s.Locks.Held, Waiting: s.Locks.Waiting, Lost: s.Locks.Lost, Abandoned: s.Locks.Abandoned}
		if p.Process, err = c.HeldLocks(ctx); err != nil {
			return nil, err
		}
		if p.Process.Locks == nil {
			p.Process.Locks = []HeldLockView{}
		}
		if name := r.URL.Query().Get("name"); name != "" {
			l, err := c.Lock(ctx, name)
			if err != nil {
				return nil, err
			}
			p.Lock = &l
		}
		return p, nil
	})
	read("/ops/api/limiters", "limiters", func(r *http.Request, ctx context.Context) (any, error) {
		s, err := state(ctx)
		l := s.Limiter
		return limitersPage{Limiters: l.Limiters, ActiveKeys: l.ActiveKeys, Allowed: l.Allowed, Rejected: l.Rejected,
			Unavailable: l.Unavailable, RejectedToday: l.RejectedToday, Degraded: l.Degraded}, err
	})
	read("/ops/api/runtime", "runtime", func(r *http.Request, ctx context.Context) (any, error) {
		s, err := state(ctx)
		return runtimePage{Runtimes: s.Runtimes, Tasks: s.Tasks, LoopLag: c.LoopLag()}, err
	})

	// The actions.
	act := func(path, what string, fn func(r *http.Request, ctx context.Context, body actionBody) (any, []any, error)) {
		api.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			if !admin {
				writeJSON(w, http.StatusForbidden, errBody("admin actions are disabled (ops.admin: false)"))
				return
			}
			if msg := crossOrigin(r); msg != "" {
				log.Warn("shield: ops action refused", "action", what, "reason", msg, "remote", r.RemoteAddr)
				writeJSON(w, http.StatusForbidden, errBody(msg))
				return
			}
			if c == nil {
				writeError(w, log, what, fmt.Errorf("%w: the console has no source", ErrNotFound))
				return
			}
			var body actionBody
			if r.ContentLength != 0 {
				dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&body); err != nil {
					writeJSON(w, http.StatusBadRequest, errBody("bad body: "+err.Error()))
					return
				}
			}
			ctx, cancel := context.WithTimeout(r.Context(), reportTimeout)
			defer cancel()
			res, attrs, err := fn(r, ctx, body)
			attrs = append(attrs, "remote", r.RemoteAddr, "operator", r.Header.Get("X-Shield-Operator"),
				"user_agent", r.UserAgent())
			if err != nil {
				log.Warn("shield: ops action failed", append([]any{"action", what, "error", err}, attrs...)...)
				writeError(w, log, what, err)
				return
			}
			log.Info("shield: ops action", append([]any{"action", what}, attrs...)...)
			writeJSON(w, http.StatusOK, res)
		})
	}
	act("/ops/api/queues/{name}/requeue", "requeue", func(r *http.Request, ctx context.Context, b actionBody) (any, []any, error) {
		q := r.PathValue("name")
		if err := b.check(); err != nil {
			return nil, []any{"queue", q}, err
		}
		n, err := c.Requeue(ctx, q, b.IDs)
		return map[string]any{"requeued": n}, []any{"queue", q, "ids", b.IDs, "all", b.All, "requeued", n}, err
	})
	act("/ops/api/queues/{name}/dead/delete", "delete dead letters", func(r *http.Request, ctx context.Context, b actionBody) (any, []any, error) {
		q := r.PathValue("name")
		if err := b.check(); err != nil {
			return nil, []any{"queue", q}, err
		}
		n, err := c.DeleteDead(ctx, q, b.IDs)
		return map[string]any{"deleted": n}, []any{"queue", q, "ids", b.IDs, "all", b.All, "deleted", n}, err
	})
	act("/ops/api/queues/{name}/purge", "purge", func(r *http.Request, ctx context.Context, b actionBody) (any, []any, error) {
		q := r.PathValue("name")
		n, err := c.Purge(ctx, q)
		return map[string]any{"purged": n}, []any{"queue", q, "purged", n}, err
	})
	act("/ops/api/tasks/{name}/{action}", "task", func(r *http.Request, ctx context.Context, b actionBody) (any, []any, error) {
		name, a := r.PathValue("name"), r.PathValue("action")
		attrs := []any{"task", name, "task_action", a}
		if !taskActions[a] {
			return nil, attrs, fmt.Errorf("%w: unknown task action %q (pause, resume, disable, enable, trigger, remove)", ErrInvalid, a)
		}
		return map[string]any{"ok": true}, attrs, c.TaskAction(ctx, name, a)
	})
	act("/ops/api/boards/{name}/clear", "clear board", func(r *http.Request, ctx context.Context, b actionBody) (any, []any, error) {
		name := r.PathValue("name")
		n, err := c.ClearBoard(ctx, name)
		return map[string]any{"cleared": n}, []any{"board", name, "cleared", n}, err
	})
}

// actionBody is the JSON body of the dead-letter actions: ids, or all.
type actionBody struct {
	IDs []string `json:"ids"`
	All bool     `json:"all"`
}

// check refuses a body that names no dead letter and does not say all
// (so that a forgotten field never means "all of them").
func (b actionBody) check() error {
	switch {
	case b.All && len(b.IDs) > 0:
		return fmt.Errorf("%w: give ids or all, not both", ErrInvalid)
	case !b.All && len(b.IDs) == 0:
		return fmt.Errorf("%w: give ids, or all: true", ErrInvalid)
	}
	return nil
}

// crossOrigin says why a write request may come from another origin ("" when
// it is same-origin): a browser sends Origin (and Sec-Fetch-Site) with every
// cross-origin POST; requiring a JSON content type also forces a CORS
// preflight, which this endpoint never grants. Clients other than browsers
// (curl, the CLI) send neither header and pass.
func crossOrigin(r *http.Request) string {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return "cross-origin request refused (Sec-Fetch-Site: " + s + ")"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return "cross-origin request refused (Origin " + o + ")"
		}
	}
	// Always, even with no body: a form (the one cross-site POST that needs
	// no preflight) cannot send this type, also from a browser too old to
	// send Origin.
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return "actions take Content-Type: application/json"
	}
	return ""
}

func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s=%q must be an integer in [%d, %d]", ErrInvalid, name, s, lo, hi)
	}
	return n, nil
}

func errBody(msg string) map[string]string { return map[string]string{"error": msg} }

func writeError(w http.ResponseWriter, log *slog.Logger, what string, err error) {
	status := http.StatusServiceUnavailable
	switch {
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ErrInvalid):
		status = http.StatusBadRequest
	default:
		log.Warn("shield: ops console request failed", "what", what, "error", err)
	}
	writeJSON(w, status, errBody(err.Error()))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// noStore keeps browsers from caching the console across upgrades and sets
// a Content-Security-Policy that allows only same-origin scripts, styles
// and requests.
func noStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}
