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

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

const (
	waitBenchClients = 64 // parallel callers
	waitBenchRounds  = 3  // interleaved rounds of Deduct without and with the wait
)

// BenchmarkDeductWait measures Deduct of one unit of one hot SKU by 64
// parallel callers with WaitReplicas 1, on a master and a replica of its
// own (redis-server on the PATH), against Deduct without the wait on the
// same master in the same run, in interleaved rounds. Each wait round
// reports its rate and its ratio to the plain round before it; the last
// sub-benchmark reports the median ratio. Run:
//
//	go test -run '^$' -bench DeductWait -benchtime 2s ./stock/redisstock/
func BenchmarkDeductWait(b *testing.B) {
	r := startReplicated(b)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: r.master.Addr(), PoolSize: waitBenchClients})
	defer c.Close()
	plain, err := redisstock.New(c, redisstock.Config{Prefix: "plain", Retention: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	wait, err := redisstock.New(c, redisstock.Config{Prefix: "wait", Retention: time.Minute, WaitReplicas: 1})
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range []*redisstock.Store{plain, wait} {
		if err := s.PutOnSale(ctx, stock.Listing{SKU: "hot", Units: stock.MaxUnits, PerUserLimit: 1 << 40, HoldTTL: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
	var seq atomic.Int64
	run := func(b *testing.B, s *redisstock.Store) float64 {
		b.SetParallelism(max(waitBenchClients/runtime.GOMAXPROCS(0), 1))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n := seq.Add(1)
				o := stock.Order{ID: "o" + strconv.FormatInt(n, 10), UserID: "u" + strconv.FormatInt(n%100_000, 10), Items: []stock.Item{{SKU: "hot", Qty: 1}}}
				if err := s.Deduct(ctx, o); err != nil {
					b.Error(err)
					return
				}
			}
		})
		rate := float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(rate, "deducts/s")
		return rate
	}
	ratios := make([]float64, waitBenchRounds)
	for round := 1; round <= waitBenchRounds; round++ {
		var plainRate float64
		b.Run(fmt.Sprintf("plain/round%d", round), func(b *testing.B) { plainRate = run(b, plain) })
		b.Run(fmt.Sprintf("wait1/round%d", round), func(b *testing.B) {
			rate := run(b, wait)
			if plainRate > 0 {
				ratios[round-1] = rate / plainRate
				b.ReportMetric(ratios[round-1], "ratio")
			}
		})
	}
	b.Run("median", func(b *testing.B) {
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "ratio")
	})
}
