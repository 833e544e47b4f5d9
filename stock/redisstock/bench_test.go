package redisstock_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// rawScript is the baseline: the minimal check-and-DECRBY a Lua stock gate
// can be, with none of the Store's semantics (no idempotency, no hold, no
// limit, no record).
var rawScript = redis.NewScript(`
local a = tonumber(redis.call('GET', KEYS[1]) or '-1')
if a < tonumber(ARGV[1]) then return -1 end
return redis.call('DECRBY', KEYS[1], ARGV[1])`)

const (
	benchClients = 64         // parallel callers
	benchUnits   = 10_000_000 // units of the hot SKU
	benchRounds  = 3          // interleaved rounds of baseline and Deduct
)

// BenchmarkDeduct measures Deduct of one unit of one hot SKU by 64 parallel
// callers against real Redis, batched (the default) and unbatched
// (MaxBatch 1), and in the same run the raw baseline (EVALSHA of a
// check-and-DECRBY script, one call per deduct). It reports the rates and
// their ratio per interleaved round, and the median ratios last. Run:
//
//	STOCKGUARD_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench Deduct -benchtime 2s ./stock/redisstock/
func BenchmarkDeduct(b *testing.B) {
	benchAgainstRaw(b, []string{"hot"})
}

// BenchmarkDeduct3Items is BenchmarkDeduct with orders of three SKUs (one
// script: the SKUs share a node on a standalone Redis), against the same
// one-key baseline.
func BenchmarkDeduct3Items(b *testing.B) {
	benchAgainstRaw(b, []string{"hot1", "hot2", "hot3"})
}

func benchAgainstRaw(b *testing.B, skus []string) {
	addr := testdb.Need(b, testdb.Redis)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: benchClients})
	defer c.Close()
	prefix := fmt.Sprintf("sgbench-%d", time.Now().UnixNano())
	defer cleanup(ctx, c, prefix)

	// Short retention: the benchmark's records expire soon after it.
	s, err := redisstock.New(c, redisstock.Config{Prefix: prefix, Retention: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	for _, sku := range skus {
		if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: benchUnits, PerUserLimit: 1 << 40, HoldTTL: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
	rawKey := prefix + ":raw"
	if err := c.Set(ctx, rawKey, benchUnits, time.Hour).Err(); err != nil {
		b.Fatal(err)
	}
	if err := rawScript.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}

	var seq atomic.Int64
	items := make([]stock.Item, len(skus))
	for i, sku := range skus {
		items[i] = stock.Item{SKU: sku, Qty: 1}
	}
	// The single-call path (MaxBatch 1), for comparison.
	single, err := redisstock.New(c, redisstock.Config{Prefix: prefix, Retention: time.Minute, MaxBatch: 1})
	if err != nil {
		b.Fatal(err)
	}
	full := func(b *testing.B, s *redisstock.Store) {
		b.SetParallelism(parallelism())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n := seq.Add(1)
				o := stock.Order{ID: "o" + strconv.FormatInt(n, 10), UserID: "u" + strconv.FormatInt(n%100_000, 10), Items: items}
				if err := s.Deduct(ctx, o); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	raw := func(b *testing.B) {
		b.SetParallelism(parallelism())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := rawScript.Run(ctx, c, []string{rawKey}, 1).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}

	// Interleaved rounds: each Deduct round reports its ratio against the
	// baseline round just before it; the last sub-benchmark reports the
	// medians over the rounds.
	ratios := make([]float64, benchRounds)
	singleRatios := make([]float64, benchRounds)
	for round := 1; round <= benchRounds; round++ {
		var rawRate float64
		b.Run(fmt.Sprintf("raw-evalsha/round%d", round), func(b *testing.B) {
			cpu := serverCPU(b, c)
			raw(b)
			rawRate = perSecond(b)
			b.ReportMetric(rawRate, "ops/s")
			b.ReportMetric(cpu()/float64(b.N), "server-µs/op")
		})
		b.Run(fmt.Sprintf("deduct/round%d", round), func(b *testing.B) {
			cpu := serverCPU(b, c)
			full(b, s)
			b.ReportMetric(cpu()/float64(b.N), "server-µs/op")
			b.ReportMetric(perSecond(b), "deducts/s")
			if rawRate > 0 {
				ratios[round-1] = perSecond(b) / rawRate
				b.ReportMetric(ratios[round-1], "ratio")
			}
		})
		b.Run(fmt.Sprintf("deduct-unbatched/round%d", round), func(b *testing.B) {
			cpu := serverCPU(b, c)
			full(b, single)
			b.ReportMetric(cpu()/float64(b.N), "server-µs/op")
			b.ReportMetric(perSecond(b), "deducts/s")
			if rawRate > 0 {
				singleRatios[round-1] = perSecond(b) / rawRate
				b.ReportMetric(singleRatios[round-1], "ratio")
			}
		})
	}
	b.Run("median", func(b *testing.B) {
		b.ReportMetric(median(ratios), "ratio")
		b.ReportMetric(median(singleRatios), "unbatched-ratio")
	})
}

// serverCPU reads the Redis server's CPU time and returns a function
// giving the microseconds it spent since.
func serverCPU(b *testing.B, c *redis.Client) func() float64 {
	read := func() float64 {
		us, err := testdb.ServerCPU(context.Background(), c)
		if err != nil {
			b.Fatal(err)
		}
		return us
	}
	start := read()
	return func() float64 { return read() - start }
}

// median returns the median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	ys := slices.Clone(xs)
	slices.Sort(ys)
	return ys[len(ys)/2]
}

// parallelism gives benchClients goroutines whatever GOMAXPROCS is.
func parallelism() int {
	p := benchClients / runtime.GOMAXPROCS(0)
	return max(p, 1)
}

// perSecond is the rate of the benchmark's measured loop.
func perSecond(b *testing.B) float64 { return float64(b.N) / b.Elapsed().Seconds() }

// cleanup deletes the benchmark's keys (its own prefix only).
func cleanup(ctx context.Context, c *redis.Client, prefix string) {
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			c.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		c.Unlink(ctx, batch...)
	}
}

// BenchmarkMemoryPerHold places 100,000 live holds of one SKU, each of its
// own user under a per-user limit, and reports the growth of the server's
// used_memory per hold. Run:
//
//	STOCKGUARD_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench MemoryPerHold -benchtime 1x ./stock/redisstock/
func BenchmarkMemoryPerHold(b *testing.B) {
	addr := testdb.Need(b, testdb.Redis)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: benchClients})
	defer c.Close()
	const holds = 100_000
	for range b.N {
		prefix := fmt.Sprintf("sgbench-%d", time.Now().UnixNano())
		s, err := redisstock.New(c, redisstock.Config{Prefix: prefix})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.PutOnSale(ctx, stock.Listing{SKU: "hot", Units: holds, PerUserLimit: 1, HoldTTL: time.Hour}); err != nil {
			b.Fatal(err)
		}
		before := usedMemory(b, c)
		var next atomic.Int64
		done := make(chan struct{})
		for range benchClients {
			go func() {
				defer func() { done <- struct{}{} }()
				for n := next.Add(1); n <= holds; n = next.Add(1) {
					id := strconv.FormatInt(n, 10)
					o := stock.Order{ID: "m" + id, UserID: "user-" + id, Items: []stock.Item{{SKU: "hot", Qty: 1}}}
					if err := s.Deduct(ctx, o); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		for range benchClients {
			<-done
		}
		b.ReportMetric(float64(usedMemory(b, c)-before)/holds, "bytes/hold")
		cleanup(ctx, c, prefix)
	}
}

// usedMemory is the server's used_memory.
func usedMemory(b *testing.B, c *redis.Client) int64 {
	n, err := testdb.UsedMemory(context.Background(), c)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
