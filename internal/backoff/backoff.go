// Package backoff computes the waits between retries of a failed Redis call:
// exponential, capped, and jittered, so that processes that lost Redis
// together do not retry together (a thundering herd at the moment it comes
// back). Every retry loop of the module uses it.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff: retry n waits about Min·2^(n-1), at most
// Max. The wait is drawn uniformly from [d/2, d] ("equal jitter"): half of it
// spreads processes apart, the other half keeps a floor, and no wait is ever
// longer than the unjittered schedule.
type Policy struct {
	Min time.Duration // the first retry's ceiling; > 0
	Max time.Duration // the cap; >= Min
}

// Delay returns the wait before retry n (n >= 1; n < 1 counts as 1).
func (p Policy) Delay(n int) time.Duration {
	return jitter(p.ceiling(n))
}

// ceiling is retry n's unjittered wait.
func (p Policy) ceiling(n int) time.Duration {
	d := p.Min
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}

// jitter draws uniformly from [d/2, d].
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// Backoff counts consecutive failures under a Policy. The zero value of the
// counter is "no failure yet". Not safe for concurrent use: each retry loop
// owns its own.
type Backoff struct {
	Policy
	n int
}

// New returns a Backoff with no failure counted.
func New(min, max time.Duration) Backoff { return Backoff{Policy: Policy{Min: min, Max: max}} }

// Next counts one more failure and returns the wait before the next try.
func (b *Backoff) Next() time.Duration {
	b.n++
	return b.Delay(b.n)
}

// Reset forgets the failures: the next Next waits about Min again.
func (b *Backoff) Reset() { b.n = 0 }

// Failures is the number of failures counted since the last Reset.
func (b *Backoff) Failures() int { return b.n }
