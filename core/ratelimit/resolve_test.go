package ratelimit

import (
	"errors"
	"testing"
	"time"
)

func TestResolve(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		g    Given
		def  Algorithm
		want Options
		err  string
	}{
		{g: Given{Rate: 5}, want: Options{Algorithm: AlgorithmTokenBucket, Rate: 5, Burst: 5}},
		{g: Given{Rate: 0.5}, want: Options{Algorithm: AlgorithmTokenBucket, Rate: 0.5, Burst: 1}},
		{g: Given{Window: time.Second, MaxRequests: 3}, def: AlgorithmSlidingWindow,
			want: Options{Algorithm: AlgorithmSlidingWindow, Sliding: true, Window: time.Second, MaxRequests: 3}},
		{g: Given{Window: time.Second, MaxRequests: 3, Sliding: &yes},
			want: Options{Algorithm: AlgorithmSlidingWindow, Sliding: true, Window: time.Second, MaxRequests: 3}},
		{g: Given{Rate: 1, Sliding: &no}, def: AlgorithmSlidingWindow, want: Options{Algorithm: AlgorithmTokenBucket, Rate: 1, Burst: 1}},
		{g: Given{Algorithm: AlgorithmTokenBucket, Sliding: &yes, Rate: 1}, err: `option sliding = true contradicts algorithm = "token_bucket"`},
		{g: Given{Rate: 1, Sliding: &yes}, err: "option rate is a token-bucket option, but sliding = true makes this a sliding window (options: window, max_requests)"},
		{g: Given{Window: time.Second}, err: `option window is a sliding-window option, but rate_limiter.algorithm = "token_bucket" makes this a token bucket (set sliding = true for a sliding window)`},
		{g: Given{Algorithm: AlgorithmSlidingWindow, Window: time.Second}, err: "option max_requests is required for a sliding window"},
		{g: Given{Burst: 2}, err: "option rate is required for a token bucket (tokens per second)"},
	} {
		got, err := Resolve(c.g, c.def)
		if c.err != "" {
			if err == nil || err.Error() != c.err || !errors.Is(err, ErrInvalid) {
				t.Errorf("Resolve(%+v) error %v, want %q (ErrInvalid)", c.g, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Resolve(%+v) = %+v, %v; want %+v", c.g, got, err, c.want)
		}
	}
}
