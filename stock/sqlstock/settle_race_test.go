package sqlstock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Every call that ends or shrinks a hold (Confirm, Revert, RevertHeld,
// two partial returns, ExtendHold, the reclaimer) races every other on
// the same orders, before and after their deadline. Units are conserved
// exactly: per SKU, available + held + sold == units put on sale, and the
// ledger's orders account for held + sold to the unit.
func TestSettleCallsRaceConserveUnits(t *testing.T) {
	forEach(t, settleRace)
}

func settleRace(t *testing.T, b backend, st sqlstock.Strategy) {
	ctx := context.Background()
	clock := stocktest.NewClock(time.Unix(1_800_000_000, 0))
	s := newStore(t, b.open(t), sqlstock.Config{Strategy: st, Dialect: b.dialect, Clock: clock, MaxAttempts: 1000})
	const units, orders = 1000, 24
	for _, sku := range []string{"A", "B"} {
		if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: units, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	ids := make([]string, orders)
	for i := range ids {
		ids[i] = fmt.Sprintf("o%d", i)
		if err := s.Deduct(ctx, stock.Order{ID: ids[i], UserID: "u", Items: []stock.Item{{SKU: "A", Qty: 3}, {SKU: "B", Qty: 2}}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(phase string, wantHeld0 bool) {
		t.Helper()
		infos, err := s.Orders(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		takes := map[string][2]int64{} // held, sold by the ledger
		for _, in := range infos {
			ret := map[string]int64{}
			for _, r := range in.Returned {
				ret[r.SKU] = r.Qty
			}
			for _, it := range in.Items {
				v := takes[it.SKU]
				switch in.State {
				case stock.StateHeld:
					v[0] += it.Qty - ret[it.SKU]
				case stock.StateConfirmed:
					v[1] += it.Qty - ret[it.SKU]
				}
				takes[it.SKU] = v
			}
		}
		for _, sku := range []string{"A", "B"} {
			lv, err := s.Levels(ctx, sku)
			if err != nil {
				t.Fatal(err)
			}
			if lv.Available+lv.Held+lv.Sold != units || lv.Held != takes[sku][0] || lv.Sold != takes[sku][1] || (wantHeld0 && lv.Held != 0) {
				t.Errorf("%s: %s levels %+v; ledger held %d sold %d of %d", phase, sku, lv, takes[sku][0], takes[sku][1], units)
			}
		}
	}
	race := func(reclaim bool) {
		var wg sync.WaitGroup
		for i, id := range ids {
			calls := []func(){
				func() { _ = s.Confirm(ctx, id) },
				func() { _ = s.Revert(ctx, id) },
				func() { _, _ = s.RevertHeld(ctx, id) },
				func() {
					_ = s.RevertItems(ctx, stock.Return{OpID: "r1", OrderID: id, Items: []stock.Item{{SKU: "A", Qty: 1}}})
				},
				func() {
					_ = s.RevertItems(ctx, stock.Return{OpID: "r2", OrderID: id, Items: []stock.Item{{SKU: "B", Qty: 2}, {SKU: "A", Qty: 1}}})
				},
				func() { _ = s.ExtendHold(ctx, id, clock.Now().Add(30*time.Minute)) },
			}
			if i%2 == 0 { // half the orders skip the full revert
				calls = append(calls[:1], calls[3:]...)
			}
			for _, c := range calls {
				wg.Add(1)
				go func() { defer wg.Done(); c() }()
			}
		}
		if reclaim {
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						_, _ = s.ReclaimExpired(ctx, 7)
					}
				}()
			}
		}
		wg.Wait()
	}
	race(false)
	check("before the deadline", false)
	clock.Advance(2 * time.Hour)
	race(true)
	for {
		out, err := s.ReclaimExpired(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 {
			break
		}
	}
	check("after the deadline", false)
}
