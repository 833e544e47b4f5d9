package memstock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Repeats of one order ID, one return OpID and one restock OpID racing
// each other apply once, and every Levels read in between conserves the
// units (available + held + sold == units put on sale and restocked so
// far, within what the reader could have seen).
func TestRaceRepeatsApplyOnce(t *testing.T) {
	ctx := context.Background()
	m, _ := raceStore(t, stock.Listing{SKU: "a", Units: 100, PerUserLimit: 50, HoldTTL: time.Minute})
	const n = 64
	var wg sync.WaitGroup
	var deducted, returned, restocked, bad atomic.Int64
	o := stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 10}}}
	if err := m.Deduct(ctx, stock.Order{ID: "o0", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 10}}}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		wg.Go(func() {
			if err := m.Deduct(ctx, o); err == nil {
				deducted.Add(1)
			} else {
				t.Errorf("deduct: %v", err)
			}
		})
		wg.Go(func() {
			err := m.RevertItems(ctx, stock.Return{OpID: "p", OrderID: "o0", Items: []stock.Item{{SKU: "a", Qty: 4}}})
			if err == nil {
				returned.Add(1)
			} else {
				t.Errorf("revertitems: %v", err)
			}
		})
		wg.Go(func() {
			if err := m.Restock(ctx, stock.Restock{OpID: "r", SKU: "a", Units: 7}); err == nil {
				restocked.Add(1)
			} else {
				t.Errorf("restock: %v", err)
			}
		})
		wg.Go(func() {
			lv, err := m.Levels(ctx, "a")
			if err != nil {
				t.Error(err)
				return
			}
			if tot := lv.Available + lv.Held + lv.Sold; tot != 100 && tot != 107 {
				bad.Add(1)
				t.Errorf("levels %+v sum %d", lv, tot)
			}
		})
		if i == n/2 {
			wg.Go(func() {
				if err := m.Confirm(ctx, "o0"); err != nil && !errors.Is(err, stock.ErrHoldExpired) {
					t.Errorf("confirm: %v", err)
				}
			})
		}
	}
	wg.Wait()
	lv, _ := m.Levels(ctx, "a")
	if lv.Available != 100+7-10-6 || lv.Held+lv.Sold != 16 {
		t.Fatalf("levels %+v", lv)
	}
	if u, _ := m.UserUnits(ctx, "a", "u"); u != 16 {
		t.Fatalf("user units %d, want 16", u)
	}
	if deducted.Load() != n || returned.Load() != n || restocked.Load() != n || bad.Load() != 0 {
		t.Fatalf("repeats answered nil %d, %d, %d times of %d", deducted.Load(), returned.Load(), restocked.Load(), n)
	}
}
