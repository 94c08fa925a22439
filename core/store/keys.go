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

// GlobalPrefix is the part of every Global key before the user's key.
func (k Keys) GlobalPrefix() string { return k.Prefix + "global:" }

// PubSubPrefix is prepended to every user pub/sub channel and pattern:
// <prefix>pubsub:<channel>.
func (k Keys) PubSubPrefix() string { return k.Prefix + "pubsub:" }

// CacheInvalidation is the channel on which processes announce writes so that
// other processes evict those keys from their local caches.
func (k Keys) CacheInvalidation() string { return k.Prefix + "cache:invalidate" }

// Lock is the hash of a distributed lock. The name is hash-tagged so that
// every key of one lock lands in one Cluster slot.
func (k Keys) Lock(name string) string { return k.Prefix + "lock:{" + name + "}" }

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
