package stockguard_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// Redis loses its data two hours after a restock that reached both
// tiers, and the merchant puts the SKU on sale again with the record's
// count. The gate and the record agree (5100 each), but the new gate state
// has no marker of the restock's operation ID, so a pass within its
// RestockWindow reads the restock as in flight: its target is the
// record's count less the restock, a correction of -5000, larger than
// MaxAutoFix, which the pass leaves (ActionLeft: nothing is changed). It
// completed the restock at the gate all the same, 5000 units above the
// record.
func TestShopPassAfterARelistDoesNotRestockTwice(t *testing.T) {
	shop, mr, clock := shopOn(t, stockguard.Config{})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 100, HoldTTL: 15 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := shop.Restock(ctx, stock.Restock{OpID: "truck-1", SKU: "phone", Units: 5000}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour)
	mr.FlushAll() // Redis lost its data
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 5100, HoldTTL: 15 * time.Minute}); err != nil {
		t.Fatal(err) // put on sale again, at both tiers, with the count the record has
	}
	if g, r := levels(t, shop.Gate()), levels(t, shop.Record()); g.Available != 5100 || r.Available != 5100 {
		t.Fatalf("after the relist: gate %d, record %d available, want 5100 each", g.Available, r.Available)
	}
	rep, err := shop.Reconciler().RepairAll(ctx) // Run's full pass
	if err != nil {
		t.Logf("pass: %v", err)
	}
	g, r := levels(t, shop.Gate()), levels(t, shop.Record())
	if g.Available > r.Available {
		var acts []reconcile.Action
		for _, c := range rep.Corrections {
			acts = append(acts, c.Action)
		}
		t.Fatalf("after a pass: gate %d available, record %d: the gate sells %d units the record does not have (pass actions %v: %+v)",
			g.Available, r.Available, g.Available-r.Available, acts, rep.Corrections)
	}
}
