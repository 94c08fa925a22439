package rank

import "hash/maphash"

// index maps uids to member ids: open addressing with linear probing in a
// power-of-two table at most half full, each slot the uid's 32-bit hash
// and its id + 1 (0 is an empty slot). A removal shifts the slots after
// it back, so there are no tombstones. At a million members the table is
// 16 MB and a lookup reads one slot (rarely two) and then the member.
type index struct {
	seed  maphash.Seed
	slots []uint64
	n     int
}

const indexMinSlots = 16

func newIndex(rs *regions) index {
	return index{seed: maphash.MakeSeed(), slots: grab[uint64](rs, indexMinSlots)}
}

func (x *index) hash(uid string) uint32 { return uint32(maphash.String(x.seed, uid)) }

func slotOf(h, id uint32) uint64 { return uint64(h)<<32 | uint64(id+1) }

// add records id under hash h (the uid is not in the index).
func (x *index) add(rs *regions, h, id uint32) {
	if 2*(x.n+1) > len(x.slots) {
		x.grow(rs)
	}
	x.put(slotOf(h, id))
	x.n++
}

func (x *index) put(s uint64) {
	mask := uint32(len(x.slots) - 1)
	i := uint32(s>>32) & mask
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = s
}

// grow doubles the table: one pass over the old slots, which hold the
// hashes (the members are not read).
func (x *index) grow(rs *regions) {
	old := x.slots
	x.slots = grab[uint64](rs, 2*len(old))
	for _, s := range old {
		if s != 0 {
			x.put(s)
		}
	}
	drop(rs, old)
}

// remove takes id (of hash h) out.
func (x *index) remove(h, id uint32) {
	mask := uint32(len(x.slots) - 1)
	want := slotOf(h, id)
	i := h & mask
	for x.slots[i] != want {
		i = (i + 1) & mask
	}
	// Shift back each later slot of the run that may live at i: one whose
	// home is not cyclically within (i, j].
	for j := (i + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		home := uint32(x.slots[j]>>32) & mask
		if (j-home)&mask >= (j-i)&mask {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = 0
	x.n--
}
