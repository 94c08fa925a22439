//go:build faults

package faults

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

func atoi(s string) int64 {
	n, _ := strconv.ParseFloat(s, 64)
	return int64(n)
}

// counterResult compares acknowledged increments with what the store holds.
type counterResult struct {
	Acked   int   // increments acknowledged to some process
	Final   int64 // the value read afterwards
	Lost    int   // acknowledged increments the final value does not contain
	Doubled int   // values returned by two acknowledged increments
}

// checkCounter: every ACK line carries the value its incr returned. Each
// acknowledged incr of 1 must be in the final value, and no two may have
// returned the same value (a value handed out twice means an acknowledged
// increment was lost and redone).
func checkCounter(procs []*Proc, final int64) counterResult {
	r := counterResult{Final: final}
	seen := map[int64]int{}
	for _, p := range procs {
		for _, l := range p.Lines("ACK") {
			r.Acked++
			seen[atoi(l.Fields[1])]++
		}
	}
	for _, n := range seen {
		if n > 1 {
			r.Doubled += n - 1
		}
	}
	// Unacknowledged increments that Redis applied anyway make the final
	// value larger, so also count the acknowledged values above it.
	if lost := int64(r.Acked) - final; lost > 0 {
		r.Lost = int(lost)
	}
	above := 0
	for v, n := range seen {
		if v > final {
			above += n
		}
	}
	r.Lost = max(r.Lost, above)
	return r
}

// lockResult is what the fencing evidence of lock_counter.lua shows.
type lockResult struct {
	Holds        int      // holds whose release returned true
	Overlaps     int      // pairs of such holds whose [acquired, before release] intersect
	DupTokens    int      // tokens granted twice
	Regressions  int      // holds (released with true) that began after another such hold ended with a token not larger
	LostWrites   int      // protected increments the counter does not contain
	StaleHolds   int      // holds that wrote but whose release did not return true (the lease had lapsed)
	SameProcDups int      // of DupTokens, holds of one process under one token (a hold taken as a re-entry of an earlier one)
	Examples     []string // the first overlapping pairs, for the log
}

type hold struct {
	token, start, end int64
	proc              string
}

// checkLocks: a hold whose release() returned true claims the task held the
// lock from acquire to release; two such holds must never intersect in
// time, and tokens must strictly increase in grant order
// (docs/locks.md).
func checkLocks(procs []*Proc, counter int64) lockResult {
	var r lockResult
	var all, good []hold
	wrote := 0
	for _, p := range procs {
		for _, l := range p.Lines("HOLD") {
			f := l.Fields // HOLD token acquired before counter wrote release why
			h := hold{token: atoi(f[1]), start: atoi(f[2]), end: atoi(f[3]), proc: p.Name}
			all = append(all, h)
			if f[6] == "true" {
				good = append(good, h)
				if f[5] == "true" {
					wrote++
				}
			} else if f[5] == "true" {
				r.StaleHolds++
			}
		}
	}
	r.Holds = len(good)
	sort.Slice(good, func(i, j int) bool { return good[i].start < good[j].start })
	for i := range good {
		for j := i + 1; j < len(good) && good[j].start < good[i].end; j++ {
			// Times are whole ms: holds that meet within one ms (equal
			// starts, one of them empty) do not overlap.
			if good[i].start >= good[j].end {
				continue
			}
			r.Overlaps++
			if len(r.Examples) < 3 {
				r.Examples = append(r.Examples, fmt.Sprintf("%s token %d [%d,%d] and %s token %d [%d,%d]",
					good[i].proc, good[i].token, good[i].start, good[i].end, good[j].proc, good[j].token, good[j].start, good[j].end))
			}
		}
	}
	tokens := map[int64]int{}
	procsOf := map[int64]map[string]bool{}
	for _, h := range all {
		tokens[h.token]++
		if procsOf[h.token] == nil {
			procsOf[h.token] = map[string]bool{}
		}
		procsOf[h.token][h.proc] = true
	}
	for tok, n := range tokens {
		if n > 1 {
			r.DupTokens += n - 1
			if len(procsOf[tok]) == 1 {
				r.SameProcDups += n - 1
			}
		}
	}
	// Ordering is judged on the holds that were held to their release: a
	// lapsed hold's reply may have come late, after a later grant.
	var maxEnded struct{ end, token int64 }
	for _, h := range good { // sorted by start
		if maxEnded.end > 0 && h.start > maxEnded.end && h.token <= maxEnded.token {
			r.Regressions++
		}
		if h.token > maxEnded.token {
			maxEnded.token, maxEnded.end = h.token, h.end
		}
	}
	if lost := int64(wrote) - counter; lost > 0 {
		r.LostWrites = int(lost)
	}
	return r
}

// queueResult compares pushed and acked reliable messages. A message is
// lost when a push of it was acknowledged and no consumer ever got it to
// process (acked it, or tried to: an ack that raised may have been applied,
// and then the message rightly never comes again).
type queueResult struct {
	Pushed, Acked int
	Lost          int // pushed (acknowledged) and never acked by anyone
	Redelivered   int // acked more than once (at-least-once allows it)
	Unknown       int // received but never acked: the ack raised, said "not_held" (acknowledged already), or the consumer died before printing its outcome
	LostMsgs      []string
}

func checkQueue(producers, consumers []*Proc) queueResult {
	var r queueResult
	// received: a consumer got the message (its POP line names it, or an
	// outcome line does). A message received and never acked is delivered
	// with its ack's outcome unknown: the ack raised, said "not_held"
	// (acknowledged already: a retry whose first attempt landed), or the
	// consumer was killed or stopped between the pop and its outcome line.
	// Whether such a message still waits in Redis is checked apart: the
	// queue must end empty (evaluate), so one a dead consumer held and
	// that was never redelivered fails there.
	acked, received := map[string]int{}, map[string]bool{}
	for _, p := range consumers {
		for _, l := range p.Lines("ACKED") {
			acked[l.Fields[1]]++
		}
		for _, tag := range []string{"ACKERR", "NACKED"} {
			for _, l := range p.Lines(tag) {
				received[l.Fields[1]] = true
			}
		}
		for _, l := range p.Lines("POP") {
			if len(l.Fields) > 4 {
				received[l.Fields[4]] = true
			}
		}
	}
	for _, p := range producers {
		for _, l := range p.Lines("PUSHED") {
			r.Pushed++
			if acked[l.Fields[1]] == 0 && received[l.Fields[1]] {
				r.Unknown++
			} else if acked[l.Fields[1]] == 0 {
				r.Lost++
				r.LostMsgs = append(r.LostMsgs, l.Fields[1])
			}
		}
	}
	for _, n := range acked {
		r.Acked++
		if n > 1 {
			r.Redelivered += n - 1
		}
	}
	return r
}

// firingResult: runs of the distributed interval task.
type firingResult struct {
	Runs    int
	Twice   int // firings (by scheduled time) run more than once
	Missed  int // firing slots between the first and the last run that never ran
	Allowed int // of them, slots the docs allow to miss (due while Redis did not answer, plus one heartbeat)
}

// checkFirings: slots are every `every` from the first run; a slot whose
// time lies in an outage window (from, to) may be missed (once Redis
// answers the latest firing due runs: docs/scheduler.md), plus `slack`
// slots after it (a claim retried on its backoff).
func checkFirings(procs []*Proc, every time.Duration, outages [][2]time.Time, slack int) firingResult {
	var r firingResult
	runs := map[int64]int{}
	for _, p := range procs {
		for _, l := range p.Lines("FIRE") {
			r.Runs++
			runs[atoi(l.Fields[1])]++
		}
	}
	if len(runs) == 0 {
		return r
	}
	var first, last int64 = 1 << 62, 0
	for s, n := range runs {
		first, last = min(first, s), max(last, s)
		if n > 1 {
			r.Twice++
		}
	}
	ms := every.Milliseconds()
	for s := first; s <= last; s += ms {
		if runs[s] > 0 {
			continue
		}
		r.Missed++
		for _, o := range outages {
			from, to := o[0].UnixMilli(), o[1].UnixMilli()+int64(slack)*ms
			if s >= from && s <= to {
				r.Allowed++
				break
			}
		}
	}
	return r
}

// recovery is, over procs, the longest time from `after` to the first line
// tagged one of tags that a process read after it (a process that never
// wrote one again counts up to `until`).
func recovery(procs []*Proc, after, until time.Time, tags ...string) time.Duration {
	var worst time.Duration
	for _, p := range procs {
		first := until
		for _, tag := range tags {
			for _, l := range p.Lines(tag) {
				if l.At.After(after) && l.At.Before(first) {
					first = l.At
				}
			}
		}
		worst = max(worst, first.Sub(after))
	}
	return worst
}

// slowest is the longest elapsed_ms (field i) over procs' lines tagged tag.
func slowest(procs []*Proc, tag string, i int) time.Duration {
	var worst int64
	for _, p := range procs {
		for _, l := range p.Lines(tag) {
			if len(l.Fields) > i {
				worst = max(worst, atoi(l.Fields[i]))
			}
		}
	}
	return time.Duration(worst) * time.Millisecond
}

// popOverruns counts pops that took longer than their timeout + slack.
func popOverruns(procs []*Proc, slack time.Duration) (n int, worst time.Duration) {
	for _, p := range procs {
		for _, l := range p.Lines("POP") {
			el, to := atoi(l.Fields[1]), atoi(l.Fields[2])
			if d := time.Duration(el-to) * time.Millisecond; d > slack {
				n++
				worst = max(worst, time.Duration(el)*time.Millisecond)
			}
		}
	}
	return n, worst
}
