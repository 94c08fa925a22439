package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/shieldrt/shieldglobal/core/ratelimit"
)

// A process's limiters: NewRedis(client, prefix, cfg) for limits shared
// with other processes, NewMemory for one process. Start runs the reports
// and the cleanup; Stop hands the shares back.
func Example() {
	s := ratelimit.NewMemory(ratelimit.Config{})
	s.Start()
	defer s.Stop()

	api, err := s.TokenBucket("api_limit", ratelimit.Options{Rate: 1, Burst: 200})
	if err != nil {
		panic(err)
	}
	allowed := 0
	for range 250 {
		if ok, _ := api.Allow("client_ip", 1); ok {
			allowed++
		}
	}
	ok, reason := api.Allow("client_ip", 1)
	fmt.Println(allowed, ok, reason, api.Remaining("client_ip"))

	strict, err := s.SlidingWindow("api_strict", ratelimit.Options{Window: time.Minute, MaxRequests: 2})
	if err != nil {
		panic(err)
	}
	for range 3 {
		d, err := strict.Allow(context.Background(), "client_ip", 1)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Reason, d.Remaining)
	}
	st := s.Stats()
	fmt.Println(st.Allowed, st.Rejected, st.RejectedToday)
	// Output:
	// 200 false rejected 0
	// true  1
	// true  0
	// false rejected 0
	// 202 52 52
}
