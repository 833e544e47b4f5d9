package reconcile_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// The millisecond comparison (agrees, CHANGELOG: hold times "are now
// compared as the gate keeps them, truncated to the millisecond") covers
// a listing's MaxHoldTTL too: a listing of 2h/7, max 4h/7, put on sale by
// the default tiered flow, keeps 1028571ms (max 2057142ms) at the gate and
// 2057142ms (max 3085714ms) at the record, as the flow wrote them. A pass
// finds them in agreement: no settings correction.
func TestRepairTakesASubMillisecondMaxHoldAsTheTiersKeepIt(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 2 * time.Hour / 7, MaxHoldTTL: 4 * time.Hour / 7}), "put on sale")
		r, err := reconcile.New(w.gate, w.record, reconcile.Config{GateHold: w.flow.GateHold, DryRun: true})
		w.must(err, "New")
		rep, err := r.Repair(w.ctx, []string{"a"})
		if err != nil || len(rep.Corrections) != 0 {
			t.Fatalf("dry-run Repair: %v, %+v; want agreement", err, rep.Corrections)
		}
	})
}
