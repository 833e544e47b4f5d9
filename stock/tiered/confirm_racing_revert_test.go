package tiered_test

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

// Confirm and Revert race on held multi-SKU orders, a minute before their
// deadline with the clock still: a Confirm answers nil or
// stock.ErrOrderClosed, never stock.ErrHoldExpired, and every order ends
// sold (confirmed) or returned by the Revert (reverted, or refunded),
// never expired; the books balance. A Confirm that found the gate closed
// by the Revert returned the record's copy as its deadline would, and the
// order ended expired.
func TestConfirmRacingRevertNeverExpiresTheOrder(t *testing.T) {
	for _, p := range readerPairs() {
		t.Run(p.redis+"+"+p.db, func(t *testing.T) {
			ctx := t.Context()
			clock := stocktest.NewClock(stocktest.Epoch)
			m, _, _ := readerShop(t, p, clock)
			const orders = 30
			for _, s := range []string{"a", "b"} {
				if err := m.PutOnSale(ctx, stock.Listing{SKU: s, Units: 500, HoldTTL: time.Minute}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range orders {
				o := stock.Order{ID: fmt.Sprintf("o%d", i), Items: []stock.Item{{SKU: "a", Qty: 2}, {SKU: "b", Qty: 1}}}
				if err := retryAsAllowed(func() error { return m.Deduct(ctx, o) }); err != nil {
					t.Fatalf("Deduct: %v", err)
				}
			}
			var wg sync.WaitGroup
			confirmed := make([]atomic.Bool, orders)
			for i := range orders {
				id := fmt.Sprintf("o%d", i)
				for range 2 {
					wg.Go(func() {
						err := retryAsAllowed(func() error { return m.Confirm(ctx, id) })
						switch {
						case err == nil:
							confirmed[i].Store(true)
						case errors.Is(err, stock.ErrOrderClosed):
						default:
							t.Errorf("Confirm %s (deadline a minute away, clock still) racing Revert: %v, want nil or ErrOrderClosed", id, err)
						}
					})
				}
				if i%2 == 0 {
					wg.Go(func() {
						if err := retryAsAllowed(func() error { return m.Revert(ctx, id) }); err != nil {
							t.Errorf("Revert %s: %v", id, err)
						}
					})
				}
			}
			wg.Wait()
			var sold int64
			for i := range orders {
				if i%2 == 1 {
					sold++
					if !confirmed[i].Load() {
						t.Fatalf("o%d: never confirmed", i)
					}
				}
			}
			for i := range orders {
				in, err := m.Orders(ctx, []string{fmt.Sprintf("o%d", i)})
				if err != nil {
					t.Fatal(err)
				}
				st := in[0].State
				if (i%2 == 1 && st != stock.StateConfirmed) || (i%2 == 0 && st != stock.StateReverted && st != stock.StateRefunded) {
					t.Errorf("o%d ends %v", i, st)
				}
			}
			for _, c := range []struct {
				sku   string
				units int64
			}{{"a", 2}, {"b", 1}} {
				lv, err := m.Levels(ctx, c.sku)
				if err != nil {
					t.Fatal(err)
				}
				if lv.Available != 500-c.units*sold || lv.Held != 0 || lv.Sold != c.units*sold {
					t.Fatalf("%s: available/held/sold = %d/%d/%d, want %d/0/%d", c.sku, lv.Available, lv.Held, lv.Sold, 500-c.units*sold, c.units*sold)
				}
				if a, err := m.Available(ctx, c.sku); err != nil || a != 500-c.units*sold {
					t.Fatalf("Available(%s) = %d, %v; want %d", c.sku, a, err, 500-c.units*sold)
				}
			}
		})
	}
}
