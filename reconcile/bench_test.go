package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// BenchmarkRepairAll100k reconciles 100,000 SKUs on the local Redis and
// MariaDB (skipped unless STOCKGUARD_REDIS_ADDR and STOCKGUARD_MYSQL_DSN
// are set). 1% of the SKUs have drifted. It reports SKUs/s and the time of
// one full pass, and the same pass's cost relative to a bare pipelined
// HGETALL of every SKU's state (baseline-x), measured in the same run.
//
//	go test -run '^$' -bench RepairAll100k -benchtime 3x ./reconcile/
func BenchmarkRepairAll100k(b *testing.B) {
	const n = 100_000
	var p pair
	for _, q := range pairs() {
		if q.name == "redis+mariadb" {
			p = q
		}
	}
	testdb.Need(b, p.needs...)
	w := newWorld(b, p, reconcile.Config{MaxAutoFix: -1})
	ctx := context.Background()
	skus := make([]string, n)
	ls := make([]stock.Listing, n)
	for i := range skus {
		skus[i] = fmt.Sprintf("sku%06d", i)
		ls[i] = stock.Listing{SKU: skus[i], Units: 1000}
	}
	start := time.Now()
	insertRows(b, w, skus)
	if err := w.gate.PutOnSaleMany(ctx, ls); err != nil {
		b.Fatal(err)
	}
	b.Logf("setup of %d SKUs on both sides: %v", n, time.Since(start))
	drift := func() {
		for i := 0; i < n; i += 100 {
			if _, err := w.gate.Adjust(ctx, skus[i], fenceOf(b, w, skus[i]), -1); err != nil {
				b.Fatal(err)
			}
		}
	}
	var pass, base time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		drift()
		b.StartTimer()
		t0 := time.Now()
		rep, err := w.rec.RepairAll(ctx)
		pass += time.Since(t0)
		if err != nil || rep.Checked != n || rep.Count(reconcile.ActionCorrected) != n/100 {
			b.Fatalf("RepairAll: %v, checked %d, corrected %d", err, rep.Checked, rep.Count(reconcile.ActionCorrected))
		}
		t1 := time.Now()
		hgetall(b, w, skus)
		base += time.Since(t1)
	}
	b.ReportMetric(float64(n)*float64(b.N)/pass.Seconds(), "SKUs/s")
	b.ReportMetric(pass.Seconds()/float64(b.N), "s/pass")
	b.ReportMetric(pass.Seconds()/base.Seconds(), "baseline-x")
}

// insertRows fills the stock table with multi-row INSERTs.
func insertRows(b *testing.B, w *world, skus []string) {
	db := w.recordDB
	for start := 0; start < len(skus); start += 2000 {
		batch := skus[start:min(start+2000, len(skus))]
		var sb strings.Builder
		args := make([]any, 0, len(batch))
		sb.WriteString("INSERT INTO `" + w.table + "` (sku, available, held, sold, version, per_user_limit, hold_ttl_ms) VALUES ")
		for i, s := range batch {
			if i > 0 {
				sb.WriteString(",")
			}
			sb.WriteString("(?, 1000, 0, 0, 0, 0, 900000)")
			args = append(args, s)
		}
		if _, err := db.Exec(sb.String(), args...); err != nil {
			b.Fatal(err)
		}
	}
}

func fenceOf(b *testing.B, w *world, sku string) redisstock.Fence {
	st, err := w.gate.Inspect(context.Background(), []string{sku})
	if err != nil {
		b.Fatal(err)
	}
	return st[0].Fence
}

// hgetall is the baseline: every SKU's state hash, 1000 per pipeline.
func hgetall(b *testing.B, w *world, skus []string) {
	ctx := context.Background()
	for start := 0; start < len(skus); start += 1000 {
		_, err := w.rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, s := range skus[start:min(start+1000, len(skus))] {
				p.HGetAll(ctx, w.prefix+":{"+s+"}:state")
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWarmUp20k warms up 20,000 SKUs on sale at both sides, on the
// local Redis and MariaDB (skipped unless STOCKGUARD_REDIS_ADDR and
// STOCKGUARD_MYSQL_DSN are set), with 1% or all of them one unit off at
// the gate: a SKU that is off is read twice (the second reading bounds a
// rise), and every written batch is read again once more. It reports
// SKUs/s, the time of one WarmUp, and its cost relative to a bare
// pipelined HGETALL of every SKU's state (baseline-x), measured in the
// same run.
//
//	go test -run '^$' -bench WarmUp20k -benchtime 3x ./reconcile/
func BenchmarkWarmUp20k(b *testing.B) {
	const n = 20_000
	var p pair
	for _, q := range pairs() {
		if q.name == "redis+mariadb" {
			p = q
		}
	}
	testdb.Need(b, p.needs...)
	for _, every := range []int{100, 1} {
		b.Run(fmt.Sprintf("off=%d%%", 100/every), func(b *testing.B) {
			w := newWorld(b, p, reconcile.Config{MaxAutoFix: -1})
			ctx := context.Background()
			skus := make([]string, n)
			ls := make([]stock.Listing, n)
			for i := range skus {
				skus[i] = fmt.Sprintf("sku%06d", i)
				ls[i] = stock.Listing{SKU: skus[i], Units: 1000}
			}
			insertRows(b, w, skus)
			if err := w.gate.PutOnSaleMany(ctx, ls); err != nil {
				b.Fatal(err)
			}
			var pass, base time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for i := 0; i < n; i += every {
					if _, err := w.gate.Adjust(ctx, skus[i], fenceOf(b, w, skus[i]), -1); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				t0 := time.Now()
				rep, err := w.rec.WarmUp(ctx, nil, false)
				pass += time.Since(t0)
				if err != nil || rep.Checked != n || rep.Count(reconcile.ActionRebuilt) != n {
					b.Fatalf("WarmUp: %v, checked %d, written %d", err, rep.Checked, rep.Count(reconcile.ActionRebuilt))
				}
				t1 := time.Now()
				hgetall(b, w, skus)
				base += time.Since(t1)
			}
			b.ReportMetric(float64(n)*float64(b.N)/pass.Seconds(), "SKUs/s")
			b.ReportMetric(pass.Seconds()/float64(b.N), "s/pass")
			b.ReportMetric(pass.Seconds()/base.Seconds(), "baseline-x")
		})
	}
}
