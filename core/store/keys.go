// Package store builds Redis clients from the config and every Redis key and
// channel name the module uses, so the key layout lives in one place
// (docs/keys.md describes it).
package store

import "strings"

// Keys builds key and channel names under one prefix (global.redis.prefix,
// default "shield:").
type Keys struct {
	Prefix string
}

// Global is the key of a shield.global() value: <prefix>global:<key>.
func (k Keys) Global(key string) string { return k.Prefix + "global:" + key }

// PubSubPrefix is prepended to every user pub/sub channel and pattern:
// <prefix>pubsub:<channel>.
func (k Keys) PubSubPrefix() string { return k.Prefix + "pubsub:" }

// CacheInvalidation is the channel on which processes announce writes so that
// other processes evict those keys from their local caches.
func (k Keys) CacheInvalidation() string { return k.Prefix + "cache:invalidate" }

// Lock is the hash of a distributed lock. The name is hash-tagged so that
// every key of one lock lands in one Cluster slot.
func (k Keys) Lock(name string) string { return k.Prefix + "lock:{" + name + "}" }

// LockQueue is the sorted set of the fair waiters of a lock, in arrival
// order: member = owner, score = enqueue time (server milliseconds, made
// strictly increasing): <prefix>lock:queue:{name}.
func (k Keys) LockQueue(name string) string { return k.Prefix + "lock:queue:{" + name + "}" }

// LockWaiters is the sorted set of the fair waiters of a lock by liveness
// deadline: member = owner, score = the server time (milliseconds) after
// which a waiter that did not retry is purged from LockQueue:
// <prefix>lock:waiters:{name}.
func (k Keys) LockWaiters(name string) string { return k.Prefix + "lock:waiters:{" + name + "}" }

// LockToken is the fencing-token counter of a lock (a string incremented
// once per grant, never expired): <prefix>lock:token:{name}.
func (k Keys) LockToken(name string) string { return k.Prefix + "lock:token:{" + name + "}" }

// RWLock is the hash of the shared (read) holds of a lock: field = owner,
// value = "count:token:acquired_at_ms": <prefix>rwlock:{name}. The
// exclusive (write) hold of the same lock is the Lock hash.
func (k Keys) RWLock(name string) string { return k.Prefix + "rwlock:{" + name + "}" }

// RWLockDeadlines is the sorted set of the lease deadlines of the shared
// holds of a lock: member = owner, score = server time (milliseconds) at
// which that hold expires: <prefix>rwlock:deadlines:{name}.
func (k Keys) RWLockDeadlines(name string) string {
	return k.Prefix + "rwlock:deadlines:{" + name + "}"
}

// RWLockWriters is the sorted set of the writers waiting for a lock outside
// fair mode (writer intents): member = owner, score = the server time
// (milliseconds) after which a writer that did not retry is purged. While
// it holds a live intent of another owner, new shared holds are refused:
// <prefix>rwlock:writers:{name}.
func (k Keys) RWLockWriters(name string) string { return k.Prefix + "rwlock:writers:{" + name + "}" }

// LockReleased is the channel on which a lock's scripts announce that it
// was released (or that its fair queue advanced, or its last waiting writer
// left), so waiters retry at once; it is also the internal bus's channel:
// <prefix>lock:released:{name}.
func (k Keys) LockReleased(name string) string { return k.Prefix + "lock:released:{" + name + "}" }

// LockKeys returns every key of lock name in the order the lock scripts take
// them — Lock, RWLock, RWLockDeadlines, LockQueue, LockWaiters, LockToken,
// RWLockWriters — and its LockReleased channel: the same strings as those
// builders, as substrings of one string (one allocation per operation).
func (k Keys) LockKeys(name string) (keys [7]string, channel string) {
	p := k.Prefix
	parts := [8][2]string{
		{"lock:{", "}"}, {"rwlock:{", "}"}, {"rwlock:deadlines:{", "}"}, {"lock:queue:{", "}"},
		{"lock:waiters:{", "}"}, {"lock:token:{", "}"}, {"rwlock:writers:{", "}"}, {"lock:released:{", "}"},
	}
	n := 0
	for _, part := range parts {
		n += len(p) + len(part[0]) + len(name) + len(part[1])
	}
	var b strings.Builder
	b.Grow(n)
	for _, part := range parts {
		b.WriteString(p)
		b.WriteString(part[0])
		b.WriteString(name)
		b.WriteString(part[1])
	}
	all := b.String()
	var out [8]string
	at := 0
	for i, part := range parts {
		l := len(p) + len(part[0]) + len(name) + len(part[1])
		out[i] = all[at : at+l]
		at += l
	}
	copy(keys[:], out[:7])
	return keys, out[7]
}

// GlobEscape escapes Redis glob metacharacters so s matches only itself
// inside a PSUBSCRIBE pattern.
func GlobEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ { // bytewise: keys may be binary
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
