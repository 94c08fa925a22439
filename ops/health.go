package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// The time budget of GET /healthz and /readyz, one budget in two parts:
// the answer goes out at the latest ReadyTimeout after the request,
// whatever the client's own timeout and whatever the check does. The check
// runs under a deadline of checkBudget, the budget less answerMargin, so
// that a check which gives up at its deadline (a Redis read cut by its
// context) has answerMargin to return its own reason ("redis at ... did
// not answer in time"), which says more than the handler's "did not
// finish"; a check that ignores its context is not waited for past
// ReadyTimeout (the answer is a 503 naming the check).
const (
	// ReadyTimeout bounds the answer: below a second, so that the endpoint
	// answers within one.
	ReadyTimeout = 800 * time.Millisecond
	answerMargin = ReadyTimeout / 8            // 100 ms
	checkBudget  = ReadyTimeout - answerMargin // 700 ms
)

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
	mux.HandleFunc("GET /healthz", healthHandler("liveness", src.Live))
	mux.HandleFunc("GET /readyz", healthHandler("backend", src.Ready))
}

// healthHandler answers 200 {"status":"ok"} when check returns nil within
// the budget, else 503 with the reason. check runs on its own goroutine
// with a context of its own (the request's, cut to checkBudget), and the
// answer does not wait for it past ReadyTimeout: a check stuck in a read
// that ignores its context cannot hold the probe.
func healthHandler(what string, check func(ctx context.Context) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := Health{Status: "ok"}
		if check != nil {
			ctx, cancel := context.WithTimeout(r.Context(), checkBudget)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- check(ctx) }()
			timer := time.NewTimer(ReadyTimeout)
			defer timer.Stop()
			var err error
			select {
			case err = <-done:
			case <-timer.C:
				err = fmt.Errorf("%s check did not finish within %v", what, ReadyTimeout)
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
