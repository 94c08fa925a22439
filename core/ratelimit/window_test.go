package ratelimit

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/store"
)

// stubWindow is a window backend whose ops settle when the test says, with
// the outcome it says: ops in flight while Redis goes and comes back.
type stubWindow struct {
	windowBackend
	ops []func(err error) (Decision, error)
}

func (s *stubWindow) allow(_ string, _ int64, settle settleFunc, seq uint64) *store.Op[Decision] {
	s.ops = append(s.ops, func(err error) (Decision, error) {
		if err != nil {
			return settle(seq, Decision{}, err)
		}
		return settle(seq, Decision{Allowed: true}, nil)
	})
	return store.Failed[Decision](errors.New("stub: settled by the test"))
}

// One outage logs one warning and one recovery, however the replies of the
// ops in flight around its ends arrive: op 2 was sent before Redis came
// back and still retrying its dial when op 3, sent after, succeeded; its
// failure arriving last is not a new outage (it logged a second warning
// and a second recovery, and make test's TestLimitersWhenRedisStopsMidRun
// failed on it). A success of an op sent before the outage began, arriving
// after the first failure, does not end it either.
func TestSlidingWindowLogsAnOutageOnce(t *testing.T) {
	logs := &records{}
	s := NewMemory(Config{Logger: slog.New(logs)})
	w, err := s.SlidingWindow("sw", Options{Window: time.Second, MaxRequests: 10})
	if err != nil {
		t.Fatal(err)
	}
	stub := &stubWindow{windowBackend: w.be}
	w.be = stub
	for range 5 {
		w.AllowOp("k", 1)
	}
	down := errors.New("dial tcp: connection refused")
	op := stub.ops
	op[1](down) // the outage begins
	op[0](nil)  // sent before it, answered after
	op[3](nil)  // Redis is back
	op[2](down) // sent before it came back, failed after
	op[4](nil)
	if n := logs.count("WARN sliding-window rate limiter cannot reach Redis"); n != 1 {
		t.Errorf("%d outage warnings, want 1: %q", n, logs.msgs)
	}
	if n := logs.count("INFO sliding-window rate limiter reaches Redis again"); n != 1 {
		t.Errorf("%d recovery notices, want 1: %q", n, logs.msgs)
	}
	if w.failing.Load() {
		t.Error("the limiter still counts Redis as unreachable")
	}
}
