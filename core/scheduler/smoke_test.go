package scheduler

import (
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testclock"
)

func TestSmokeLocal(t *testing.T) {
	clk := testclock.New()
	e, err := New(Config{Clock: fakeClock{c: clk}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeEngine(t, e)
	rec := newRecorder()
	every, err := Every(100 * time.Millisecond)
	do(t, e.Register(Task{Name: "hb", Schedule: mustSchedule(t, every, err), Options: e.DefaultOptions(), Run: rec.run}))
	for range 10 {
		clk.Advance(100 * time.Millisecond)
		settle(t, e)
	}
	if n := len(rec.got()); n != 10 {
		t.Fatalf("fired %d times, want 10", n)
	}
	info := do(t, e.Get("hb"))
	t.Logf("%+v", info)
}

func TestSmokeDistributed(t *testing.T) {
	clk := testclock.New()
	st := NewMemory(clk.Now)
	var es []*Engine
	rec := newRecorder()
	for i := range 3 {
		e, err := New(Config{Clock: fakeClock{c: clk, offset: time.Duration(i-1) * time.Second}, Store: st})
		if err != nil {
			t.Fatal(err)
		}
		defer closeEngine(t, e)
		es = append(es, e)
		o := e.DefaultOptions()
		o.Distributed = true
		every, err := Every(100 * time.Millisecond)
		do(t, e.Register(Task{Name: "hb", Schedule: mustSchedule(t, every, err), Options: o, Run: rec.run}))
	}
	for range 50 {
		clk.Advance(10 * time.Millisecond)
		for _, e := range es {
			settle(t, e)
		}
	}
	got := rec.got()
	seen := map[int64]int{}
	for _, f := range got {
		seen[f.Scheduled.UnixMilli()]++
	}
	t.Logf("runs %d distinct %d", len(got), len(seen))
	for k, v := range seen {
		if v != 1 {
			t.Errorf("fire %d ran %d times", k, v)
		}
	}
	info := do(t, es[0].Get("hb"))
	t.Logf("%+v", info)
}
