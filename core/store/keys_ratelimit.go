package store

// Rate limiter keys. Every key of one limiter carries the hash tag {name},
// so a sync script covering many keys of a limiter runs in one Cluster slot
// (one limiter's state lives on one Cluster node).

// RateLimitProcesses is the sorted set of every process running token-bucket
// limiters under this prefix: member = process id, score = heartbeat
// deadline (server ms). A new limiter divides its provisional share by its
// size until the limiter's own RateLimitProcs says who shares it:
// <prefix>ratelimit:processes.
func (k Keys) RateLimitProcesses() string { return k.Prefix + "ratelimit:processes" }

// RateLimitProcs is the sorted set of the processes sharing token-bucket
// limiter name: member = process id, score = heartbeat deadline (server
// milliseconds) after which the process counts as gone:
// <prefix>ratelimit:{name}:procs.
func (k Keys) RateLimitProcs(name string) string {
	return k.Prefix + "ratelimit:{" + name + "}:procs"
}

// RateLimitBucketPrefix is the part before the user key of a token bucket's
// state hash: <prefix>ratelimit:{name}:tb: (see RateLimitBucket).
func (k Keys) RateLimitBucketPrefix(name string) string {
	return k.Prefix + "ratelimit:{" + name + "}:tb:"
}

// RateLimitBucket is the hash of one key of token-bucket limiter name: the
// global pool (field p, tokens held by no process; field t, server ms it
// was last updated) and one lease per process (field @<process id> =
// "rate burst demand deadline_ms"): <prefix>ratelimit:{name}:tb:<key>.
func (k Keys) RateLimitBucket(name, key string) string {
	return k.RateLimitBucketPrefix(name) + key
}

// RateLimitWindow is the sorted set of the requests in the current window
// of one key of sliding-window limiter name: member = score = server time
// in microseconds (made strictly increasing per key):
// <prefix>ratelimit:{name}:sw:<key>.
func (k Keys) RateLimitWindow(name, key string) string {
	return k.Prefix + "ratelimit:{" + name + "}:sw:" + key
}
