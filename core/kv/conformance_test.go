package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shieldrt/shieldglobal/core/codec"
)

// runConformance checks that a Store implements the Store contract. Every
// backend must pass it unchanged, which is what makes them interchangeable.
//
// newStore returns an empty store (its own key space) for one subtest.
// advance lets time pass for that store: the memory backend moves its fake
// clock, Redis sleeps. Expiry is only ever awaited (poll for up to 2s), never
// timed.
func runConformance(t *testing.T, newStore func(t *testing.T) Store, advance func(d time.Duration)) {
	// waitGone lets time pass until key is gone, failing after 2s of real time.
	waitGone := func(t *testing.T, s syncStore, key string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for {
			_, found, err := s.Get(t.Context(), key)
			if err != nil {
				t.Fatalf("Get(%q): %v", key, err)
			}
			if !found {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Get(%q): key still present 2s after its ttl should have expired it", key)
			}
			advance(10 * time.Millisecond)
		}
	}
	mustSet := func(t *testing.T, s syncStore, key, value string, ttl time.Duration) {
		t.Helper()
		if err := s.Set(t.Context(), key, []byte(value), ttl); err != nil {
			t.Fatalf("Set(%q): %v", key, err)
		}
	}
	mustGet := func(t *testing.T, s syncStore, key string) (string, bool) {
		t.Helper()
		v, found, err := s.Get(t.Context(), key)
		if err != nil {
			t.Fatalf("Get(%q): %v", key, err)
		}
		if found && v == nil {
			t.Fatalf("Get(%q): found with a nil value", key)
		}
		if !found && v != nil {
			t.Fatalf("Get(%q): not found but value %q", key, v)
		}
		return string(v), found
	}
	wantValue := func(t *testing.T, s syncStore, key, want string) {
		t.Helper()
		got, found := mustGet(t, s, key)
		if !found || got != want {
			t.Fatalf("Get(%q) = %q, found=%v; want %q", key, got, found, want)
		}
	}
	mustTTL := func(t *testing.T, s syncStore, key string) (time.Duration, bool) {
		t.Helper()
		d, found, err := s.TTL(t.Context(), key)
		if err != nil {
			t.Fatalf("TTL(%q): %v", key, err)
		}
		return d, found
	}
	// wantTTLAbout: key has a ttl in (max/2, max]. The lower bound only
	// catches unit mistakes (seconds vs milliseconds); max is an hour.
	wantTTLAbout := func(t *testing.T, s syncStore, key string, max time.Duration) {
		t.Helper()
		d, found := mustTTL(t, s, key)
		if !found || d <= max/2 || d > max {
			t.Fatalf("TTL(%q) = %v, found=%v; want in (%v, %v]", key, d, found, max/2, max)
		}
	}
	wantNoExpiry := func(t *testing.T, s syncStore, key string) {
		t.Helper()
		d, found := mustTTL(t, s, key)
		if !found || d >= 0 {
			t.Fatalf("TTL(%q) = %v, found=%v; want negative (no expiry), found", key, d, found)
		}
	}
	mustIncr := func(t *testing.T, s syncStore, key string, delta, want float64) {
		t.Helper()
		got, err := s.IncrBy(t.Context(), key, delta)
		if err != nil {
			t.Fatalf("IncrBy(%q, %v): %v", key, delta, err)
		}
		if got != want {
			t.Fatalf("IncrBy(%q, %v) = %v; want %v", key, delta, got, want)
		}
	}

	t.Run("get missing", func(t *testing.T) {
		s := syncOf(newStore(t))
		if _, found := mustGet(t, s, "nope"); found {
			t.Fatal("missing key found")
		}
		if _, found := mustTTL(t, s, "nope"); found {
			t.Fatal("TTL found a missing key")
		}
	})

	t.Run("set get", func(t *testing.T) {
		s := syncOf(newStore(t))
		mustSet(t, s, "k", `{"a":1}`, 0)
		wantValue(t, s, "k", `{"a":1}`)
		if _, found := mustGet(t, s, "K"); found {
			t.Fatal("keys are case-insensitive")
		}
	})

	t.Run("overwrite", func(t *testing.T) {
		s := syncOf(newStore(t))
		mustSet(t, s, "k", `"first"`, 0)
		mustSet(t, s, "k", `"second, longer"`, 0)
		wantValue(t, s, "k", `"second, longer"`)
		mustSet(t, s, "k", `1`, 0)
		wantValue(t, s, "k", `1`)
	})

	t.Run("binary safe", func(t *testing.T) {
		s := syncOf(newStore(t))
		all := make([]byte, 256)
		for i := range all {
			all[i] = byte(i)
		}
		mustSet(t, s, "bin", string(all), 0)
		wantValue(t, s, "bin", string(all))
		odd := "ключ {tag} \x00\r\n*?[]\xff"
		mustSet(t, s, odd, "x", 0)
		wantValue(t, s, odd, "x")
		vals, err := s.MGet(t.Context(), []string{"bin", odd})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(vals[0], all) || string(vals[1]) != "x" {
			t.Fatalf("MGet = %q", vals)
		}
	})

	t.Run("empty value", func(t *testing.T) {
		s := syncOf(newStore(t))
		mustSet(t, s, "e", "", 0)
		v, found, err := s.Get(t.Context(), "e")
		if err != nil || !found || v == nil || len(v) != 0 {
			t.Fatalf("Get = %q (nil=%v), %v, %v; want empty, found", v, v == nil, found, err)
		}
		if err := s.Set(t.Context(), "n", nil, 0); err != nil {
			t.Fatal(err)
		}
		vals, err := s.MGet(t.Context(), []string{"e", "missing", "n"})
		if err != nil {
			t.Fatal(err)
		}
		if vals[0] == nil || len(vals[0]) != 0 || vals[1] != nil || vals[2] == nil || len(vals[2]) != 0 {
			t.Fatalf("MGet = %#v; want [empty, nil, empty]", vals)
		}
	})

	t.Run("caller buffers are not retained", func(t *testing.T) {
		s := syncOf(newStore(t))
		buf := []byte("hello")
		if err := s.Set(t.Context(), "k", buf, 0); err != nil {
			t.Fatal(err)
		}
		copy(buf, "XXXXX")
		wantValue(t, s, "k", "hello")
		if err := s.MSet(t.Context(), []Pair{{"m", buf}}, 0); err != nil {
			t.Fatal(err)
		}
		copy(buf, "YYYYY")
		wantValue(t, s, "m", "XXXXX")
		v, _, _ := s.Get(t.Context(), "k")
		copy(v, "ZZZZZ")
		wantValue(t, s, "k", "hello")
		vals, _ := s.MGet(t.Context(), []string{"k"})
		copy(vals[0], "ZZZZZ")
		wantValue(t, s, "k", "hello")
	})

	t.Run("ttl expiry", func(t *testing.T) {
		s := syncOf(newStore(t))
		mustSet(t, s, "short", "1", 50*time.Millisecond)
		mustSet(t, s, "long", "2", time.Hour)
		mustSet(t, s, "forever", "3", 0)
		waitGone(t, s, "short")
		if _, found := mustTTL(t, s, "short"); found {
			t.Fatal("TTL found an expired key")
		}
		if existed, err := s.Delete(t.Context(), "short"); err != nil || existed {
			t.Fatalf("Delete(expired) = %v, %v; want false", existed, err)
		}
		vals, err := s.MGet(t.Context(), []string{"short", "long", "forever"})
		if err != nil {
			t.Fatal(err)
		}
		if vals[0] != nil || string(vals[1]) != "2" || string(vals[2]) != "3" {
			t.Fatalf("MGet = %q; want [nil 2 3]", vals)
		}
		// The key can be set again after expiring.
		mustSet(t, s, "short", "again", 0)
		wantValue(t, s, "short", "again")
	})

	t.Run("sub-millisecond ttl still expires", func(t *testing.T) {
		s := syncOf(newStore(t))
		mustSet(t, s, "k", "1", time.Microsecond)
		waitGone(t, s, "k")
	})

	t.Run("TTL", func(t *testing.T) {
		s := syncOf(newStore(t))
		mustSet(t, s, "h", "1", time.Hour)
		wantTTLAbout(t, s, "h", time.Hour)
		mustSet(t, s, "none", "1", 0)
		wantNoExpiry(t, s, "none")
		mustSet(t, s, "neg", "1", -time.Second)
		wantNoExpiry(t, s, "neg")
		wantValue(t, s, "neg", "1")
		if d := NoExpiry; d >= 0 {
			t.Fatalf("NoExpiry = %v", d)
		}
	})

	t.Run("set without ttl clears ttl", func(t *testing.T) {
		s := syncOf(newStore(t))
		mustSet(t, s, "k", "1", 50*time.Millisecond)
		mustSet(t, s, "k", "2", 0)
		wantNoExpiry(t, s, "k")
		advance(100 * time.Millisecond)
		wantValue(t, s, "k", "2")
		// And a ttl can be put back.
		mustSet(t, s, "k", "3", time.Hour)
		wantTTLAbout(t, s, "k", time.Hour)
	})

	t.Run("mset mget", func(t *testing.T) {
		s := syncOf(newStore(t))
		if err := s.MSet(t.Context(), []Pair{{"a", []byte("A")}, {"c", []byte("C")}}, 0); err != nil {
			t.Fatal(err)
		}
		vals, err := s.MGet(t.Context(), []string{"a", "b", "c", "d", "a"})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"A", "", "C", "", "A"}
		if len(vals) != len(want) {
			t.Fatalf("MGet returned %d values for 5 keys", len(vals))
		}
		for i, w := range want {
			if (w == "") != (vals[i] == nil) || string(vals[i]) != w {
				t.Fatalf("MGet[%d] = %q (nil=%v); want %q", i, vals[i], vals[i] == nil, w)
			}
		}
		if vals, err := s.MGet(t.Context(), nil); err != nil || len(vals) != 0 {
			t.Fatalf("MGet(nil) = %v, %v", vals, err)
		}
		if err := s.MSet(t.Context(), nil, time.Hour); err != nil {
			t.Fatalf("MSet(nil): %v", err)
		}
		// Repeated key: the last pair wins.
		if err := s.MSet(t.Context(), []Pair{{"r", []byte("1")}, {"r", []byte("2")}}, 0); err != nil {
			t.Fatal(err)
		}
		wantValue(t, s, "r", "2")
		// Keys sharing a hash tag (one Cluster slot: one transaction).
		if err := s.MSet(t.Context(), []Pair{{"{t}x", []byte("x")}, {"{t}y", []byte("y")}}, 0); err != nil {
			t.Fatal(err)
		}
		wantValue(t, s, "{t}x", "x")
		wantValue(t, s, "{t}y", "y")
	})

	t.Run("mset mget 100 keys", func(t *testing.T) {
		s := syncOf(newStore(t))
		var pairs []Pair
		var keys []string
		slots := map[uint16]bool{}
		for i := range 100 {
			k := fmt.Sprintf("key-%d", i)
			keys = append(keys, k)
			pairs = append(pairs, Pair{k, []byte(strconv.Itoa(i * i))})
			slots[keySlot("test:global:"+k)] = true
		}
		if len(slots) < 50 {
			t.Fatalf("test keys fall in only %d slots; they should spread", len(slots))
		}
		if err := s.MSet(t.Context(), pairs, time.Hour); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, "missing-at-the-end")
		keys = append([]string{"missing-at-the-start"}, keys...)
		vals, err := s.MGet(t.Context(), keys)
		if err != nil {
			t.Fatal(err)
		}
		if len(vals) != 102 || vals[0] != nil || vals[101] != nil {
			t.Fatalf("MGet: %d values, first %q, last %q", len(vals), vals[0], vals[len(vals)-1])
		}
		for i := range 100 {
			if got, want := string(vals[i+1]), strconv.Itoa(i*i); got != want {
				t.Fatalf("MGet[key-%d] = %q; want %q", i, got, want)
			}
		}
		for _, k := range []string{"key-0", "key-57", "key-99"} {
			wantTTLAbout(t, s, k, time.Hour)
		}
		// MSet without ttl clears the ttl, like Set.
		if err := s.MSet(t.Context(), pairs[:10], 0); err != nil {
			t.Fatal(err)
		}
		wantNoExpiry(t, s, "key-3")
		wantTTLAbout(t, s, "key-10", time.Hour)
	})

	t.Run("mset ttl expiry", func(t *testing.T) {
		s := syncOf(newStore(t))
		var pairs []Pair
		for i := range 20 {
			pairs = append(pairs, Pair{fmt.Sprintf("k%d", i), []byte("v")})
		}
		if err := s.MSet(t.Context(), pairs, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		for _, p := range pairs {
			waitGone(t, s, p.Key)
		}
	})

	t.Run("delete", func(t *testing.T) {
		s := syncOf(newStore(t))
		mustSet(t, s, "k", "1", 0)
		existed, err := s.Delete(t.Context(), "k")
		if err != nil || !existed {
			t.Fatalf("Delete(existing) = %v, %v; want true", existed, err)
		}
		if _, found := mustGet(t, s, "k"); found {
			t.Fatal("deleted key still found")
		}
		existed, err = s.Delete(t.Context(), "k")
		if err != nil || existed {
			t.Fatalf("Delete(deleted) = %v, %v; want false", existed, err)
		}
		existed, err = s.Delete(t.Context(), "never")
		if err != nil || existed {
			t.Fatalf("Delete(missing) = %v, %v; want false", existed, err)
		}
	})

	t.Run("incr missing starts at zero", func(t *testing.T) {
		s := syncOf(newStore(t))
		mustIncr(t, s, "n", 1, 1)
		wantValue(t, s, "n", "1")
		wantNoExpiry(t, s, "n")
		mustIncr(t, s, "z", 0, 0)
		wantValue(t, s, "z", "0")
		mustIncr(t, s, "neg", -2.5, -2.5)
		wantValue(t, s, "neg", "-2.5")
	})

	t.Run("incr steps", func(t *testing.T) {
		s := syncOf(newStore(t))
		steps := []struct {
			delta, want float64
			stored      string
		}{
			{1, 1, "1"}, {1, 2, "2"}, {-1, 1, "1"}, {-1, 0, "0"}, {-1, -1, "-1"},
			{0.5, -0.5, "-0.5"}, {0.5, 0, "0"}, {0.5, 0.5, "0.5"}, {0.5, 1, "1"},
			{0.25, 1.25, "1.25"}, {1e6, 1000001.25, "1000001.25"},
			{-1000000, 1.25, "1.25"}, {1e15, 1e15 + 1.25, ""}, // 18 digits: may differ
		}
		for _, st := range steps {
			mustIncr(t, s, "n", st.delta, st.want)
			if st.stored != "" {
				wantValue(t, s, "n", st.stored)
			}
		}
	})

	t.Run("incr stored numbers", func(t *testing.T) {
		s := syncOf(newStore(t))
		for _, c := range []struct {
			stored string
			delta  float64
			want   float64
			after  string
		}{
			{"5", 1, 6, "6"},
			{"1", 0.5, 1.5, "1.5"},
			{"-3", -2, -5, "-5"},
			{"2.5", 2.5, 5, "5"},
			{"1.5", 0, 1.5, "1.5"},
			{"1e+3", 1, 1001, "1001"},
			{"-0", 0, 0, "0"},
			{"0.0", 7, 7, "7"},
			{"1E2", -100, 0, "0"},
			{"9007199254740990", 1, 9007199254740991, "9007199254740991"},
		} {
			mustSet(t, s, "n", c.stored, 0)
			mustIncr(t, s, "n", c.delta, c.want)
			wantValue(t, s, "n", c.after)
		}
	})

	t.Run("incr result text parses to the returned value", func(t *testing.T) {
		// Digits may differ between backends for such results (see
		// Store.IncrBy); this property may not.
		s := syncOf(newStore(t))
		for _, c := range []struct {
			stored string
			delta  float64
		}{
			{"0.1", 0.2}, {"9007199254740992", 0}, {"9007199254740992", 2},
			{"1e+300", 1}, {"-1e+300", 1e299}, {"1.7976931348623157e+308", 0},
			{"1e-7", 0}, {"123456789.123", 0.001}, {"3", 1.0 / 3},
		} {
			mustSet(t, s, "n", c.stored, 0)
			got, err := s.IncrBy(t.Context(), "n", c.delta)
			if err != nil {
				t.Fatalf("%s + %v: %v", c.stored, c.delta, err)
			}
			text, _ := mustGet(t, s, "n")
			if !codec.IsNumber([]byte(text)) {
				t.Fatalf("%s + %v stored %q, not a JSON number", c.stored, c.delta, text)
			}
			parsed, err := strconv.ParseFloat(text, 64)
			if err != nil || parsed != got {
				t.Fatalf("%s + %v returned %v but stored %q (%v, %v)", c.stored, c.delta, got, text, parsed, err)
			}
			// And the result is the float64 sum up to long double rounding.
			in, _ := strconv.ParseFloat(c.stored, 64)
			if sum := in + c.delta; !near(got, sum) {
				t.Fatalf("%s + %v = %v; want about %v", c.stored, c.delta, got, sum)
			}
		}
	})

	t.Run("incr on a non-number", func(t *testing.T) {
		s := syncOf(newStore(t))
		for _, v := range []string{
			`"5"`, `"abc"`, `abc`, ``, `true`, `null`, `[1]`, `{"n":1}`,
			` 5`, `5 `, "5\n", `5x`, `--5`,
		} {
			mustSet(t, s, "v", v, time.Hour)
			_, err := s.IncrBy(t.Context(), "v", 1)
			if !errors.Is(err, ErrNotNumber) {
				t.Fatalf("IncrBy on %q: err = %v; want ErrNotNumber", v, err)
			}
			if !strings.Contains(err.Error(), `"v"`) {
				t.Fatalf("IncrBy on %q: error %q does not name the key", v, err)
			}
			wantValue(t, s, "v", v)
			wantTTLAbout(t, s, "v", time.Hour)
		}
	})

	t.Run("incr to NaN or Inf", func(t *testing.T) {
		s := syncOf(newStore(t))
		mustSet(t, s, "n", "5", time.Hour)
		for _, d := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
			if _, err := s.IncrBy(t.Context(), "n", d); !errors.Is(err, ErrNotFinite) {
				t.Fatalf("IncrBy(%v): err = %v; want ErrNotFinite", d, err)
			}
		}
		mustSet(t, s, "big", "1.7976931348623157e+308", time.Hour)
		for _, d := range []float64{1.7976931348623157e+308, 1e308} {
			_, err := s.IncrBy(t.Context(), "big", d)
			if !errors.Is(err, ErrNotFinite) || !strings.Contains(err.Error(), `"big"`) {
				t.Fatalf("IncrBy(max float64 + %v): err = %v; want ErrNotFinite naming the key", d, err)
			}
		}
		mustSet(t, s, "small", "-1.7976931348623157e+308", 0)
		if _, err := s.IncrBy(t.Context(), "small", -1e308); !errors.Is(err, ErrNotFinite) {
			t.Fatalf("IncrBy(min float64 - 1e308): err = %v; want ErrNotFinite", err)
		}
		// Nothing changed, TTLs included; a missing key stays missing.
		wantValue(t, s, "n", "5")
		wantTTLAbout(t, s, "n", time.Hour)
		wantValue(t, s, "big", "1.7976931348623157e+308")
		wantTTLAbout(t, s, "big", time.Hour)
		wantValue(t, s, "small", "-1.7976931348623157e+308")
		wantNoExpiry(t, s, "small")
		if _, err := s.IncrBy(t.Context(), "missing", math.Inf(1)); !errors.Is(err, ErrNotFinite) {
			t.Fatalf("IncrBy(missing, +Inf): err = %v", err)
		}
		if _, found := mustGet(t, s, "missing"); found {
			t.Fatal("a failed IncrBy created the key")
		}
	})

	t.Run("incr keeps ttl", func(t *testing.T) {
		s := syncOf(newStore(t))
		mustSet(t, s, "n", "5", time.Hour)
		mustIncr(t, s, "n", 1, 6)
		wantTTLAbout(t, s, "n", time.Hour)
		mustIncr(t, s, "n", 0.5, 6.5)
		wantTTLAbout(t, s, "n", time.Hour)
		// A key whose ttl ran out is missing: it starts again at 0, without ttl.
		mustSet(t, s, "e", "100", 50*time.Millisecond)
		waitGone(t, s, "e")
		mustIncr(t, s, "e", 1, 1)
		wantNoExpiry(t, s, "e")
	})

	t.Run("concurrent incr", func(t *testing.T) {
		s := syncOf(newStore(t))
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Go(func() {
				for range 100 {
					if _, err := s.IncrBy(t.Context(), "c", 1); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		wantValue(t, s, "c", "1600")
	})

	t.Run("cancelled context", func(t *testing.T) {
		s := syncOf(newStore(t))
		mustSet(t, s, "k", "1", 0)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s with a cancelled context: err = %v; want context.Canceled", op, err)
			}
		}
		_, _, err := s.Get(ctx, "k")
		check("Get", err)
		_, err = s.MGet(ctx, []string{"k"})
		check("MGet", err)
		check("Set", s.Set(ctx, "k", []byte("2"), 0))
		check("MSet", s.MSet(ctx, []Pair{{"k", []byte("2")}}, 0))
		_, err = s.Delete(ctx, "k")
		check("Delete", err)
		_, err = s.IncrBy(ctx, "k", 1)
		check("IncrBy", err)
		_, _, err = s.TTL(ctx, "k")
		check("TTL", err)
		wantValue(t, s, "k", "1")
	})
}

// near reports whether a and b agree to 15 significant digits.
func near(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= math.Abs(a)*1e-15
}
