package queue

import (
	"context"
	"slices"
	"strings"

	"github.com/shieldrt/shieldglobal/core/store"
)

// memReliable is a memory reliable queue: a stream with one group.
type memReliable struct {
	*memReceiver
}

func (q *memReliable) Name() string { return q.s.name }

func (q *memReliable) Push(body []byte) *store.Op[string] {
	op := q.s.push("push", [][]byte{body})
	return store.Local(func() (string, error) {
		ids, err := op.Do(context.Background())
		if err != nil {
			return "", err
		}
		return ids[0], nil
	})
}

func (q *memReliable) PushBatch(bodies [][]byte) *store.Op[[]string] {
	return q.s.push("push_batch", bodies)
}

func (q *memReliable) Length() *store.Op[int64] {
	return store.Local(func() (int64, error) {
		q.s.mu.Lock()
		defer q.s.mu.Unlock()
		return int64(q.s.live), nil
	})
}

func (q *memReliable) Purge() *store.Op[int64] {
	return store.Local(func() (int64, error) {
		s := q.s
		s.mu.Lock()
		defer s.mu.Unlock()
		n := int64(s.live)
		s.entries, s.live, s.dead = nil, 0, 0
		if g := s.groups[reliableGroup]; g != nil {
			g.pending = map[string]*memPending{}
			g.visibility, g.retries = nil, nil
		}
		return n, nil
	})
}

func (q *memReliable) Stats() *store.Op[Stats] {
	return store.Local(func() (Stats, error) {
		s := q.s
		s.mu.Lock()
		defer s.mu.Unlock()
		st := s.group(reliableGroup, true).stats(s.now())
		st.Name, st.Kind = s.name, KindReliable
		st.Length = int64(s.live)
		st.DeadLetters = int64(len(s.letters))
		st.DeadDropped += s.lettersDropped
		return st, nil
	})
}

func (q *memReliable) DeadLetters() DeadLetters { return &memDeadLetters{s: q.s} }

// memBroadcast is a memory broadcast queue.
type memBroadcast struct {
	s *memStream
}

func (q *memBroadcast) Name() string { return q.s.name }

func (q *memBroadcast) Push(body []byte) *store.Op[string] {
	op := q.s.push("push", [][]byte{body})
	return store.Local(func() (string, error) {
		ids, err := op.Do(context.Background())
		if err != nil {
			return "", err
		}
		return ids[0], nil
	})
}

func (q *memBroadcast) Group(name string) (Group, error) {
	if err := checkName("group", name); err != nil {
		return nil, err
	}
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	if q.s.closed {
		return nil, opErr("group", q.s.name, ErrClosed)
	}
	return &memGroupView{q.s.receiver(name)}, nil
}

func (q *memBroadcast) Subscribe(ctx context.Context, group string, o ConsumeOptions, h Handler) (StopFunc, error) {
	return subscribe(ctx, q, group, o, h)
}

func (q *memBroadcast) RemoveGroup(name string) *store.Op[bool] {
	return store.Local(func() (bool, error) {
		s := q.s
		s.mu.Lock()
		defer s.mu.Unlock()
		g := s.groups[name]
		if g == nil {
			return false, nil
		}
		delete(s.groups, name)
		if g.stopTmr != nil {
			g.stopTmr()
		}
		if g.waits.len() > 0 {
			// Its consumers still wait: as on Redis, their next pop
			// re-creates the group, at the end of the stream.
			ng := s.group(name, true)
			ng.waits = g.waits
		}
		return true, nil
	})
}

func (q *memBroadcast) Length() *store.Op[int64] {
	return store.Local(func() (int64, error) {
		q.s.mu.Lock()
		defer q.s.mu.Unlock()
		return int64(q.s.live), nil
	})
}

func (q *memBroadcast) Stats() *store.Op[Stats] {
	return store.Local(func() (Stats, error) {
		s := q.s
		s.mu.Lock()
		defer s.mu.Unlock()
		now := s.now()
		st := Stats{Name: s.name, Kind: KindBroadcast, Length: int64(s.live), Trimmed: s.trimmed,
			DeadLetters: int64(len(s.letters)), DeadDropped: s.lettersDropped}
		for _, g := range s.groups {
			gst := g.stats(now)
			st.Groups = append(st.Groups, gst)
			sumGroup(&st, gst)
		}
		sortGroups(st.Groups)
		return st, nil
	})
}

func (q *memBroadcast) DeadLetters() DeadLetters { return &memDeadLetters{s: q.s} }

// memGroupView is a broadcast group's public face.
type memGroupView struct {
	*memReceiver
}

func (g *memGroupView) Name() string { return g.group }

func (g *memGroupView) Join() *store.Op[struct{}] {
	return store.Local(func() (struct{}, error) {
		g.s.mu.Lock()
		defer g.s.mu.Unlock()
		if g.s.closed {
			return struct{}{}, opErr("join", g.label(), ErrClosed)
		}
		g.s.group(g.group, true)
		return struct{}{}, nil
	})
}

func (g *memGroupView) Stats() *store.Op[Stats] {
	return store.Local(func() (Stats, error) {
		g.s.mu.Lock()
		defer g.s.mu.Unlock()
		grp := g.s.groups[g.group]
		if grp == nil {
			return Stats{Name: g.group, Kind: KindBroadcast}, nil
		}
		return grp.stats(g.s.now()), nil
	})
}

// memDeadLetters are a memory stream's dead letters.
type memDeadLetters struct {
	s *memStream
}

func (l *memDeadLetters) Range(start, count int) *store.Op[[]DeadLetter] {
	if start < 0 || count < 0 {
		return store.Failed[[]DeadLetter](invalid("dead_letter range", l.s.name, "start %d and count %d must be >= 0", start, count))
	}
	return store.Local(func() ([]DeadLetter, error) {
		s := l.s
		s.mu.Lock()
		defer s.mu.Unlock()
		s.trimLetters(s.now(), 0)
		if start >= len(s.letters) {
			return []DeadLetter{}, nil
		}
		end := min(start+count, len(s.letters))
		out := make([]DeadLetter, end-start)
		copy(out, s.letters[start:end])
		return out, nil
	})
}

func (l *memDeadLetters) Length() *store.Op[int64] {
	return store.Local(func() (int64, error) {
		s := l.s
		s.mu.Lock()
		defer s.mu.Unlock()
		s.trimLetters(s.now(), 0)
		return int64(len(s.letters)), nil
	})
}

// requeue moves letters[i] back (caller holds mu); false when full.
func (s *memStream) requeue(i int) bool {
	if s.kind == KindReliable && s.live >= s.o.MaxLength {
		return false
	}
	dl := s.letters[i]
	if s.kind == KindBroadcast {
		s.trim(1)
	}
	s.add([][]byte{dl.Body}, dl.Group)
	s.letters = append(s.letters[:i], s.letters[i+1:]...)
	return true
}

func (l *memDeadLetters) Requeue(id string) *store.Op[struct{}] {
	return store.Local(func() (struct{}, error) {
		s := l.s
		s.mu.Lock()
		s.trimLetters(s.now(), 0)
		i := -1
		for j, dl := range s.letters {
			if dl.ID == id {
				i = j
				break
			}
		}
		if i < 0 {
			s.mu.Unlock()
			return struct{}{}, opErr("dead_letter requeue", s.name, ErrNotFound)
		}
		if !s.requeue(i) {
			s.mu.Unlock()
			return struct{}{}, opErr("dead_letter requeue", s.name, ErrFull)
		}
		gs := s.serveAll()
		s.mu.Unlock()
		callAll(gs)
		return struct{}{}, nil
	})
}

func (l *memDeadLetters) RequeueAll() *store.Op[int] {
	return store.Local(func() (int, error) {
		s := l.s
		s.mu.Lock()
		s.trimLetters(s.now(), 0)
		n := 0
		for len(s.letters) > 0 && s.requeue(0) {
			n++
		}
		full := len(s.letters) > 0
		gs := s.serveAll()
		s.mu.Unlock()
		callAll(gs)
		if full {
			return n, opErr("dead_letter requeue_all", s.name, ErrFull)
		}
		return n, nil
	})
}

func (l *memDeadLetters) Purge() *store.Op[int64] {
	return store.Local(func() (int64, error) {
		s := l.s
		s.mu.Lock()
		defer s.mu.Unlock()
		n := int64(len(s.letters))
		s.letters = nil
		return n, nil
	})
}

func (l *memDeadLetters) Delete(ids ...string) *store.Op[int64] {
	if err := checkDeadIDs(l.s.name, ids); err != nil {
		return store.Failed[int64](err)
	}
	return store.Local(func() (int64, error) {
		s := l.s
		s.mu.Lock()
		defer s.mu.Unlock()
		n := len(s.letters)
		s.letters = slices.DeleteFunc(s.letters, func(dl DeadLetter) bool { return slices.Contains(ids, dl.ID) })
		return int64(n - len(s.letters)), nil
	})
}

// checkDeadIDs validates the ids of DeadLetters.Delete.
func checkDeadIDs(name string, ids []string) error {
	if len(ids) == 0 {
		return invalid("dead_letter delete", name, "no ids")
	}
	if slices.Contains(ids, "") {
		return invalid("dead_letter delete", name, "empty id")
	}
	return nil
}

// subscribe is Broadcast.Subscribe on any backend.
func subscribe(ctx context.Context, q Broadcast, group string, o ConsumeOptions, h Handler) (StopFunc, error) {
	g, err := q.Group(group)
	if err != nil {
		return nil, err
	}
	if _, err := g.Join().Do(ctx); err != nil {
		return nil, err
	}
	return g.Consume(o, h)
}

// sumGroup adds a group's figures to a broadcast queue's.
func sumGroup(st *Stats, g Stats) {
	st.InFlight += g.InFlight
	st.Retrying += g.Retrying
	st.Consumers = max(st.Consumers, g.Consumers)
	st.Expired += g.Expired
	st.Reclaimed += g.Reclaimed
	st.Nacked += g.Nacked
	st.DeadLettered += g.DeadLettered
	st.DeadDropped += g.DeadDropped
}

// sortGroups orders group stats by name.
func sortGroups(gs []Stats) {
	slices.SortFunc(gs, func(a, b Stats) int { return strings.Compare(a.Name, b.Name) })
}
