package stockguard_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A listing whose hold time is more than stock.MaxHoldTTL less the flow's
// grace (with the default grace, the hold time again: more than 15 of the
// 30 days) gets a record hold capped at stock.MaxHoldTTL
// (tiered.Config.RecordHold). The Shop's reconciler maps the record's hold
// time back to the gate's with the flow's GateHold, which is not the
// inverse of the capped RecordHold: it finds the gate's (correct) hold
// time "different" from the record's and relists the gate with a shorter
// one. No outage, no flush: the first full pass Run makes does it. From
// then on every order of the SKU is returned days before the listing's
// hold time, and the buyer who pays within it is refused.
//
// Broken promise: the README ("the gate's hold time when a reconcile pass
// rebuilds a gate from the record ... derived by stockguard.New"), the
// CHANGELOG's fix of "a hold time doubled after a rebuild" (its sibling:
// a hold time cut by a plain pass), and the stock contract (a Deduct's
// deadline is now plus the SKU's hold time).
func TestShopReconcileKeepsALongHoldTime(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		hold  time.Duration
	}{
		{"default grace", 0, 20 * 24 * time.Hour},
		{"grace 1h", time.Hour, stock.MaxHoldTTL - 30*time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shop, _, clock := shopOn(t, stockguard.Config{Flow: tiered.Config{RecordGrace: tc.grace}})
			ctx := t.Context()
			if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: tc.hold}); err != nil {
				t.Fatal(err)
			}
			if lv := levels(t, shop.Gate()); lv.HoldTTL != tc.hold {
				t.Fatalf("gate hold after PutOnSale: %v, want %v", lv.HoldTTL, tc.hold)
			}
			rep, err := shop.Reconciler().RepairAll(ctx) // Run's first full pass
			if err != nil {
				t.Fatal(err)
			}
			if lv := levels(t, shop.Gate()); lv.HoldTTL != tc.hold {
				t.Errorf("gate hold after a reconcile pass with nothing to repair: %v, want the listing's %v (corrections %+v)",
					lv.HoldTTL, tc.hold, rep.Corrections)
			}
			if err := shop.Deduct(ctx, order("o1", 1)); err != nil {
				t.Fatal(err)
			}
			got, err := shop.Orders(ctx, []string{"o1"})
			if err != nil {
				t.Fatal(err)
			}
			if want := clock.Now().Add(tc.hold); !got[0].Deadline.Equal(want) {
				t.Errorf("order after the pass: deadline %v, want now plus the listing's hold time (%v)", got[0].Deadline, want)
			}
		})
	}
}
