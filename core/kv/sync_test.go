package kv

import (
	"context"
	"time"
)

// syncStore runs a Store's ops at once, for tests written against a
// blocking API.
type syncStore struct{ s Store }

func syncOf(s Store) syncStore { return syncStore{s} }

func (x syncStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	v, err := x.s.Get(key).Do(ctx)
	return v.Data, v.Found, err
}

func (x syncStore) MGet(ctx context.Context, keys []string) ([][]byte, error) {
	return x.s.MGet(keys).Do(ctx)
}

func (x syncStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	_, err := x.s.Set(key, value, ttl).Do(ctx)
	return err
}

func (x syncStore) MSet(ctx context.Context, pairs []Pair, ttl time.Duration) error {
	_, err := x.s.MSet(pairs, ttl).Do(ctx)
	return err
}

func (x syncStore) Delete(ctx context.Context, key string) (bool, error) {
	return x.s.Delete(key).Do(ctx)
}

func (x syncStore) IncrBy(ctx context.Context, key string, delta float64) (float64, error) {
	return x.s.IncrBy(key, delta).Do(ctx)
}

func (x syncStore) TTL(ctx context.Context, key string) (time.Duration, bool, error) {
	e, err := x.s.TTL(key).Do(ctx)
	return e.Left, e.Found, err
}
