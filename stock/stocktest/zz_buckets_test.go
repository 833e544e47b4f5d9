package stocktest_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A SKU split into buckets keeps the Manager contract: sold out is exact,
// limits are exact, and the counts balance.
func TestZZBucketsKeepTheContract(t *testing.T) {
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		zzSale(t, m, stock.Listing{SKU: "h", Units: 10, Buckets: 4, HoldTTL: time.Minute})
		// One buyer takes 7 of 10, though no one bucket has 7.
		zzIs(t, zzRetry(func() error { return m.Deduct(ctx, zzOrder("big", "", zzItem("h", 7))) }), nil, "Deduct 7 of 10")
		zzWant(t, m, "h", 3, 7, 0)
		zzIs(t, zzRetry(func() error { return m.Revert(ctx, "big") }), nil, "Revert big")
		zzWant(t, m, "h", 10, 0, 0)
		zzSale(t, m, stock.Listing{SKU: "h", Units: 10, PerUserLimit: 3, HoldTTL: time.Minute})
		var ok, sold atomic.Int64
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				o := zzOrder(fmt.Sprintf("o%d", i), fmt.Sprintf("u%d", i%5), zzItem("h", 1))
				err := zzRetry(func() error { return m.Deduct(ctx, o) })
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, stock.ErrSoldOut), errors.Is(err, stock.ErrLimitReached):
					sold.Add(1)
				default:
					t.Errorf("Deduct: %v", err)
				}
			})
		}
		wg.Wait()
		if ok.Load() != 10 {
			t.Fatalf("%d buyers got a unit of 10 (5 users, limit 3 each)", ok.Load())
		}
		zzWant(t, m, "h", 0, 10, 0)
		if rd, ok := m.(stock.OrderReader); ok {
			var sum int64
			for u := range 5 {
				n, err := rd.UserUnits(ctx, "h", fmt.Sprintf("u%d", u))
				if err != nil || n > 3 {
					t.Fatalf("UserUnits u%d = %d, %v", u, n, err)
				}
				sum += n
			}
			if sum != 10 {
				t.Fatalf("users hold %d units, want 10", sum)
			}
		}
		zzIs(t, m.Restock(ctx, stock.Restock{OpID: "r1", SKU: "h", Units: 5}), nil, "Restock")
		zzWant(t, m, "h", 5, 10, 0)
		zzSale(t, m, stock.Listing{SKU: "h", Units: 4, HoldTTL: time.Minute})
		zzWant(t, m, "h", 4, 10, 0)
		clock.Advance(time.Minute)
		r := m.(stock.Reclaimer)
		for {
			got, err := r.ReclaimExpired(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				break
			}
		}
		zzWant(t, m, "h", 14, 0, 0)
		zzIs(t, zzRetry(func() error { return m.Deduct(ctx, zzOrder("all", "", zzItem("h", 14))) }), nil, "Deduct all 14")
		zzIs(t, zzRetry(func() error { return m.Deduct(ctx, zzOrder("one", "", zzItem("h", 1))) }), stock.ErrSoldOut, "Deduct past")
		zzWant(t, m, "h", 0, 14, 0)
	})
}
