package bindings

import (
	"sync"

	"github.com/shieldrt/shieldglobal/core/rank"
)

// Periodic leaderboard resets live in core/rank (rank.Resets): this file
// only wires the Module's rank config into them.

// RankScheduler is what periodic resets need from the scheduler
// (rank.ResetScheduler).
type RankScheduler = rank.ResetScheduler

// EngineResets is the RankScheduler on a scheduler Engine
// (rank.EngineResets).
type EngineResets = rank.EngineResets

// rankResets holds the process's rank.Resets, built from the Ranks fields
// at the first reset declared.
type rankResets struct {
	once sync.Once
	r    *rank.Resets
}

func (r *Ranks) resetsOf() *rank.Resets {
	r.resets.once.Do(func() {
		r.resets.r = &rank.Resets{Scheduler: r.Scheduler, ArchiveTTL: r.ArchiveTTL, Log: r.log()}
	})
	return r.resets.r
}
