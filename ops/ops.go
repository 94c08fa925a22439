// Package ops is the operations HTTP endpoint of shield_global:
//
//	GET /ops/global     the spec's JSON: local cache, locks, ranks, queues, rate limiters
//	GET /ops/scheduler  the spec's JSON: every scheduled task
//	GET /metrics        Prometheus text exposition
//	GET /healthz        liveness: the process and its loops (health.go)
//	GET /readyz         readiness: the backend answers, within a second
//	GET /ops/           the web console, and its JSON API under /ops/api/ (console.go)
//
// It listens on loopback by default (ops.listen) and, with ops.token set,
// answers only requests carrying "Authorization: Bearer <token>": anything
// else gets 401 with no body beyond "unauthorized". The reports come from the
// Module through Sources, computed per request with the request's context
// (a report may need Redis: queue lengths, leaderboard sizes).
package ops

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shieldrt/shieldglobal/config"
)

// Global is the body of GET /ops/global, field for field the spec's JSON.
type Global struct {
	Data        Data        `json:"data"`
	Locks       Locks       `json:"locks"`
	Ranks       Ranks       `json:"ranks"`
	Queues      []Queue     `json:"queues"`
	RateLimiter RateLimiter `json:"rate_limiter"`
}

// Data reports the process-local cache of shield.global().
type Data struct {
	CacheSize    int     `json:"cache_size"`
	CacheHitRate float64 `json:"cache_hit_rate"`
}

// Locks counts this process's lock holds and waiting acquires.
type Locks struct {
	Active  int `json:"active"`
	Waiting int `json:"waiting"`
}

// Ranks counts the leaderboards this process opened and their members.
type Ranks struct {
	Count        int `json:"count"`
	TotalMembers int `json:"total_members"`
}

// Queue is one queue this process opened. A delay queue reports pending and
// ready; every other kind length and consumers (the spec's two shapes).
type Queue struct {
	Name      string `json:"name"`
	Length    *int64 `json:"length,omitempty"`
	Consumers *int   `json:"consumers,omitempty"`
	Pending   *int64 `json:"pending,omitempty"`
	Ready     *int64 `json:"ready,omitempty"`
}

// RateLimiter reports this process's rate limiters: keys in use, and the
// requests rejected since UTC midnight.
type RateLimiter struct {
	Active        int   `json:"active"`
	RejectedToday int64 `json:"rejected_today"`
}

// Scheduler is the body of GET /ops/scheduler.
type Scheduler struct {
	Tasks []Task `json:"tasks"`
}

// Task is one scheduled task: the spec's fields, then the failure
// counters. NextRun and LastRun are RFC 3339 in UTC, null when there is
// none (not yet run; a paused task's next run).
type Task struct {
	Name        string  `json:"name"`
	Schedule    string  `json:"schedule"`
	Status      string  `json:"status"`
	NextRun     *string `json:"next_run"`
	LastRun     *string `json:"last_run"`
	RunCount    int64   `json:"run_count"`
	Distributed bool    `json:"distributed"`
	// Beyond the spec: firings whose last attempt failed, the latest
	// failure's error (null if none), firings missed and skipped.
	Failures  int64   `json:"failures"`
	LastError *string `json:"last_error"`
	Missed    int64   `json:"missed"`
	Skipped   int64   `json:"skipped"`
}

// StatusFailing is the status /ops/scheduler shows for an active task whose
// latest run failed (the scheduler's "error", or an attempt that failed
// with its retries still to come).
const StatusFailing = "failing"

// Timestamp formats a Unix-ms time for NextRun/LastRun; 0 is null.
func Timestamp(ms int64) *string {
	if ms <= 0 {
		return nil
	}
	s := time.UnixMilli(ms).UTC().Format(time.RFC3339)
	return &s
}

// Sources are where the reports come from. A nil function reports zeros (a
// capability switched off).
type Sources struct {
	// State is read for GET /ops/global (see State.Global).
	State     func(ctx context.Context) (State, error)
	Scheduler func(ctx context.Context) (Scheduler, error)
	// Gatherer is what /metrics exposes (Metrics.Registry).
	Gatherer prometheus.Gatherer
	// Live is GET /healthz: nil when the process and its loops are alive.
	// Ready is GET /readyz: nil when the backend answers. Each runs under
	// a deadline of its part of ReadyTimeout (health.go). A nil function
	// always passes.
	Live, Ready func(ctx context.Context) error
	// Console backs the web console's pages and actions (console.go).
	Console Console
}

// Server is a running ops endpoint.
type Server struct {
	srv *http.Server
	ln  net.Listener
	log *slog.Logger
}

// reportTimeout bounds one report (they may talk to Redis).
const reportTimeout = 5 * time.Second

// Listen starts the endpoint cfg describes (cfg.Enabled is the caller's
// business). Errors: the address cannot be listened on (the error names it).
func Listen(cfg config.Ops, src Sources, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("ops.listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ops/global", func(w http.ResponseWriter, r *http.Request) {
		serveJSON(w, r, log, "global", func(ctx context.Context) (any, error) {
			var s State
			if src.State != nil {
				var err error
				if s, err = src.State(ctx); err != nil {
					return nil, err
				}
			}
			return s.Global(), nil
		})
	})
	mux.HandleFunc("GET /ops/scheduler", func(w http.ResponseWriter, r *http.Request) {
		serveJSON(w, r, log, "scheduler", func(ctx context.Context) (any, error) {
			s := Scheduler{Tasks: []Task{}}
			if src.Scheduler != nil {
				var err error
				if s, err = src.Scheduler(ctx); s.Tasks == nil {
					s.Tasks = []Task{}
				}
				return s, err
			}
			return s, nil
		})
	})
	g := src.Gatherer
	if g == nil {
		g = prometheus.NewRegistry()
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog: slogPrinter{log},
		// A state that could not be read in full (Redis down) still
		// exposes the rest; the error is logged.
		ErrorHandling: promhttp.ContinueOnError,
	}))
	open := http.NewServeMux()
	mountHealth(open, mux, cfg.HealthAuth, src)
	mountConsole(open, mux, cfg.Admin, src, log)
	open.Handle("/", authorized(cfg.Token, mux))
	s := &Server{ln: ln, log: log, srv: &http.Server{
		Handler:           open,
		ReadHeaderTimeout: 5 * time.Second,
	}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("shield: ops endpoint stopped", "error", err)
		}
	}()
	log.Info("shield: ops endpoint listening", "addr", ln.Addr().String(), "token", cfg.Token != "")
	return s, nil
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the endpoint, letting requests in progress finish for up to 2 s.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// authorized requires the bearer token when one is configured.
func authorized(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="shield"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func serveJSON(w http.ResponseWriter, r *http.Request, log *slog.Logger, what string, report func(context.Context) (any, error)) {
	ctx, cancel := context.WithTimeout(r.Context(), reportTimeout)
	defer cancel()
	v, err := report(ctx)
	if err != nil {
		log.Warn("shield: ops report failed", "report", what, "error", err)
		http.Error(w, "report failed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.l.Warn("shield: metrics: " + fmt.Sprint(v...)) }
