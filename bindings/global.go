package bindings

import (
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/codec"
	"github.com/shieldrt/shieldglobal/core/kv"
	"github.com/shieldrt/shieldglobal/core/pubsub"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

const globalType = "shield.global"

// installGlobal registers shield.global(): one object per runtime whose
// methods reach the Module's store, cache and pub/sub.
func installGlobal(rt *runtime.Runtime, lib *lua.LTable, g *Global) {
	L := rt.L
	mt := L.NewTable()
	mt.RawSetString("__name", lua.LString(globalType))
	methods := L.NewTable()
	b := &globalBinding{rt: rt, g: g}
	for _, m := range []struct {
		name string
		fn   lua.LGFunction
	}{
		{"set", b.set}, {"get", b.get}, {"delete", b.delete},
		{"mset", b.mset}, {"mget", b.mget},
		{"incr", b.incr}, {"decr", b.decr},
		{"get_cached", b.getCached}, {"invalidate", b.invalidate}, {"cache_stats", b.cacheStats},
		{"subscribe", b.subscribe}, {"psubscribe", b.psubscribe}, {"publish", b.publish},
	} {
		methods.RawSetString(m.name, rt.Blocking(m.fn))
	}
	runtime.SetMethods(L, mt, methods)
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LString(globalType)); return 1 }))
	ud := L.NewUserData()
	ud.Value = b
	ud.Metatable = mt
	lib.RawSetString("global", L.NewFunction(func(L *lua.LState) int { L.Push(ud); return 1 }))
	installSubscriptionType(rt)
}

type globalBinding struct {
	rt *runtime.Runtime
	g  *Global
}

func (b *globalBinding) args(L *lua.LState, fn string) runtime.Args {
	a := runtime.ArgsOf(L, globalType, fn)
	runtime.SelfAs[*globalBinding](a, 1, globalType)
	return a
}

func (b *globalBinding) name(fn string) string { return globalType + ":" + fn }

func (b *globalBinding) encode(a runtime.Args, n int) []byte {
	data, err := codec.Encode(a.L.Get(n))
	if err != nil {
		a.Bad(n, err.Error())
	}
	return data
}

func decode(data []byte) lua.LValue {
	if data == nil {
		return lua.LNil
	}
	return codec.DecodeLenient(data)
}

// written returns a convert that evicts keys from this process's cache once
// the write is done (the store announced it to the other processes in the
// same round trip) and returns true.
func (b *globalBinding) written(keys ...string) func(*lua.LState, struct{}) []lua.LValue {
	return func(*lua.LState, struct{}) []lua.LValue {
		b.g.readThrough().Written(keys...)
		return []lua.LValue{lua.LTrue}
	}
}

// g:set(key, value [, ttl_ms]) -> true. A nil value deletes the key.
func (b *globalBinding) set(L *lua.LState) int {
	a := b.args(L, "set")
	key := a.Key(2)
	ttl := time.Duration(a.OptMillis(4, "ttl")) * time.Millisecond
	if L.Get(3) == lua.LNil {
		return runtime.Run(b.rt, L, b.name("set"), b.g.Store.Delete(key), func(L *lua.LState, _ bool) []lua.LValue {
			return b.written(key)(L, struct{}{})
		})
	}
	return runtime.Run(b.rt, L, b.name("set"), b.g.Store.Set(key, b.encode(a, 3), ttl), b.written(key))
}

// g:get(key) -> value or nil.
func (b *globalBinding) get(L *lua.LState) int {
	a := b.args(L, "get")
	return runtime.Run(b.rt, L, b.name("get"), b.g.Store.Get(a.Key(2)), pushValue)
}

func pushValue(_ *lua.LState, v kv.Value) []lua.LValue { return []lua.LValue{decode(v.Data)} }

// g:delete(key) -> true when the key existed.
func (b *globalBinding) delete(L *lua.LState) int {
	a := b.args(L, "delete")
	key := a.Key(2)
	return runtime.Run(b.rt, L, b.name("delete"), b.g.Store.Delete(key), func(_ *lua.LState, existed bool) []lua.LValue {
		b.g.Evict(key)
		return []lua.LValue{lua.LBool(existed)}
	})
}

// g:mset({k = v, ...} [, ttl_ms]) -> true.
func (b *globalBinding) mset(L *lua.LState) int {
	a := b.args(L, "mset")
	t := a.Table(2)
	ttl := time.Duration(a.OptMillis(3, "ttl")) * time.Millisecond
	var pairs []kv.Pair
	var keys []string
	var bad string
	t.ForEach(func(k, v lua.LValue) {
		ks, ok := k.(lua.LString)
		if !ok || ks == "" {
			if bad == "" {
				bad = fmt.Sprintf("keys must be non-empty strings, got %s %s", k.Type(), k.String())
			}
			return
		}
		data, err := codec.Encode(v)
		if err != nil && bad == "" {
			bad = fmt.Sprintf("value of %q: %v", string(ks), err)
		}
		pairs = append(pairs, kv.Pair{Key: string(ks), Value: data})
		keys = append(keys, string(ks))
	})
	if bad != "" {
		a.Bad(2, bad)
	}
	return runtime.Run(b.rt, L, b.name("mset"), b.g.Store.MSet(pairs, ttl), b.written(keys...))
}

// g:mget(k1, k2, ...) or g:mget({k1, k2}) -> {k1 = v1, ...}; missing keys are absent.
func (b *globalBinding) mget(L *lua.LState) int {
	a := b.args(L, "mget")
	var keys []string
	if t, ok := L.Get(2).(*lua.LTable); ok && L.GetTop() == 2 {
		for i := 1; i <= t.Len(); i++ {
			s, ok := t.RawGetInt(i).(lua.LString)
			if !ok || s == "" {
				a.Bad(2, fmt.Sprintf("key #%d must be a non-empty string", i))
			}
			keys = append(keys, string(s))
		}
	} else {
		for i := 2; i <= L.GetTop(); i++ {
			keys = append(keys, a.Key(i))
		}
	}
	return runtime.Run(b.rt, L, b.name("mget"), b.g.Store.MGet(keys), func(L *lua.LState, vals [][]byte) []lua.LValue {
		out := L.CreateTable(0, len(keys))
		for i, k := range keys {
			if vals[i] != nil {
				out.RawSetString(k, decode(vals[i]))
			}
		}
		return []lua.LValue{out}
	})
}

// g:incr(key [, delta=1]) -> new value; a missing key counts from 0.
func (b *globalBinding) incr(L *lua.LState) int { return b.add(L, "incr", 1) }

// g:decr(key [, delta=1]) -> new value.
func (b *globalBinding) decr(L *lua.LState) int { return b.add(L, "decr", -1) }

func (b *globalBinding) add(L *lua.LState, fn string, sign float64) int {
	a := b.args(L, fn)
	key := a.Key(2)
	delta := a.OptNum(3, 1) * sign
	if delta != delta || delta > 1e300 || delta < -1e300 {
		a.Bad(3, "delta must be a number between -1e300 and 1e300")
	}
	return runtime.Run(b.rt, L, b.name(fn), b.g.Store.IncrBy(key, delta), func(_ *lua.LState, n float64) []lua.LValue {
		b.g.Evict(key)
		return []lua.LValue{lua.LNumber(n)}
	})
}

// g:get_cached(key [, ttl_ms]) -> value: served from the process-local cache
// while fresh, else read and cached for ttl (global.cache.default_ttl).
func (b *globalBinding) getCached(L *lua.LState) int {
	a := b.args(L, "get_cached")
	key := a.Key(2)
	ttl := time.Duration(a.OptMillis(3, "ttl")) * time.Millisecond
	rd := b.g.readThrough().Get(key, ttl)
	if rd.Hit {
		L.Push(decode(rd.Data))
		return 1
	}
	return runtime.Run(b.rt, L, b.name("get_cached"), rd.Op, func(L *lua.LState, v kv.Value) []lua.LValue {
		rd.Done(v)
		return pushValue(L, v)
	})
}

// g:invalidate(key): evicts key from this process's cache and, with
// cache.sync, from every other process's.
func (b *globalBinding) invalidate(L *lua.LState) int {
	a := b.args(L, "invalidate")
	key := a.Key(2)
	b.g.Evict(key)
	return runtime.Run(b.rt, L, b.name("invalidate"), b.g.Store.Invalidate(key), func(*lua.LState, struct{}) []lua.LValue { return nil })
}

// g:cache_stats() -> {enabled, size, hits, misses, hit_rate} of this
// process's local cache (the /ops/global data fields).
func (b *globalBinding) cacheStats(L *lua.LState) int {
	b.args(L, "cache_stats")
	t := L.CreateTable(0, 5)
	var st kv.CacheStats
	if b.g.Cache != nil {
		st = b.g.Cache.Stats()
	}
	t.RawSetString("enabled", lua.LBool(b.g.Cache != nil))
	t.RawSetString("size", lua.LNumber(st.Size))
	t.RawSetString("hits", lua.LNumber(st.Hits))
	t.RawSetString("misses", lua.LNumber(st.Misses))
	t.RawSetString("hit_rate", lua.LNumber(st.HitRate))
	L.Push(t)
	return 1
}

// Global backs shield.global(): the store, the process-local cache and
// pub/sub. Shared by every runtime of the Module.
type Global struct {
	Store kv.Store
	Bus   pubsub.Bus
	// Inline is true when Store and Bus are in-process (the memory backend).
	Inline bool
	// Cache is nil when global.cache.enabled is false: get_cached reads through.
	Cache *kv.Cache
	// CacheTTL is the ttl of get_cached without one (global.cache.default_ttl).
	CacheTTL time.Duration
}

// readThrough is the read-through cache protocol (core/kv) over Store and
// Cache.
func (g *Global) readThrough() kv.ReadThrough {
	return kv.ReadThrough{Store: g.Store, Cache: g.Cache, TTL: g.CacheTTL}
}

// Evict drops key from the local cache. It reads Cache only: the cache
// sync's subscription calls it from its own goroutine, and may do so
// while the Module is still filling in Store.
func (g *Global) Evict(key string) { kv.ReadThrough{Cache: g.Cache}.Written(key) }
