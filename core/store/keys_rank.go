package store

// Leaderboard keys. Every key of board <name> carries the hash tag {<name>},
// so each board's scripts run in one Redis Cluster slot; docs/keys.md and
// package core/rank describe their contents.

// Rank is the sorted set of a leaderboard: score = the member's score,
// member = the tie key (see core/rank): <prefix>rank:{name}.
func (k Keys) Rank(name string) string { return k.Prefix + "rank:{" + name + "}" }

// RankMembers is the hash uid -> sorted-set member of a leaderboard that
// orders ties by reach order: <prefix>rank:members:{name}.
func (k Keys) RankMembers(name string) string { return k.Prefix + "rank:members:{" + name + "}" }

// RankMeta is the hash of a leaderboard's counters and settings (version,
// seq, ties, reset): <prefix>rank:meta:{name}. It outlives clears.
func (k Keys) RankMeta(name string) string { return k.Prefix + "rank:meta:{" + name + "}" }

// RankArchive is the hash holding the archive of a leaderboard reset on
// date (YYYYMMDD), field "data" = JSON: <prefix>rank:archive:{name}:<date>.
func (k Keys) RankArchive(name, date string) string {
	return k.Prefix + "rank:archive:{" + name + "}:" + date
}
