package bindings

import (
	"sort"

	"github.com/shieldrt/shieldglobal/core/rank"
)

// Opened returns the boards this process opened (through any runtime),
// sorted by name, for the ops console.
func (r *Ranks) Opened() []rank.Board {
	r.mu.Lock()
	out := make([]rank.Board, 0, len(r.opened))
	for _, b := range r.opened {
		out = append(out, b)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Board returns the board name if this process opened it.
func (r *Ranks) Board(name string) (rank.Board, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.opened[name]
	return b, ok
}
