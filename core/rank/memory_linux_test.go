package rank

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"
)

// A large board's arrays live outside the Go heap; clearing the board
// gives them back at once, and a tree nobody holds gives them back when
// it is collected.
func TestMappedMemoryIsGivenBack(t *testing.T) {
	m := NewMemory(nil)
	bd, _ := bigBoard(t, m)
	rs := m.boards["big"].list.mem
	if rs.count() == 0 {
		t.Fatal("a board of 100 000 members mapped no region")
	}
	do(t, bd.Clear())
	if rs.count() != 0 {
		t.Fatalf("Clear kept %d mapped regions", rs.count())
	}
	if n := do(t, bd.Count()); n != 0 {
		t.Fatalf("Count after Clear = %d", n)
	}

	tr := newTree(false)
	for i := range 100_000 {
		tr.add(string(binary.BigEndian.AppendUint32(nil, uint32(i))), key{float64(i), uint64(i)})
	}
	rs = tr.mem
	if rs.count() == 0 {
		t.Fatal("a tree of 100 000 members mapped no region")
	}
	tr = nil
	deadline := time.Now().Add(10 * time.Second)
	for rs.count() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("an unreachable tree kept its mapped regions")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// A board emptied by Remove keeps its peak memory until Clear or a reset,
// which give it back even though the board is empty.
func TestClearOfAnEmptiedBoardGivesItsMemoryBack(t *testing.T) {
	bd, scores := bigBoard(t, NewMemory(nil))
	if mappedBytes(bd) == 0 {
		t.Fatal("a board of 100 000 members mapped nothing")
	}
	for uid := range scores {
		do(t, bd.Remove(uid))
	}
	do(t, bd.Clear())
	if n := mappedBytes(bd); n != 0 {
		t.Errorf("an emptied board still maps %d bytes after Clear", n)
	}
	do(t, bd.MUpdate(scores))
	for uid := range scores {
		do(t, bd.Remove(uid))
	}
	do(t, bd.ArchiveAndClear("20250101", 1, time.Second))
	if n := mappedBytes(bd); n != 0 {
		t.Errorf("an emptied board still maps %d bytes after a reset", n)
	}
}

// bigBoard fills m's board "big" with 100 000 members (enough for mapped
// arrays) and returns it with their scores.
func bigBoard(t *testing.T, m *Memory) (Board, map[string]float64) {
	t.Helper()
	bd := board(t, m, "big", Options{})
	scores := map[string]float64{}
	for i := range 100_000 {
		scores[string(binary.BigEndian.AppendUint32(nil, uint32(i)))] = float64(i % 1000)
	}
	do(t, bd.MUpdate(scores))
	return bd, scores
}
