package rank

import "math/bits"

// slab holds pointer-free values of T by uint32 id in chunks that double
// in size (base values, then base, 2·base, 4·base, ...): a value never
// moves, so a *T stays valid while the slab grows, and a board's memory
// grows with its members without a copy. Freed ids are handed out again.
type slab[T any] struct {
	shift  uint // log2(base)
	chunks [][]T
	next   uint32   // ids below next have been handed out
	free   []uint32 // freed ids
}

func newSlab[T any](shift uint) slab[T] { return slab[T]{shift: shift} }

// at returns the value of id (handed out, not freed).
func (s *slab[T]) at(id uint32) *T {
	c := bits.Len32(id >> s.shift)
	off := id
	if c > 0 {
		off -= 1 << (s.shift + uint(c) - 1)
	}
	return &s.chunks[c][off]
}

// alloc returns a free id, its value zeroed.
func (s *slab[T]) alloc(rs *regions) uint32 {
	if n := len(s.free); n > 0 {
		id := s.free[n-1]
		s.free = s.free[:n-1]
		var zero T
		*s.at(id) = zero
		return id
	}
	id := s.next
	if id == maxID {
		panic("rank: a board holds at most 2^32-1 members")
	}
	if c := bits.Len32(id >> s.shift); c == len(s.chunks) {
		size := 1 << s.shift
		if c > 0 {
			size = 1 << (s.shift + uint(c) - 1)
		}
		s.chunks = append(s.chunks, grab[T](rs, size))
	}
	s.next++
	return id
}

// maxID is never handed out: the index stores id+1 in 32 bits.
const maxID = ^uint32(0)

// release frees id for reuse.
func (s *slab[T]) release(id uint32) { s.free = append(s.free, id) }
