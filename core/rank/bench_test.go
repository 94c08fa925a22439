package rank

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/shieldrt/shieldglobal/internal/testredis"
)

// benchMembers is the board size of the per-op benchmarks.
const benchMembers = 1_000_000

// benchUID returns a fresh copy of the uid of member i: "player:" and
// seven digits. The benchmarks hold no string per member, so that the
// process's own heap stays small and what a collection cycle costs is the
// board's.
func benchUID(i int) string {
	var b [14]byte
	writeBenchUID(&b, i)
	return string(b[:])
}

func writeBenchUID(b *[14]byte, i int) {
	copy(b[:], "player:")
	for j := 13; j >= 7; j-- {
		b[j] = byte('0' + i%10)
		i /= 10
	}
}

// fill gives bd benchMembers members with scores in [0, 1e6) (ties
// included), in MUpdates of chunk members.
func fill(b *testing.B, bd Board, chunk int) {
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < benchMembers; i += chunk {
		m := make(map[string]float64, chunk)
		for j := i; j < min(i+chunk, benchMembers); j++ {
			m[benchUID(j)] = float64(rng.IntN(1_000_000))
		}
		if _, err := bd.MUpdate(m).Do(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

var memBench = sync.OnceValue(func() Board {
	bd, _ := NewMemory(nil).Board("bench", Options{})
	return bd
})

var memFilled sync.Once

func memBoard1M(b *testing.B) Board {
	bd := memBench()
	memFilled.Do(func() { fill(b, bd, 10_000) })
	return bd
}

// latencies runs op b.N times on random members, timing each call, and
// passes each call a fresh copy of the uid, as a caller's string is: a uid
// from Lua never shares the board's copy of it, so the lookup compares the
// bytes of both (the board's own string would short-cut on the pointer).
// It reports the p50 and p99 next to ns/op (which includes the copy and the
// two clock reads per call), and the process CPU time per op (GC
// included), which other processes on a shared machine disturb less than
// wall time. B/op and allocs/op include the copy (16 B, 1 allocation).
func latencies(b *testing.B, op func(uid string, rng *rand.Rand) error) {
	rng := rand.New(rand.NewPCG(2, 2))
	d := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		uid := benchUID(rng.IntN(benchMembers))
		t0 := time.Now()
		if err := op(uid, rng); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	reportPercentiles(b, d)
}

func benchUpdate(b *testing.B, bd Board) {
	ctx := context.Background()
	latencies(b, func(uid string, rng *rand.Rand) error {
		_, err := bd.Update(uid, float64(rng.IntN(1_000_000)), ModeSet).Do(ctx)
		return err
	})
}

func benchPosition(b *testing.B, bd Board) {
	ctx := context.Background()
	latencies(b, func(uid string, _ *rand.Rand) error {
		p, err := bd.Position(uid).Do(ctx)
		if err == nil && p == 0 {
			err = fmt.Errorf("%s not found", uid)
		}
		return err
	})
}

func benchAround(b *testing.B, bd Board) {
	ctx := context.Background()
	latencies(b, func(uid string, _ *rand.Rand) error {
		a, err := bd.Around(uid, 5).Do(ctx)
		if err == nil && !a.Found {
			err = fmt.Errorf("%s not found", uid)
		}
		return err
	})
}

// Memory backend at 1 000 000 members (target: p99 <= 2 µs each).
func BenchmarkMemoryUpdate1M(b *testing.B)   { benchUpdate(b, memBoard1M(b)) }
func BenchmarkMemoryPosition1M(b *testing.B) { benchPosition(b, memBoard1M(b)) }
func BenchmarkMemoryAround1M(b *testing.B)   { benchAround(b, memBoard1M(b)) }

// BenchmarkMemoryScore1M is the floor under the three: one lookup of the
// member (a Go map of 1 000 000 uids, then the member's handle), which
// every one of them starts with.
func BenchmarkMemoryScore1M(b *testing.B) {
	bd := memBoard1M(b)
	ctx := context.Background()
	latencies(b, func(uid string, _ *rand.Rand) error {
		s, err := bd.Score(uid).Do(ctx)
		if err == nil && !s.Found {
			err = fmt.Errorf("%s not found", uid)
		}
		return err
	})
}

// BenchmarkGCWith1M is what a board of 1 000 000 members costs each GC
// cycle of the process that holds it: the time of a full collection (the
// board is the heap's bulk), and the board's memory next to the Go heap's.
func BenchmarkGCWith1M(b *testing.B) {
	bd := memBoard1M(b)
	b.ResetTimer()
	for range b.N {
		runtime.GC()
	}
	b.StopTimer()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MB")
	b.ReportMetric(float64(mappedBytes(bd))/(1<<20), "mapped-MB")
}

// BenchmarkTree1M is the board's structure alone at 1 000 000 members: the
// same random updates and positions made directly on the tree, with no
// Op, no lock and no allocation (each uid is written into one reused
// buffer, which the tree never keeps), so the only memory traffic is the
// tree's. The gap to BenchmarkMemory*1M is the API's: the Op's
// allocation, the lock, the caller's string.
func BenchmarkTree1M(b *testing.B) {
	tr := newTree(false)
	var buf [14]byte
	uid := func(i int) string {
		writeBenchUID(&buf, i)
		return unsafe.String(&buf[0], len(buf))
	}
	rng := rand.New(rand.NewPCG(1, 1))
	seq := uint64(0)
	for i := range benchMembers {
		seq++
		tr.add(uid(i), key{float64(rng.IntN(1_000_000)), seq})
	}
	ops := []struct {
		name string
		op   func(uid string, score float64)
	}{
		{"update", func(uid string, score float64) {
			seq++
			var p place
			k := key{score, seq}
			id, _ := tr.findPlace(uid, &p, k)
			tr.moveTo(id, k, &p)
		}},
		{"position", func(uid string, _ float64) {
			id, _ := tr.find(uid)
			_ = tr.rank(id)
		}},
		{"find", func(uid string, _ float64) { _, _ = tr.find(uid) }},
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) {
			d := make([]time.Duration, b.N)
			b.ResetTimer()
			for i := range d {
				u, score := uid(rng.IntN(benchMembers)), float64(rng.IntN(1_000_000))
				t0 := time.Now()
				o.op(u, score)
				d[i] = time.Since(t0)
			}
			reportPercentiles(b, d)
		})
	}
}

// BenchmarkDependentMisses is the machine's floor under the board's
// latencies: k loads in a row, each of whose address depends on the one
// before, at random places in 256 MB (huge pages advised, as the board's
// arrays are), timed per round. A board operation that must wait for k
// cache misses in turn cannot have a lower p99 than k does here.
func BenchmarkDependentMisses(b *testing.B) {
	const size = 256 << 20
	var rs regions
	mem := grab[uint64](&rs, size/8)
	defer rs.release()
	for i := range mem {
		mem[i] = uint64(i) * 0x9E3779B97F4A7C15
	}
	for _, k := range []int{1, 2, 3, 4, 6} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(5, 5))
			d := make([]time.Duration, b.N)
			sum := uint64(0)
			b.ResetTimer()
			for i := range d {
				x := rng.Uint64()
				t0 := time.Now()
				for range k {
					x = mem[(x>>20)%uint64(len(mem))] ^ x
				}
				d[i] = time.Since(t0)
				sum += x
			}
			if sum == 42 {
				b.Log(sum)
			}
			reportPercentiles(b, d)
		})
	}
}

// reportPercentiles reports the p50 and p99 of d.
func reportPercentiles(b *testing.B, d []time.Duration) {
	b.StopTimer()
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds()), "p99-ns")
}

// The Redis backend on the same board size (standalone; one caller, so
// one round trip per op): the baseline of the memory ratios.
var (
	redisBenchOnce sync.Once
	redisBench     Board
)

func redisBoard1M(b *testing.B) Board {
	redisBenchOnce.Do(func() {
		c := redisClient(b)
		prefix := testredis.Prefix(b)
		redisBench, _ = NewRedis(c, prefix).Board("bench", Options{})
		fill(b, redisBench, 5_000)
	})
	return redisBench
}

// redisClient is one standalone client for all benchmarks (its keys are
// left to the throwaway server).
var benchClient redis.UniversalClient

func redisClient(b *testing.B) redis.UniversalClient {
	if benchClient == nil {
		opt, err := redis.ParseURL(testredis.URL(b))
		if err != nil {
			b.Fatal(err)
		}
		benchClient = redis.NewClient(opt)
	}
	return benchClient
}

func BenchmarkRedisUpdate1M(b *testing.B)   { benchUpdate(b, redisBoard1M(b)) }
func BenchmarkRedisPosition1M(b *testing.B) { benchPosition(b, redisBoard1M(b)) }
func BenchmarkRedisAround1M(b *testing.B)   { benchAround(b, redisBoard1M(b)) }

// Swap through the backend (an Op: EVALSHA + reply decoding) against a raw
// go-redis EVALSHA of the same script with the same keys and arguments,
// one caller each, on a board of 1000 members.
func BenchmarkRedisSwap(b *testing.B) {
	bd, pairs := swapBoard(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		p := pairs[i%len(pairs)]
		if _, err := bd.Swap(p[0], p[1], nil).Do(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawEvalShaSwap(b *testing.B) {
	bd, pairs := swapBoard(b)
	rb := bd.(*redisBoard)
	c := redisClient(b)
	ctx := context.Background()
	if err := c.ScriptLoad(ctx, libSrc+"\n"+swapSrc).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		p := pairs[i%len(pairs)]
		if err := c.EvalSha(ctx, swapScript.Hash(), rb.keys, rb.ties, p[0], p[1], "0", "0", "0").Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// Update + Position through the backend against raw ZADD + ZREVRANK (what
// a leaderboard without the tie contract costs), one caller each.
func BenchmarkRedisUpdatePosition(b *testing.B) {
	bd, pairs := swapBoard(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		uid := pairs[i%len(pairs)][0]
		if _, err := bd.Update(uid, float64(i%5000), ModeSet).Do(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := bd.Position(uid).Do(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawZAddZRevRank(b *testing.B) {
	_, pairs := swapBoard(b)
	c := redisClient(b)
	key := testredis.Prefix(b) + "raw"
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		uid := pairs[i%len(pairs)][0]
		if err := c.ZAdd(ctx, key, redis.Z{Score: float64(i % 5000), Member: uid}).Err(); err != nil {
			b.Fatal(err)
		}
		if err := c.ZRevRank(ctx, key, uid).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// swapBoard is a Redis board of 1000 members and random pairs of them.
func swapBoard(b *testing.B) (Board, [][2]string) {
	c := redisClient(b)
	bd, _ := NewRedis(c, testredis.Prefix(b)).Board("swap", Options{})
	m := map[string]float64{}
	for i := range 1000 {
		m[fmt.Sprintf("p%04d", i)] = float64(i % 300)
	}
	if _, err := bd.MUpdate(m).Do(context.Background()); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	pairs := make([][2]string, 4096)
	for i := range pairs {
		x, y := rng.IntN(1000), rng.IntN(999)
		if y >= x {
			y++
		}
		pairs[i] = [2]string{fmt.Sprintf("p%04d", x), fmt.Sprintf("p%04d", y)}
	}
	return bd, pairs
}

// cpuTime is the CPU time (user + system) the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The same two from 32 goroutines (b.SetParallelism(16) on 2 CPUs): the
// ratio to read on shared machines, where one-caller round trips are
// bimodal. Each op is still one EVALSHA; go-redis spreads them over its
// pool.
func BenchmarkRedisSwapParallel(b *testing.B) {
	bd, pairs := swapBoard(b)
	ctx := context.Background()
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			p := pairs[i%len(pairs)]
			if _, err := bd.Swap(p[0], p[1], nil).Do(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkRawEvalShaSwapParallel(b *testing.B) {
	bd, pairs := swapBoard(b)
	rb := bd.(*redisBoard)
	c := redisClient(b)
	ctx := context.Background()
	if err := c.ScriptLoad(ctx, libSrc+"\n"+swapSrc).Err(); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			p := pairs[i%len(pairs)]
			if err := c.EvalSha(ctx, swapScript.Hash(), rb.keys, rb.ties, p[0], p[1], "0", "0", "0").Err(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
