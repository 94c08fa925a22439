package store

import "strings"

// HashTag returns the part of key that Redis Cluster hashes: the content of
// the first {...} when it is non-empty, or the whole key. Keys that must meet
// in one script share it (see Keys).
func HashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}
