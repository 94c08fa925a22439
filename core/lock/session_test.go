package lock

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sysclock "github.com/shieldrt/shieldglobal/internal/clock"
	"github.com/shieldrt/shieldglobal/internal/testlog"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/core/lock/local"
	"github.com/shieldrt/shieldglobal/internal/testclock"
	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// proc stands for one process: a Service (its own in-process locks, so its
// own gates) with one session on a loop of its own.
type proc struct {
	t    *testing.T
	svc  *Service
	loop *testLoop
	s    *Session
	log  *syncBuffer
}

// syncBuffer is the tests' goroutine-safe log sink.
type syncBuffer = testlog.Buffer

var testDefaults = Defaults{TTL: 30 * time.Second, MaxTTL: time.Hour, Retry: 100 * time.Millisecond, Reentrant: true,
	AutoExtend: true, ExtendInterval: 10 * time.Second}

func newProc(t *testing.T, dist Backend, clock Clock) *proc {
	t.Helper()
	if clock == nil {
		clock = sysclock.Real
	}
	buf := &syncBuffer{}
	svc := NewService(ServiceConfig{Local: local.NewManager(clock.Now), Dist: dist, Defaults: testDefaults, Clock: clock,
		Log: slog.New(slog.NewTextHandler(buf, nil))})
	return newSession(t, svc, buf)
}

// another session (runtime) of the same process.
func (p *proc) another() *proc { return newSession(p.t, p.svc, p.log) }

func newSession(t *testing.T, svc *Service, buf *syncBuffer) *proc {
	l := newTestLoop(t)
	return &proc{t: t, svc: svc, loop: l, s: svc.NewSession(l), log: buf}
}

func (p *proc) lock(spec Spec) *Lock {
	p.t.Helper()
	var l *Lock
	var err error
	p.loop.do(func() { l, err = p.s.NewLock(spec) })
	if err != nil {
		p.t.Fatalf("NewLock(%+v): %v", spec, err)
	}
	return l
}

type acquired struct {
	h   *Hold
	err error
}

// start begins an acquire on the loop; the outcome arrives on the channel.
func (p *proc) start(l *Lock, owner string, timeout time.Duration) <-chan acquired {
	ch := make(chan acquired, 1)
	o, _ := ParseOwner(owner)
	p.loop.Post(func() { l.Acquire(o, timeout, func(h *Hold, err error) { ch <- acquired{h, err} }) })
	return ch
}

func wait(t *testing.T, ch <-chan acquired, what string) acquired {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no outcome within 10s", what)
		return acquired{}
	}
}

func (p *proc) mustAcquire(l *Lock, owner string, timeout time.Duration) *Hold {
	p.t.Helper()
	r := wait(p.t, p.start(l, owner, timeout), "acquire by "+owner)
	if r.err != nil {
		p.t.Fatalf("acquire %s by %s: %v", l.Name(), owner, r.err)
	}
	return r.h
}

func (p *proc) release(h *Hold) (int, error) {
	ch := make(chan acquired, 1)
	var n int
	p.loop.Post(func() {
		h.Release(func(rem int, err error) { n = rem; ch <- acquired{err: err} })
	})
	r := wait(p.t, ch, "release")
	return n, r.err
}

func (p *proc) mustRelease(h *Hold, want int) {
	p.t.Helper()
	if n, err := p.release(h); err != nil || n != want {
		p.t.Fatalf("release: %d, %v; want %d", n, err, want)
	}
}

func (p *proc) info(l *Lock) Info {
	p.t.Helper()
	var info Info
	var err error
	p.loop.do(func() { info, err = l.InfoOp().Do(p.loop.ctx) })
	if err != nil {
		p.t.Fatal(err)
	}
	return info
}

// distributedBackends are the backends a session runs on: memory and the
// three Redis deployments. Each call gives a fresh key space.
func distributedBackends(t *testing.T) map[string]func(t *testing.T) Backend {
	out := map[string]func(t *testing.T) Backend{
		"memory": func(*testing.T) Backend { return NewMemory(nil) },
	}
	for name, c := range testredis.Backends(t) {
		out[name] = func(t *testing.T) Backend { b, _ := newRedisBackend(t, c); return b }
	}
	return out
}

const (
	ownerA = "node-1:7:coroutine-a-1"
	ownerB = "node-1:7:coroutine-a-2"
	ownerC = "node-2:7:coroutine-b-3"
)

func TestSessionAcquireRelease(t *testing.T) {
	for name, backend := range distributedBackends(t) {
		t.Run(name, func(t *testing.T) {
			p := newProc(t, backend(t), nil)
			for _, scope := range []Scope{InProcess, Distributed} {
				l := p.lock(Spec{Name: "boss-" + scope.String(), Mode: Exclusive, Scope: scope})
				other := p.lock(Spec{Name: l.Name(), Mode: Exclusive, Scope: scope})
				h := p.mustAcquire(l, ownerA, WaitForever)
				if h.Name() != l.Name() || h.Owner().NodeID != "node-1" || h.Owner().ServiceID != 7 || h.Count() != 1 || h.AcquiredAt().IsZero() {
					t.Fatalf("%v hold: %+v", scope, h)
				}
				if scope == Distributed && (h.Token() <= 0 || h.TTL() != 30*time.Second) {
					t.Fatalf("distributed hold token %d ttl %v", h.Token(), h.TTL())
				}
				// A re-entry through another object of the same name is the same hold.
				if h2 := p.mustAcquire(other, ownerA, WaitForever); h2 != h || h.Count() != 2 {
					t.Fatalf("re-entry: %p (count %d), want %p with count 2", h2, h.Count(), h)
				}
				// Another owner waits; try-once fails at once.
				if r := wait(t, p.start(l, ownerB, TryOnce), "try"); !errors.Is(r.err, ErrTimeout) {
					t.Fatalf("try by another owner: %v; want ErrTimeout", r.err)
				}
				info := p.info(l)
				if !info.Held || len(info.Owners) != 1 || info.Owners[0] != (Holder{Owner: ownerA, Count: 2}) {
					t.Fatalf("info %+v", info)
				}
				p.mustRelease(h, 1)
				p.mustRelease(h, 0)
				if _, err := p.release(h); !errors.Is(err, ErrNotHeld) {
					t.Fatalf("release after the end: %v; want ErrNotHeld", err)
				}
				if info := p.info(l); info.Held {
					t.Fatalf("still held: %+v", info)
				}
				// Not reentrant: the holder's second acquire is refused at once.
				nr := p.lock(Spec{Name: "nr-" + scope.String(), Mode: Exclusive, Scope: scope, Given: Given{Reentrant: ptr(false)}})
				h = p.mustAcquire(nr, ownerA, WaitForever)
				if r := wait(t, p.start(nr, ownerA, WaitForever), "re-entry"); !errors.Is(r.err, ErrReentry) {
					t.Fatalf("non-reentrant re-entry: %v; want ErrReentry", r.err)
				}
				p.mustRelease(h, 0)
				var holds, waits int
				p.loop.do(func() { holds, waits = p.s.Active() })
				if holds != 0 || waits != 0 {
					t.Fatalf("%d holds and %d waits left", holds, waits)
				}
			}
			if st := p.svc.Stats(); st.Holds != 0 || st.Waiting != 0 || st.Lost != 0 || st.Abandoned != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// An uncontended distributed acquire and release are one Redis operation
// each, sent in the loop's batch: nothing runs on another goroutine.
func TestSessionUncontendedIsOneOperationEach(t *testing.T) {
	p := newProc(t, func() Backend { b, _ := newRedisBackend(t, testredis.Standalone(t)); return b }(), nil)
	l := p.lock(Spec{Name: "pair", Mode: Exclusive, Scope: Distributed, Given: Given{AutoExtend: ptr(false)}})
	before := p.loop.sends.Load()
	h := p.mustAcquire(l, ownerA, WaitForever)
	if n := p.loop.sends.Load() - before; n != 1 {
		t.Fatalf("acquire sent %d operations; want 1", n)
	}
	p.mustRelease(h, 0)
	if n := p.loop.sends.Load() - before; n != 2 {
		t.Fatalf("acquire + release sent %d operations; want 2", n)
	}
	if n := p.loop.gos.Load(); n != 0 {
		t.Fatalf("%d functions ran off the loop; want none", n)
	}
}

// A waiter is woken by the release, from another process, long before its
// retry interval.
func TestSessionWokenByRelease(t *testing.T) {
	for name, backend := range distributedBackends(t) {
		t.Run(name, func(t *testing.T) {
			b := backend(t)
			holder, waiter := newProc(t, b, nil), newProc(t, b, nil)
			spec := Spec{Name: "wake", Mode: Exclusive, Scope: Distributed, Given: Given{Retry: ptr(time.Hour)}}
			h := holder.mustAcquire(holder.lock(spec), ownerA, WaitForever)
			l := waiter.lock(spec)
			ch := waiter.start(l, ownerC, WaitForever)
			waitFor(t, "the waiter waits", func() bool { return waiter.svc.Stats().Waiting == 1 })
			holder.mustRelease(h, 0)
			r := wait(t, ch, "woken waiter") // a one-hour retry: only the wake-up can do it in 10s
			if r.err != nil {
				t.Fatal(r.err)
			}
			waiter.mustRelease(r.h, 0)
		})
	}
}

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Tasks of one process queue at the local gate, FIFO, and only the gate's
// holder contends in the backend.
func TestSessionGateIsFIFO(t *testing.T) {
	for name, backend := range distributedBackends(t) {
		t.Run(name, func(t *testing.T) {
			p := newProc(t, backend(t), nil)
			rts := []*proc{p, p.another(), p.another()}
			spec := Spec{Name: "gate", Mode: Exclusive, Scope: Distributed}
			h := p.mustAcquire(p.lock(spec), ownerA, WaitForever)
			var chans []<-chan acquired
			for i, rt := range rts {
				owner := fmt.Sprintf("node-1:7:coroutine-a-%d", 10+i)
				chans = append(chans, rt.start(rt.lock(spec), owner, WaitForever))
				waitFor(t, owner+" queued", func() bool { return p.svc.Stats().Waiting == int64(i+1) })
			}
			p.mustRelease(h, 0)
			for i, ch := range chans {
				r := wait(t, ch, fmt.Sprintf("waiter %d", i))
				if r.err != nil {
					t.Fatal(r.err)
				}
				for j, other := range chans[i+1:] {
					select {
					case o := <-other:
						t.Fatalf("waiter %d got the lock while waiter %d held it: %+v", i+1+j, i, o)
					default:
					}
				}
				rts[i].mustRelease(r.h, 0)
			}
		})
	}
}

// max_retries and retry hold against a holder in the same process and in
// another process alike: wake-ups and retry intervals are attempts, and
// max_retries = 1 is a single attempt.
func TestSessionMaxRetries(t *testing.T) {
	clock := testclock.New()
	mem := NewMemory(clock.Now)
	p := newProc(t, mem, clock)
	remote := newProc(t, mem, clock)
	mr := func(n int) Given { return Given{MaxRetries: ptr(n), Retry: ptr(100 * time.Millisecond)} }
	for _, scope := range []Scope{InProcess, Distributed} {
		for _, where := range []string{"same process", "another process"} {
			if scope == InProcess && where == "another process" {
				continue
			}
			t.Run(scope.String()+", holder in "+where, func(t *testing.T) {
				name := "mr-" + scope.String() + "-" + where
				holderProc := p.another()
				if where == "another process" {
					holderProc = remote
				}
				h := holderProc.mustAcquire(holderProc.lock(Spec{Name: name, Mode: Exclusive, Scope: scope}), ownerC, WaitForever)

				// max_retries = 1: one failed attempt, no waiting (the clock never moves).
				r := wait(t, p.start(p.lock(Spec{Name: name, Mode: Exclusive, Scope: scope, Given: mr(1)}), ownerA, WaitForever), "max_retries 1")
				if !errors.Is(r.err, ErrTimeout) {
					t.Fatalf("max_retries = 1: %v; want ErrTimeout", r.err)
				}

				// max_retries = 3 without wake-ups: attempts at 0, 100 and 200 ms.
				ch := p.start(p.lock(Spec{Name: name, Mode: Exclusive, Scope: scope, Given: mr(3)}), ownerA, WaitForever)
				for i := 0; i < 2; i++ {
					waitFor(t, "waiting", func() bool { return p.svc.Stats().Waiting == 1 })
					select {
					case r := <-ch:
						t.Fatalf("gave up after %d retry intervals: %v", i, r.err)
					default:
					}
					clock.AdvanceStepwise(100 * time.Millisecond)
					p.loop.do(func() {})
				}
				if r := wait(t, ch, "max_retries 3"); !errors.Is(r.err, ErrTimeout) {
					t.Fatalf("max_retries = 3: %v; want ErrTimeout", r.err)
				}
				holderProc.mustRelease(h, 0)
			})
		}
	}

	// A wake-up is an attempt: B waits (first in line), C has max_retries
	// = 2; A's release hands the lock to B and costs C its second attempt,
	// without any time passing.
	t.Run("wake-up counts", func(t *testing.T) {
		for _, scope := range []Scope{InProcess, Distributed} {
			name := "mr-wake-" + scope.String()
			a, b := p.another(), p.another()
			h := a.mustAcquire(a.lock(Spec{Name: name, Mode: Exclusive, Scope: scope}), ownerA, WaitForever)
			chB := b.start(b.lock(Spec{Name: name, Mode: Exclusive, Scope: scope}), ownerB, WaitForever)
			waitFor(t, "B queued", func() bool { return p.svc.Stats().Waiting == 1 })
			chC := p.start(p.lock(Spec{Name: name, Mode: Exclusive, Scope: scope, Given: Given{MaxRetries: ptr(2), Retry: ptr(time.Hour)}}), ownerC, WaitForever)
			waitFor(t, "C queued", func() bool { return p.svc.Stats().Waiting == 2 })
			a.mustRelease(h, 0)
			rb := wait(t, chB, "B")
			if rb.err != nil {
				t.Fatal(rb.err)
			}
			if rc := wait(t, chC, "C"); !errors.Is(rc.err, ErrTimeout) {
				t.Fatalf("%v: C after a wake-up that went to B: %v; want ErrTimeout", scope, rc.err)
			}
			b.mustRelease(rb.h, 0)
		}
	})
}

// freeze stops a private redis-server with SIGSTOP (it hangs: connections
// stay open, nothing answers); thaw resumes it. The test's end thaws it too.
func freeze(t *testing.T, srv *testredis.Server) (thaw func()) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	info, err := c.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid <= 0 {
		t.Fatalf("no process_id in INFO server of %s", srv)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	thaw = func() { once.Do(func() { syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(thaw)
	return thaw
}

// A timeout is a hard bound while Redis hangs: the acquire returns at its
// timeout, long before the client's read timeout, with an error that blames
// the backend (not a plain timeout); the attempt that was in flight
// succeeds once Redis is back, and is released.
func TestSessionTimeoutIsAHardBoundWhileRedisHangs(t *testing.T) {
	srv := testredis.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 20 * time.Second, WriteTimeout: 20 * time.Second})
	t.Cleanup(func() { c.Close() })
	b, _ := newRedisBackend(t, c)
	p := newProc(t, b, nil)
	l := p.lock(Spec{Name: "frozen", Mode: Exclusive, Scope: Distributed})
	p.mustRelease(p.mustAcquire(l, ownerA, WaitForever), 0) // scripts loaded, connection up
	thaw := freeze(t, srv)
	start := time.Now()
	r := wait(t, p.start(l, ownerA, 500*time.Millisecond), "acquire while Redis hangs")
	elapsed := time.Since(start)
	if !errors.Is(r.err, ErrStalled) || errors.Is(r.err, ErrTimeout) {
		t.Fatalf("acquire(500ms) while Redis hangs: %v; want ErrStalled, not ErrTimeout", r.err)
	}
	if !strings.Contains(r.err.Error(), `lock: acquire "frozen"`) || !strings.Contains(r.err.Error(), "no answer") {
		t.Fatalf("error does not say what failed: %v", r.err)
	}
	if elapsed >= 10*time.Second {
		t.Fatalf("acquire(500ms) returned after %v: it waited for the network, not its timeout", elapsed)
	}
	thaw()
	// The late grant is released: the lock is free again, and nobody holds it here.
	waitFor(t, "the late grant released", func() bool {
		info, held, err := inf(t.Context(), b, "frozen")
		return err == nil && !held && info.Waiting == 0
	})
	var holds int
	p.loop.do(func() { holds, _ = p.s.Active() })
	if holds != 0 {
		t.Fatalf("%d holds recorded after a stalled acquire", holds)
	}
	p.mustRelease(p.mustAcquire(l, ownerB, time.Second), 0)
}

// Renewal goes through the owning loop: while that loop is wedged (a task
// that never yields), the lease lapses and another process gets the lock
// after its ttl; once the loop runs again the hold reports lost and on_lost
// runs.
func TestSessionWedgedLoopLetsTheLeaseLapse(t *testing.T) {
	for name, backend := range distributedBackends(t) {
		t.Run(name, func(t *testing.T) {
			b := backend(t)
			holder, other := newProc(t, b, nil), newProc(t, b, nil)
			spec := Spec{Name: "wedged", Mode: Exclusive, Scope: Distributed,
				Given: Given{TTL: ptr(600 * time.Millisecond), ExtendInterval: ptr(100 * time.Millisecond)}}
			l := holder.lock(spec)
			lost := make(chan string, 1)
			holder.loop.do(func() { l.OnLost(func(h *Hold) { lost <- h.LostReason() }) })
			h := holder.mustAcquire(l, ownerA, WaitForever)
			// The watchdog keeps it while the loop runs: well past the ttl.
			time.Sleep(900 * time.Millisecond)
			if r := wait(t, other.start(other.lock(spec), ownerC, TryOnce), "try"); !errors.Is(r.err, ErrTimeout) {
				t.Fatalf("the lock was free although its holder's loop renewed it: %v\n%s", r.err, holder.log.String())
			}
			unwedge := holder.loop.wedge()
			r := wait(t, other.start(other.lock(spec), ownerC, 5*time.Second), "acquire past the wedged holder")
			if r.err != nil {
				unwedge()
				t.Fatalf("another process did not get the lock of a wedged holder: %v", r.err)
			}
			unwedge()
			select {
			case why := <-lost:
				if !strings.Contains(why, "lease ran out") {
					t.Fatalf("lost because %q", why)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("on_lost did not run once the loop ran again")
			}
			var isLost bool
			holder.loop.do(func() { isLost = l.Lost(h.Owner()) })
			if !isLost {
				t.Fatal("Lost() is false")
			}
			if _, err := holder.release(h); !errors.Is(err, ErrLost) {
				t.Fatalf("release of the lapsed hold: %v; want ErrLost", err)
			}
			// The new holder keeps it: the lost one's release did not free it.
			if info := other.info(other.lock(spec)); !info.Held || info.Owners[0].Owner != ownerC {
				t.Fatalf("info after the lost release: %+v", info)
			}
			if st := holder.svc.Stats(); st.Lost != 1 || st.Holds != 0 {
				t.Fatalf("stats %+v", st)
			}
			other.mustRelease(r.h, 0)
		})
	}
}

// A hold whose task ended is released with a warning naming the lock and
// the task, every level at once, and counted.
func TestSessionAbandon(t *testing.T) {
	for name, backend := range distributedBackends(t) {
		t.Run(name, func(t *testing.T) {
			p := newProc(t, backend(t), nil)
			for _, spec := range []Spec{
				{Name: "ab-local", Mode: Exclusive, Scope: InProcess},
				{Name: "ab-rw", Mode: Shared, Scope: InProcess},
				{Name: "ab-dist", Mode: Exclusive, Scope: Distributed},
				{Name: "ab-dist-rw", Mode: Shared, Scope: Distributed},
			} {
				l := p.lock(spec)
				h := p.mustAcquire(l, ownerA, WaitForever)
				p.mustAcquire(l, ownerA, WaitForever) // count 2
				p.loop.do(func() { h.Abandon("worker.lua") })
				waitFor(t, spec.Name+" free", func() bool { return !p.info(l).Held })
				if !strings.Contains(p.log.String(), "lock="+spec.Name) || !strings.Contains(p.log.String(), "task=worker.lua") {
					t.Fatalf("no warning naming %s and the task:\n%s", spec.Name, p.log.String())
				}
				// The next owner gets it at once.
				p.mustRelease(p.mustAcquire(l, ownerB, TryOnce), 0)
			}
			if st := p.svc.Stats(); st.Abandoned != 4 || st.Holds != 0 {
				t.Fatalf("stats %+v; want 4 abandoned, none held", st)
			}
		})
	}
}

// CancelWaits ends pending acquires with the given error; holds stay.
func TestSessionCancelWaits(t *testing.T) {
	p := newProc(t, NewMemory(nil), nil)
	for _, scope := range []Scope{InProcess, Distributed} {
		spec := Spec{Name: "cw-" + scope.String(), Mode: Exclusive, Scope: scope}
		holder := p.another()
		h := holder.mustAcquire(holder.lock(spec), ownerC, WaitForever)
		ch := p.start(p.lock(spec), ownerA, WaitForever)
		waitFor(t, "waiting", func() bool { return p.svc.Stats().Waiting == 1 })
		p.loop.do(func() { p.s.CancelWaits(ErrClosed) })
		if r := wait(t, ch, "cancelled"); !errors.Is(r.err, ErrClosed) {
			t.Fatalf("cancelled wait: %v; want ErrClosed", r.err)
		}
		holder.mustRelease(h, 0)
	}
}

// An in-process hold whose ttl ran out is lost: Lost says so, on_lost runs
// and release reports it — one source of truth.
func TestSessionInProcessTTLRunsOut(t *testing.T) {
	clock := testclock.New()
	p := newProc(t, NewMemory(clock.Now), clock)
	l := p.lock(Spec{Name: "short", Mode: Exclusive, Scope: InProcess, Given: Given{TTL: ptr(50 * time.Millisecond)}})
	lost := make(chan string, 1)
	p.loop.do(func() { l.OnLost(func(h *Hold) { lost <- h.LostReason() }) })
	h := p.mustAcquire(l, ownerA, WaitForever)
	var isLost bool
	p.loop.do(func() { isLost = l.Lost(h.Owner()) })
	if isLost {
		t.Fatal("lost before its ttl")
	}
	clock.AdvanceStepwise(60 * time.Millisecond)
	p.loop.do(func() {})
	select {
	case why := <-lost:
		if !strings.Contains(why, "lease ran out") {
			t.Fatalf("reason %q", why)
		}
	default:
		t.Fatal("on_lost did not run when the ttl ran out")
	}
	p.loop.do(func() { isLost = l.Lost(h.Owner()) })
	if !isLost {
		t.Fatal("Lost() false after the ttl ran out")
	}
	// Another owner gets it; the old holder's release says lost, and
	// Lost() keeps saying so.
	p.mustRelease(p.mustAcquire(l, ownerB, TryOnce), 0)
	if _, err := p.release(h); !errors.Is(err, ErrLost) {
		t.Fatalf("release after the ttl: %v; want ErrLost", err)
	}
	p.loop.do(func() { isLost = l.Lost(h.Owner()) })
	if !isLost {
		t.Fatal("Lost() false after release reported lost")
	}
}

// A hold found lost gives the local gate back at once, so the other tasks
// of the process can contend again.
func TestSessionLostHoldFreesTheGate(t *testing.T) {
	mem := NewMemory(nil)
	p := newProc(t, mem, nil)
	spec := Spec{Name: "gate-lost", Mode: Exclusive, Scope: Distributed, Given: Given{ExtendInterval: ptr(20 * time.Millisecond)}}
	l := p.lock(spec)
	h := p.mustAcquire(l, ownerA, WaitForever)
	// The lease vanishes behind the watchdog's back.
	if _, err := mem.Release("gate-lost", ownerA, Exclusive, h.Token(), 0).Do(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watchdog notices", func() bool {
		var lost bool
		p.loop.do(func() { lost = l.Lost(h.Owner()) })
		return lost
	})
	rt := p.another()
	r := wait(t, rt.start(rt.lock(spec), ownerB, time.Second), "another task of the process")
	if r.err != nil {
		t.Fatalf("the gate stayed taken after the hold was lost: %v", r.err)
	}
	if _, err := p.release(h); !errors.Is(err, ErrLost) {
		t.Fatalf("release: %v", err)
	}
	rt.mustRelease(r.h, 0)
}

// Writer preference across processes: with three processes keeping
// overlapping reads, a writer from a fourth gets in while they still read.
func TestSessionWriterPreferenceAcrossProcesses(t *testing.T) {
	for name, backend := range distributedBackends(t) {
		t.Run(name, func(t *testing.T) {
			b := backend(t)
			spec := Spec{Name: "rw-pref", Scope: Distributed, Given: Given{Retry: ptr(20 * time.Millisecond)}}
			read, write := spec, spec
			read.Mode, write.Mode = Shared, Exclusive
			var stop sync.WaitGroup
			done := make(chan struct{})
			for i := range 3 {
				p := newProc(t, b, nil)
				l := p.lock(read)
				stop.Add(1)
				go func() {
					defer stop.Done()
					owner := fmt.Sprintf("node-%d:1:coroutine-r-1", i)
					for {
						select {
						case <-done:
							return
						default:
						}
						r := wait(t, p.start(l, owner, 5*time.Second), "read")
						if r.err != nil {
							continue
						}
						time.Sleep(30 * time.Millisecond) // reads overlap: some reader always holds
						p.release(r.h)
					}
				}()
			}
			time.Sleep(100 * time.Millisecond)
			w := newProc(t, b, nil)
			start := time.Now()
			r := wait(t, w.start(w.lock(write), "node-9:1:coroutine-w-1", 8*time.Second), "write")
			got := time.Since(start)
			close(done)
			if r.err == nil {
				w.mustRelease(r.h, 0)
			}
			stop.Wait()
			if r.err != nil {
				t.Fatalf("the writer did not get in while readers kept reading: %v", r.err)
			}
			t.Logf("writer waited %v", got)
		})
	}
}

// Fair locks hand over in arrival order across processes.
func TestSessionFairOrderAcrossProcesses(t *testing.T) {
	for name, backend := range distributedBackends(t) {
		t.Run(name, func(t *testing.T) {
			b := backend(t)
			spec := Spec{Name: "fair", Mode: Exclusive, Scope: Distributed, Given: Given{Fair: ptr(true), Retry: ptr(time.Hour)}}
			holder := newProc(t, b, nil)
			h := holder.mustAcquire(holder.lock(spec), ownerA, WaitForever)
			type waiter struct {
				p  *proc
				ch <-chan acquired
			}
			var ws []waiter
			for i := range 4 {
				p := newProc(t, b, nil)
				ws = append(ws, waiter{p, p.start(p.lock(spec), fmt.Sprintf("node-%d:1:coroutine-f-1", i), WaitForever)})
				waitFor(t, "queued in the backend", func() bool { return holder.info(holder.lock(spec)).Waiting == i+1 })
			}
			holder.mustRelease(h, 0)
			for i, w := range ws {
				r := wait(t, w.ch, fmt.Sprintf("fair waiter %d", i))
				if r.err != nil {
					t.Fatal(r.err)
				}
				for j, later := range ws[i+1:] {
					select {
					case o := <-later.ch:
						t.Fatalf("waiter %d got the lock before waiter %d: %+v", i+1+j, i, o)
					default:
					}
				}
				w.p.mustRelease(r.h, 0)
			}
		})
	}
}

// Mutual exclusion under contention: 8 processes × 2 runtimes do
// read-modify-write increments; none is lost.
func TestSessionMutualExclusion(t *testing.T) {
	for name, backend := range distributedBackends(t) {
		t.Run(name, func(t *testing.T) {
			b := backend(t)
			spec := Spec{Name: "counter", Mode: Exclusive, Scope: Distributed}
			var counter, inside int
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := range 8 {
				p := newProc(t, b, nil)
				for j, rt := range []*proc{p, p.another()} {
					l := rt.lock(spec)
					owner := fmt.Sprintf("node-%d:1:coroutine-%d-1", i, j)
					wg.Go(func() {
						for range 20 {
							r := wait(t, rt.start(l, owner, WaitForever), "acquire")
							if r.err != nil {
								t.Error(r.err)
								return
							}
							mu.Lock()
							inside++
							if inside != 1 {
								t.Error("two holders inside the critical section")
							}
							v := counter
							mu.Unlock()
							time.Sleep(time.Microsecond)
							mu.Lock()
							counter = v + 1
							inside--
							mu.Unlock()
							rt.mustRelease(r.h, 0)
						}
					})
				}
			}
			wg.Wait()
			if counter != 8*2*20 {
				t.Fatalf("counter = %d; want %d", counter, 8*2*20)
			}
		})
	}
}

// A Session's errors name the operation and the lock, also for connection
// failures, and never look like contention.
func TestSessionErrorsNameTheOperation(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	p := newProc(t, NewRedis(c, "p:", nil), nil)
	l := p.lock(Spec{Name: "down", Mode: Exclusive, Scope: Distributed})
	r := wait(t, p.start(l, ownerA, 5*time.Second), "acquire on a closed port")
	if r.err == nil || !strings.Contains(r.err.Error(), `lock: acquire "down": `) || errors.Is(r.err, ErrTimeout) || errors.Is(r.err, ErrStalled) {
		t.Fatalf("acquire on a closed port: %v", r.err)
	}
	// Bad options are option errors naming the option.
	var err error
	p.loop.do(func() {
		_, err = p.s.NewLock(Spec{Name: "x", Scope: Distributed, Given: Given{TTL: ptr(2 * time.Hour)}})
	})
	if oe, ok := IsOptionError(err); !ok || oe.Option != "ttl" || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "exceeds lock.max_ttl") {
		t.Fatalf("ttl above max_ttl: %v", err)
	}
	p.loop.do(func() {
		_, err = p.s.NewLock(Spec{Name: "x", Scope: Distributed, Given: Given{TTL: ptr(time.Second), ExtendInterval: ptr(time.Second)}})
	})
	if oe, ok := IsOptionError(err); !ok || oe.Option != "extend_interval" {
		t.Fatalf("interval = ttl: %v", err)
	}
	// A short custom ttl with the default interval renews three times per lease.
	var set Settings
	p.loop.do(func() {
		var l *Lock
		l, err = p.s.NewLock(Spec{Name: "x", Scope: Distributed, Given: Given{TTL: ptr(3 * time.Second)}})
		set = l.Settings()
	})
	if err != nil || set.ExtendInterval != time.Second || !set.AutoExtend {
		t.Fatalf("settings %+v, %v", set, err)
	}
}

func TestParseOwner(t *testing.T) {
	for s, want := range map[string]Owner{
		"node-1:12345:coroutine-ab12-7": {NodeID: "node-1", ServiceID: 12345, Thread: "coroutine-ab12-7"},
		"eu:west:3:main-ff00":           {NodeID: "eu:west", ServiceID: 3, Thread: "main-ff00"},
		"a:b:c:0:t":                     {NodeID: "a:b:c", ServiceID: 0, Thread: "t"},
		":5:t":                          {NodeID: "", ServiceID: 5, Thread: "t"},
	} {
		o, ok := ParseOwner(s)
		if !ok || o.NodeID != want.NodeID || o.ServiceID != want.ServiceID || o.Thread != want.Thread || o.String() != s {
			t.Fatalf("ParseOwner(%q) = %+v, %v; want %+v", s, o, ok, want)
		}
		want.s = ""
		if want.String() != s {
			t.Fatalf("%+v.String() = %q; want %q", want, want.String(), s)
		}
	}
	for _, s := range []string{"A", "x:y", "node:notanumber:t"} {
		if o, ok := ParseOwner(s); ok || o.NodeID != s || o.String() != s {
			t.Fatalf("ParseOwner(%q) = %+v, %v; want not ok, kept whole", s, o, ok)
		}
	}
}

// An in-process lock's grant can reach its waiter's loop later than it was
// made (the loop was busy). The hold's lease ends when the lock's does, not
// a ttl after the loop saw the grant: Lost() must say so as soon as the lock
// has expired and another task could take it (it said false for as long as
// the grant had waited).
func TestSessionLateLocalGrantLeaseEndsWithTheLock(t *testing.T) {
	clock := testclock.New()
	p := newProc(t, nil, clock)
	spec := Spec{Name: "late", Mode: Exclusive, Scope: InProcess,
		Given: Given{TTL: ptr(time.Second), AutoExtend: ptr(false)}}
	l := p.lock(spec)
	a := p.mustAcquire(l, ownerA, WaitForever)
	chB := p.start(l, ownerB, WaitForever)
	p.loop.flush()
	// A's release grants the lock to B now; B's loop learns of it only
	// after another half second.
	p.loop.do(func() {
		a.Release(func(int, error) {})
		clock.AdvanceStepwise(500 * time.Millisecond)
	})
	b := wait(t, chB, "acquire by B")
	if b.err != nil {
		t.Fatal(b.err)
	}
	clock.AdvanceStepwise(600 * time.Millisecond) // past the lock's expiry
	var lost bool
	p.loop.do(func() { lost = l.Lost(b.h.Owner()) })
	if !lost {
		t.Fatal("Lost() is false after the lock's own lease ran out")
	}
	if r := wait(t, p.start(l, ownerC, TryOnce), "try by C"); r.err != nil {
		t.Fatalf("the lock had not expired: %v", r.err)
	}
}

// With Redlock, both sides of a distributed read-write lock stay on the
// single Redis (Dist): a writer on the Redlock nodes and a reader on Dist
// in another process held the lock at once.
func TestRedlockLeavesBothSidesOfARWLockOnOneBackend(t *testing.T) {
	dist := NewMemory(nil)
	newRedlockProc := func() *proc {
		buf := &syncBuffer{}
		svc := NewService(ServiceConfig{Local: local.NewManager(time.Now), Dist: dist, Defaults: testDefaults,
			Redlock: NewRedlock([]Backend{NewMemory(nil), NewMemory(nil), NewMemory(nil)}, 2), Clock: sysclock.Real,
			Log: slog.New(slog.NewTextHandler(buf, nil))})
		return newSession(t, svc, buf)
	}
	writerProc, readerProc := newRedlockProc(), newRedlockProc()
	side := func(p *proc, mode Mode) *Lock {
		return p.lock(Spec{Name: "rw", Mode: mode, Scope: Distributed, ReadWrite: true})
	}
	w := writerProc.mustAcquire(side(writerProc, Exclusive), ownerA, TryOnce)
	if r := wait(t, readerProc.start(side(readerProc, Shared), ownerB, TryOnce), "read try"); r.err == nil {
		t.Fatalf("a reader in another process got the read side while the writer held the write side")
	}
	writerProc.mustRelease(w, 0)
	rd := readerProc.mustAcquire(side(readerProc, Shared), ownerB, TryOnce)
	if r := wait(t, writerProc.start(side(writerProc, Exclusive), ownerA, TryOnce), "write try"); r.err == nil {
		t.Fatalf("a writer in another process got the write side while a reader held the read side")
	}
	readerProc.mustRelease(rd, 0)
	// A plain distributed mutex still goes to the Redlock nodes.
	if m := writerProc.lock(Spec{Name: "m", Mode: Exclusive, Scope: Distributed}); m.be != writerProc.svc.redlock {
		t.Fatalf("a distributed mutex is not on Redlock")
	}
}

// The in-process fast path (TryNow, ReleaseNow) finds holds through the
// lock object and reuses recycled hold records: a hold found through one
// object is never answered for another owner, or after it ended, by
// another object of the same name; a live hold is never recycled.
func TestSessionRecycledHoldsKeepTheirMeaning(t *testing.T) {
	p := newProc(t, nil, nil)
	l := p.lock(Spec{Name: "recycle", Mode: Exclusive, Scope: InProcess})
	other := p.lock(Spec{Name: "recycle", Mode: Exclusive, Scope: InProcess})
	a, _ := ParseOwner(ownerA)
	b, _ := ParseOwner(ownerB)
	p.loop.do(func() {
		try := func(lk *Lock, o Owner) *Hold {
			h, ok, err := lk.TryNow(o)
			if !ok || err != nil {
				t.Fatalf("TryNow(%s) on %p: %v, %v", o, lk, ok, err)
			}
			return h
		}
		release := func(h *Hold, want int) {
			if n, err, ok := h.ReleaseNow(); !ok || err != nil || n != want {
				t.Fatalf("ReleaseNow: %d, %v, %v; want %d", n, err, ok, want)
			}
		}
		h1 := try(l, a)
		if other.Hold(a) != h1 || try(other, a) != h1 || h1.Count() != 2 {
			t.Fatalf("a re-entry through another object: count %d", h1.Count())
		}
		h1.Recycle() // live: left alone
		if _, ok, _ := l.TryNow(b); ok {
			t.Fatal("another owner took a held lock")
		}
		release(h1, 1)
		release(h1, 0)
		h1.Recycle()
		if l.Hold(a) != nil || other.Hold(a) != nil || l.Lost(a) {
			t.Fatal("an ended hold is still found")
		}
		h2 := try(l, b)
		if h2 != h1 {
			t.Fatal("the recycled record was not reused")
		}
		if h2.Owner().String() != ownerB || h2.Count() != 1 || h2.Released() {
			t.Fatalf("new hold: owner %s count %d released %v", h2.Owner(), h2.Count(), h2.Released())
		}
		if l.Hold(a) != nil || other.Hold(a) != nil || other.Hold(b) != h2 || l.Hold(b) != h2 {
			t.Fatal("holds found for the wrong owner")
		}
		if _, ok, _ := other.TryNow(a); ok {
			t.Fatal("owner a took the lock b holds")
		}
		if st := p.svc.Stats(); st.Holds != 1 {
			t.Fatalf("stats %+v; want 1 hold", st)
		}
		release(h2, 0)
		h2.Recycle()
		if holds, waits := p.s.Active(); holds != 0 || waits != 0 {
			t.Fatalf("%d holds and %d waits left", holds, waits)
		}
		// A hold that had a lease is not reused: a tick of its timer
		// may still be on its way to the loop.
		leased := p.s
		ll, err := leased.NewLock(Spec{Name: "recycle-ttl", Mode: Exclusive, Scope: InProcess, Given: Given{TTL: ptr(time.Minute)}})
		if err != nil {
			t.Fatal(err)
		}
		h3 := try(ll, a)
		release(h3, 0)
		h3.Recycle()
		if h4 := try(ll, a); h4 == h3 || !h3.Released() {
			t.Fatal("a hold with a lease was reused")
		}
	})
}
