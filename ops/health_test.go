package ops

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/config"
)

// One budget: the check's deadline is its part of the answer's, and a check
// that ignores its context still gets a 503 naming it, without a hang.
func TestHealthBudget(t *testing.T) {
	if checkBudget+answerMargin != ReadyTimeout || answerMargin <= 0 || ReadyTimeout >= time.Second {
		t.Fatalf("budget %v = check %v + margin %v: want the parts to add up, under a second", ReadyTimeout, checkBudget, answerMargin)
	}
	stuck := make(chan struct{})
	defer close(stuck)
	var leftNs atomic.Int64 // of the check's deadline, when it ran
	srv, err := Listen(config.Ops{Listen: "127.0.0.1:0"}, Sources{
		Live: func(ctx context.Context) error {
			dl, ok := ctx.Deadline()
			if !ok {
				return errors.New("no deadline")
			}
			leftNs.Store(int64(time.Until(dl)))
			return nil
		},
		Ready: func(ctx context.Context) error { <-stuck; return nil }, // ignores its context
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	base := "http://" + srv.Addr()

	if code, body := do(t, "GET", base+"/healthz", nil, ""); code != 200 {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if left := time.Duration(leftNs.Load()); left <= 0 || left > checkBudget {
		t.Fatalf("the check had %v left of its deadline, want at most %v", left, checkBudget)
	}
	start := time.Now()
	code, body := do(t, "GET", base+"/readyz", nil, "")
	took := time.Since(start)
	if code != 503 || !strings.Contains(body, "backend check did not finish within 800ms") {
		t.Fatalf("/readyz with a stuck check: %d %s", code, body)
	}
	// The claim is "no hang": a bound a loaded machine meets.
	if took > 3*time.Second {
		t.Fatalf("/readyz took %v", took)
	}
}
