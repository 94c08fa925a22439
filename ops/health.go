package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// ReadyTimeout bounds GET /readyz: the backend check gets this long,
// whatever the client's own timeout, and the answer is a 503 naming the
// check when it has not finished by then. Below a second, so that the
// endpoint answers within one.
const ReadyTimeout = 800 * time.Millisecond

// Health is the body of GET /healthz and GET /readyz.
type Health struct {
	// Status is "ok" or "failing".
	Status string `json:"status"`
	// Reason says what failed (absent when ok).
	Reason string `json:"reason,omitempty"`
}

// mountHealth registers GET /healthz and /readyz on open (no token), or on
// authed (behind the token) with ops.health_auth.
func mountHealth(open, authed *http.ServeMux, auth bool, src Sources) {
	mux := open
	if auth {
		mux = authed
	}
	mux.HandleFunc("GET /healthz", healthHandler("liveness", ReadyTimeout, src.Live))
	mux.HandleFunc("GET /readyz", healthHandler("backend", ReadyTimeout, src.Ready))
}

// healthHandler answers 200 {"status":"ok"} when check returns nil within
// timeout, else 503 with the reason. check runs on its own goroutine with a
// context of its own (the request's, cut to timeout), and the answer does
// not wait for it past timeout: a check stuck in a read that ignores its
// context cannot hold the probe.
func healthHandler(what string, timeout time.Duration, check func(ctx context.Context) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := Health{Status: "ok"}
		if check != nil {
			// The check's own deadline comes a little before the answer's,
			// so that a check that gives up in time says why.
			ctx, cancel := context.WithTimeout(r.Context(), timeout-timeout/8)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- check(ctx) }()
			timer := time.NewTimer(timeout)
			defer timer.Stop()
			var err error
			select {
			case err = <-done:
			case <-timer.C:
				err = fmt.Errorf("%s check did not finish within %v", what, timeout)
			case <-r.Context().Done():
				return // the client left
			}
			if err != nil {
				h = Health{Status: "failing", Reason: err.Error()}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if h.Status != "ok" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(h)
	}
}
