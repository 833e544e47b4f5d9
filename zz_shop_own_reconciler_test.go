package stockguard_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// The Shop refuses Reconcile.DryRun and says: "use a Reconciler of your
// own for dry runs". A Reconciler wired by hand over the Shop's gate and
// record, as its docs show (reconcile.New(gate, record, cfg)), must derive
// the gate hold time from its partners or refuse the wiring (issue 23:
// "a part wired by hand must either derive the setting itself or refuse a
// wiring that contradicts its partner"). With a RecordGrace set on the
// Shop, it does neither: a dry run reports every SKU out of agreement,
// and a pass gives the gate a hold time the listing never had.
func TestZZOwnReconcilerOverAShopsStoresKeepsTheHoldTime(t *testing.T) {
	shop, _, clock := shopOn(t, stockguard.Config{Flow: tiered.Config{RecordGrace: 5 * time.Minute}})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	dry, err := reconcile.New(shop.Gate(), shop.Record(), reconcile.Config{DryRun: true, Clock: clock})
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	rep, err := dry.RepairAll(ctx)
	t.Logf("dry run: %+v, %v", rep.Corrections, err)
	if err != nil || len(rep.Corrections) > 0 {
		for _, c := range rep.Corrections {
			t.Errorf("dry run over a shop in agreement reports %s: %+v", c.SKU, c)
		}
	}
	own, err := reconcile.New(shop.Gate(), shop.Record(), reconcile.Config{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.RepairAll(ctx); err != nil {
		t.Logf("pass: %v", err)
	}
	if lv := levels(t, shop.Gate()); lv.HoldTTL != 10*time.Minute {
		t.Errorf("gate hold time after a pass of a Reconciler of one's own: %v, want the listing's 10m", lv.HoldTTL)
	}
}
