package stockguard_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// Redis loses its data (a restart without persistence, a failover, a
// flush) while an order is held; the Shop's reconciliation rebuilds the
// gate from the record, which counts the order's units as taken. The
// buyer then cancels: the Shop's Revert reaches the flow, whose gate does
// not know the order (ErrUnknownOrder) and whose record returns its units.
// They come back at the record alone and must be reported: unless a Drift
// names the SKU, Run does not repair it and the gate sells 3 units fewer
// than the record has until the next full pass (a minute by default) - in
// a flash sale, buyers told "sold out" with units on the shelf.
//
// The promise: stock/tiered's doc ("every unit ... the record's own
// reclaimer returns for an order the gate never had, is reported to
// Config.OnDrift"), the CHANGELOG's fix of its siblings ("units returned
// at the record alone ... were not reported, so the gate sold less than
// the record had until a full pass; they go to Config.OnDrift"), and Run's
// doc, which repairs "the SKUs a drift names". The same return made by
// the follow-up, the record's reclaimer, a late Confirm or the record
// path is reported; so is the flow's own Revert.
func TestShopRevertOfAnOrderTheGateLostIsReported(t *testing.T) {
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
	if err := shop.Revert(ctx, "o1"); err != nil { // the buyer cancels
		t.Fatal(err)
	}
	g, r := levels(t, shop.Gate()), levels(t, shop.Record())
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(drifts, func(d tiered.Drift) bool { return slices.Contains(d.SKUs, "phone") }) {
		t.Fatalf("the cancel returned %d units at the record alone (record %d, gate %d available) and no drift names the SKU (reports: %+v): Run never gives the gate its units back",
			r.Available-g.Available, r.Available, g.Available, drifts)
	}
}

// The same for a partial refund: an order paid before Redis lost its data
// is partly refunded once the gate was rebuilt. The flow's RevertItems
// finds the order unknown at the gate and gives the unit back at the
// record alone, and a Drift must name the SKU, or the gate sells the
// refunded unit only after the next full pass.
//
// The promise: as above (stock/tiered's doc and the CHANGELOG's
// "they go to Config.OnDrift"), and the README's partial refunds ("units
// of a confirmed order [go back] as a refund's").
func TestShopRefundOfAnOrderTheGateLostIsReported(t *testing.T) {
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
	if err := shop.Confirm(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	mr.FlushAll()                                               // Redis lost its data
	if _, err := shop.Reconciler().RepairAll(ctx); err != nil { // Run's pass after the loss
		t.Fatal(err)
	}
	mu.Lock()
	drifts = nil
	mu.Unlock()
	r := stock.Return{OpID: "refund-1", OrderID: "o1", Items: []stock.Item{{SKU: "phone", Qty: 1}}}
	if err := shop.RevertItems(ctx, r); err != nil {
		t.Fatal(err)
	}
	g, rec := levels(t, shop.Gate()), levels(t, shop.Record())
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(drifts, func(d tiered.Drift) bool { return slices.Contains(d.SKUs, "phone") }) {
		t.Fatalf("the refund returned %d unit at the record alone (record %d, gate %d available) and no drift names the SKU (reports: %+v)",
			rec.Available-g.Available, rec.Available, g.Available, drifts)
	}
}
