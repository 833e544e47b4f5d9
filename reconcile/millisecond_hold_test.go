package reconcile_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// Both tiers keep hold times in whole milliseconds. A listing whose hold
// time is not a whole number of them (an hour split seven ways, which
// stock.Listing's Validate takes) keeps 514285ms at the gate and, behind
// the default tiered flow, 1028571ms at the record: the tiers are as the
// flow wrote them, so a pass finds them in agreement (no settings
// correction), and a gate rebuilt from the record keeps the same hold time.
func TestRepairTakesASubMillisecondHoldTimeAsTheTiersKeepIt(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Hour / 7}), "put on sale")
		if g, rec := w.levels("a"); g.HoldTTL != 514285*time.Millisecond || rec.HoldTTL != 1028571*time.Millisecond {
			t.Fatalf("gate hold %v, record hold %v; want 8m34.285s, 17m8.571s", g.HoldTTL, rec.HoldTTL)
		}
		r, err := reconcile.New(w.gate, w.record, reconcile.Config{GateHold: w.flow.GateHold, DryRun: true})
		w.must(err, "New")
		rep, err := r.Repair(w.ctx, []string{"a"})
		if err != nil || len(rep.Corrections) != 0 {
			t.Fatalf("dry-run Repair: %v, %+v; want agreement", err, rep.Corrections)
		}
		r, err = reconcile.New(w.gate, w.record, reconcile.Config{GateHold: w.flow.GateHold})
		w.must(err, "New")
		rep, err = r.Repair(w.ctx, []string{"a"})
		if err != nil || len(rep.Corrections) != 0 {
			t.Fatalf("Repair: %v, %+v; want agreement", err, rep.Corrections)
		}
		w.flush()
		rep, err = r.Repair(w.ctx, []string{"a"})
		w.must(err, "Repair after a flush")
		if rep.Count(reconcile.ActionRebuilt) != 1 {
			t.Fatalf("Repair after a flush %+v, want a rebuild", rep.Corrections)
		}
		if g, _ := w.levels("a"); g.HoldTTL != 514285*time.Millisecond {
			t.Fatalf("gate hold after the rebuild %v, want 8m34.285s", g.HoldTTL)
		}
		rep, err = r.Repair(w.ctx, []string{"a"})
		if err != nil || len(rep.Corrections) != 0 {
			t.Fatalf("Repair after the rebuild: %v, %+v; want agreement", err, rep.Corrections)
		}
	})
}
