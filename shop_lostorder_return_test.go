package stockguard_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// lostOrder sells o1 (3 units of phone), confirmed if confirm; then Redis
// loses its data and the Shop's reconciliation rebuilds the gate from the
// record, which counts the order's units as taken. It returns the shop and
// a function that reports whether a Drift since then named phone, and
// describes the two tiers' levels and the reports.
func lostOrder(t *testing.T, confirm bool) (*stockguard.Shop, func() (bool, string)) {
	var mu sync.Mutex
	var drifts []tiered.Drift
	shop, mr, _ := shopOn(t, stockguard.Config{Flow: tiered.Config{OnDrift: func(d tiered.Drift) {
		mu.Lock()
		defer mu.Unlock()
		drifts = append(drifts, d)
	}}})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 15 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := shop.Deduct(ctx, order("o1", 3)); err != nil {
		t.Fatal(err)
	}
	if confirm {
		if err := shop.Confirm(ctx, "o1"); err != nil {
			t.Fatal(err)
		}
	}
	mr.FlushAll()                                               // Redis lost its data
	if _, err := shop.Reconciler().RepairAll(ctx); err != nil { // Run's pass after the loss
		t.Fatal(err)
	}
	if g := levels(t, shop.Gate()); g.Available != 7 {
		t.Fatalf("rebuilt gate: %+v, want 7 available", g)
	}
	mu.Lock()
	drifts = nil
	mu.Unlock()
	return shop, func() (bool, string) {
		g, r := levels(t, shop.Gate()), levels(t, shop.Record())
		mu.Lock()
		defer mu.Unlock()
		named := slices.ContainsFunc(drifts, func(d tiered.Drift) bool { return slices.Contains(d.SKUs, "phone") })
		return named, fmt.Sprintf("record %d, gate %d available; reports %+v", r.Available, g.Available, drifts)
	}
}

// A held order the gate lost (Redis lost its data; the gate was rebuilt
// from the record) is cancelled: the flow's gate does not know it, and the
// record returns its units at the record alone. A Drift names the SKU, so
// Run repairs it; without it the gate sold 3 units fewer than the record
// had until the next full pass.
func TestShopRevertOfAnOrderTheGateLostIsReported(t *testing.T) {
	shop, reported := lostOrder(t, false)
	if err := shop.Revert(t.Context(), "o1"); err != nil { // the buyer cancels
		t.Fatal(err)
	}
	if ok, state := reported(); !ok {
		t.Fatalf("the cancel returned units at the record alone and no drift names the SKU: %s", state)
	}
}

// The same for a partial refund of an order paid before Redis lost its
// data: the flow's RevertItems gives the unit back at the record alone,
// and a Drift names the SKU.
func TestShopRefundOfAnOrderTheGateLostIsReported(t *testing.T) {
	shop, reported := lostOrder(t, true)
	r := stock.Return{OpID: "refund-1", OrderID: "o1", Items: []stock.Item{{SKU: "phone", Qty: 1}}}
	if err := shop.RevertItems(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if ok, state := reported(); !ok {
		t.Fatalf("the refund returned a unit at the record alone and no drift names the SKU: %s", state)
	}
}
