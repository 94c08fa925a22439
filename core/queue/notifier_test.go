package queue

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeSource is a pop/unpop pair over an in-memory slice, whose pops can be
// held until the test releases them.
type fakeSource struct {
	mu       sync.Mutex
	items    []string
	unpopped []string
	hold     chan struct{} // when set, each pop waits for a receive... until closed
	popping  chan struct{}
	fail     error
}

func (f *fakeSource) pop(ctx context.Context, n int, wait bool) (popResult[string], error) {
	f.mu.Lock()
	hold, popping, fail := f.hold, f.popping, f.fail
	f.mu.Unlock()
	if popping != nil {
		select {
		case popping <- struct{}{}:
		default:
		}
	}
	if hold != nil {
		<-hold
	}
	if fail != nil {
		return popResult[string]{}, fail
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := min(n, len(f.items))
	res := popResult[string]{items: slices.Clone(f.items[:k]), serverNow: time.Now().UnixMilli(), next: -1}
	f.items = f.items[k:]
	return res, nil
}

func (f *fakeSource) unpop(ctx context.Context, items []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unpopped = append(f.unpopped, items...)
	f.items = append(slices.Clone(items), f.items...)
	return nil
}

func newTestNotifier(f *fakeSource, recheck time.Duration) (*notifier[string], *sync.WaitGroup) {
	var wg sync.WaitGroup
	t := fastTiming()
	t.popTimeout = time.Second
	return newNotifier("test", nil, "", t, recheck, &wg, f.pop, f.unpop), &wg
}

func TestNotifierGivesBackWhatAGoneWaiterMissed(t *testing.T) {
	f := &fakeSource{hold: make(chan struct{}), popping: make(chan struct{}, 1)}
	n, wg := newTestNotifier(f, time.Hour)
	defer func() { n.close(); wg.Wait() }()

	ch, cancel := popWait[string](n, time.Minute)
	await(t, f.popping) // the pop for this waiter is in flight
	f.mu.Lock()
	f.items = []string{"m1"}
	f.mu.Unlock()
	if !cancel() {
		t.Fatal("cancel of a waiting waiter returned false")
	}
	close(f.hold) // the pop returns m1, for nobody
	f.mu.Lock()
	f.hold = nil
	f.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		back := slices.Clone(f.unpopped)
		f.mu.Unlock()
		if slices.Equal(back, []string{"m1"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("m1 not put back: %v", back)
		}
		time.Sleep(5 * time.Millisecond)
	}
	quiet(t, ch, 20*time.Millisecond)

	// The next waiter gets it.
	ch2, _ := popWait[string](n, time.Minute)
	if r := await(t, ch2); r.err != nil || r.v != "m1" {
		t.Fatalf("next waiter got %q %v", r.v, r.err)
	}
}

func TestNotifierRechecksWithoutNotifications(t *testing.T) {
	f := &fakeSource{}
	n, wg := newTestNotifier(f, 20*time.Millisecond)
	defer func() { n.close(); wg.Wait() }()
	ch, _ := popWait[string](n, time.Minute)
	quiet(t, ch, 30*time.Millisecond)
	f.mu.Lock()
	f.items = []string{"late"} // arrives with no notification at all
	f.mu.Unlock()
	if r := await(t, ch); r.v != "late" {
		t.Fatalf("got %q %v", r.v, r.err)
	}
}

func TestNotifierReportsTheFailureAtTheDeadline(t *testing.T) {
	boom := errors.New("connection refused")
	f := &fakeSource{fail: boom}
	n, wg := newTestNotifier(f, 10*time.Millisecond)
	defer func() { n.close(); wg.Wait() }()
	ch, _ := popWait[string](n, 100*time.Millisecond)
	r := await(t, ch)
	if !errors.Is(r.err, boom) {
		t.Fatalf("got %v, want the pop failure", r.err)
	}
	// Recovery: the next waiter gets messages once pops work again.
	f.mu.Lock()
	f.fail = nil
	f.items = []string{"ok"}
	f.mu.Unlock()
	ch2, _ := popWait[string](n, time.Minute)
	if r := await(t, ch2); r.v != "ok" {
		t.Fatalf("got %q %v", r.v, r.err)
	}
}

func TestNotifierServesWaitersInOrderAndClose(t *testing.T) {
	f := &fakeSource{}
	n, wg := newTestNotifier(f, 10*time.Millisecond)
	var chans []<-chan result[string]
	for i := 0; i < 5; i++ {
		ch, _ := popWait[string](n, time.Minute)
		chans = append(chans, ch)
	}
	f.mu.Lock()
	f.items = []string{"0", "1", "2"}
	f.mu.Unlock()
	for i := 0; i < 3; i++ {
		if r := await(t, chans[i]); r.v != string(rune('0'+i)) {
			t.Fatalf("waiter %d got %q", i, r.v)
		}
	}
	n.close()
	for _, ch := range chans[3:] {
		if r := await(t, ch); !errors.Is(r.err, ErrClosed) {
			t.Fatalf("after close: %v", r.err)
		}
	}
	wg.Wait()
	ch, _ := popWait[string](n, time.Minute)
	if r := await(t, ch); !errors.Is(r.err, ErrClosed) {
		t.Fatalf("wait after close: %v", r.err)
	}
}
