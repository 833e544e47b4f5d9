package sqlstock_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Reclaim moves due orders in batches (more orders than one statement
// takes, two-line orders, an order confirmed before the pass): with two
// reclaimers at once, every due line comes back exactly once, whole
// orders in order ID then line order, and the units return exactly.
func TestReclaimInBatchesExactlyOnce(t *testing.T) {
	const orders = 1100
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			clock := stocktest.NewClock(stocktest.Epoch)
			s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect, Clock: clock})
			ctx := t.Context()
			for _, sku := range []string{"a", "b"} {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10_000, HoldTTL: time.Minute}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range orders {
				o := stock.Order{ID: fmt.Sprintf("o%04d", i), UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}}
				if i%2 == 0 {
					o.Items = append(o.Items, stock.Item{SKU: "b", Qty: 2})
				}
				if err := s.Deduct(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Confirm(ctx, "o0000"); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Hour)
			var (
				wg  sync.WaitGroup
				got [2][]stock.Reclaimed
			)
			for k := range got {
				wg.Go(func() {
					var err error
					if got[k], err = s.ReclaimExpired(ctx, 10*orders); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			for _, g := range got {
				if !slices.IsSortedFunc(g, func(x, y stock.Reclaimed) int { // a line's number is its SKU's rank
					return cmp.Or(strings.Compare(x.OrderID, y.OrderID), strings.Compare(x.SKU, y.SKU))
				}) {
					t.Errorf("result not sorted by order ID, then line")
				}
			}
			lines := map[string]int64{}
			for _, r := range append(got[0], got[1]...) {
				key := r.OrderID + "/" + r.SKU
				if lines[key] != 0 {
					t.Fatalf("%s reclaimed twice", key)
				}
				lines[key] = r.Qty
			}
			if want := orders - 1 + orders/2 - 1; len(lines) != want {
				t.Errorf("%d lines reclaimed, want %d", len(lines), want)
			}
			if lines["o0000/a"] != 0 {
				t.Errorf("a confirmed order was reclaimed")
			}
			for sku, want := range map[string]stock.Levels{"a": {Available: 9_999, Sold: 1}, "b": {Available: 9_998, Sold: 2}} {
				lv, err := s.Levels(ctx, sku)
				if err != nil || lv.Available != want.Available || lv.Held != 0 || lv.Sold != want.Sold {
					t.Errorf("%s: %+v, %v; want %+v", sku, lv, err, want)
				}
			}
			if again, err := s.ReclaimExpired(ctx, orders); err != nil || len(again) != 0 {
				t.Errorf("second pass: %d lines, %v; want none", len(again), err)
			}
		})
	}
}
