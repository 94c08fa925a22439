package rank

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapRegion maps size bytes (rounded up to huge pages) of zeroed memory
// aligned to a huge page and advises huge pages for it; nil when the OS
// refuses (the caller then uses the Go heap).
func mapRegion(size int) []byte {
	size = (size + hugeBytes - 1) &^ (hugeBytes - 1)
	span := uintptr(size + hugeBytes)
	p, err := unix.MmapPtr(-1, 0, nil, span, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	// Trim to an aligned window: huge pages back only aligned ranges.
	head := uintptr(-int(uintptr(p)) & (hugeBytes - 1))
	start := unsafe.Add(p, head)
	if head > 0 {
		_ = unix.MunmapPtr(p, head)
	}
	if tail := span - head - uintptr(size); tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(start, size), tail)
	}
	b := unsafe.Slice((*byte)(start), size)
	// A hint: without huge pages (THP off) the board only runs slower.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	return b
}

func unmapRegion(b []byte) { _ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b))) }
