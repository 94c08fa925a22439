package rank

import (
	"sync"
	"unsafe"
)

// The memory board keeps its members, leaves and index in pointer-free
// arrays (slab.go, index.go): the collector neither scans nor marks
// what is inside them, so a board of millions of members (with uids of up
// to 48 bytes) adds next to nothing to a GC cycle and the host's
// allocations stay cheap. Arrays of hugeBytes
// or more come from regions mapped outside the Go heap and advised to
// use transparent huge pages where the OS has them (region_linux.go):
// at a million members the entries span about a hundred megabytes, and a
// lookup's cache misses cost less when they do not miss the TLB
// as well (measured: 180 against 280 ns a miss in one hour on a 2-vCPU
// VM, no difference in another, when the host seemed to back them with
// small pages). Smaller arrays come from the Go heap (pointer-free, so
// never scanned either), so a small board costs no more than its entries.

const hugeBytes = 2 << 20 // a huge page on amd64 and arm64

// regions owns the mapped arrays of one tree. The board's lock orders
// grab and drop; mu orders them with a release from a cleanup.
type regions struct {
	mu     sync.Mutex
	mapped map[unsafe.Pointer][]byte
}

// grab returns n zero values of T, which must hold no pointers.
func grab[T any](rs *regions, n int) []T {
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	if size < hugeBytes {
		return make([]T, n)
	}
	b := mapRegion(size)
	if b == nil {
		return make([]T, n)
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	rs.mu.Lock()
	if rs.mapped == nil {
		rs.mapped = make(map[unsafe.Pointer][]byte)
	}
	rs.mapped[p] = b
	rs.mu.Unlock()
	return unsafe.Slice((*T)(p), n)
}

// drop gives back an array from grab; s must not be used after.
func drop[T any](rs *regions, s []T) {
	if len(s) == 0 {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(s))
	rs.mu.Lock()
	b, ok := rs.mapped[p]
	delete(rs.mapped, p)
	rs.mu.Unlock()
	if ok {
		unmapRegion(b)
	}
}

// release gives back every mapped array; none may be used after.
func (rs *regions) release() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for p, b := range rs.mapped {
		delete(rs.mapped, p)
		unmapRegion(b)
	}
}

// count returns the number of mapped arrays.
func (rs *regions) count() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.mapped)
}
