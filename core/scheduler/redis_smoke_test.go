package scheduler

import (
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/internal/testredis"
)

func TestSmokeRedis(t *testing.T) {
	for name, c := range testredis.Backends(t) {
		t.Run(name, func(t *testing.T) {
			st := NewRedis(c, testredis.Prefix(t), RedisOptions{})
			defer st.Close()
			rec := newRecorder()
			var es []*Engine
			for i := range 3 {
				e, err := New(Config{Store: st, Clock: offsetClock{time.Duration(i-1) * time.Second}})
				if err != nil {
					t.Fatal(err)
				}
				es = append(es, e)
				o := e.DefaultOptions()
				o.Distributed = true
				every, err := Every(100 * time.Millisecond)
				do(t, e.Register(Task{Name: "hb", Schedule: mustSchedule(t, every, err), Options: o, Run: rec.run}))
			}
			time.Sleep(1 * time.Second)
			for _, e := range es {
				closeEngine(t, e)
			}
			seen := map[int64]int{}
			var lat []time.Duration
			for _, f := range rec.got() {
				seen[f.Scheduled.UnixMilli()]++
				_ = lat
			}
			t.Logf("runs %d distinct %d", len(rec.got()), len(seen))
			for k, v := range seen {
				if v != 1 {
					t.Errorf("fire %d ran %d times", k, v)
				}
			}
		})
	}
}
