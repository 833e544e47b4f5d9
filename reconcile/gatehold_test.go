package reconcile_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// Behind the tiered flow the record holds longer than the gate: a gate
// rebuilt from the record gets the gate's hold time back, not the record's.
func TestWarmUpGivesTheGateItsOwnHoldTime(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}), "put on sale")
		if _, rec := w.levels("a"); rec.HoldTTL != 2*time.Minute {
			t.Fatalf("record hold %v, want 2m (tiered doubles it)", rec.HoldTTL)
		}
		r, err := reconcile.New(w.gate, w.record, reconcile.Config{GateHold: w.flow.GateHold})
		w.must(err, "New")
		w.must(w.gate.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 3, HoldTTL: time.Hour}), "stale gate")
		_, err = r.WarmUp(w.ctx, []string{"a"}, false)
		w.must(err, "WarmUp")
		if g, _ := w.levels("a"); g.HoldTTL != time.Minute || g.Available != 10 {
			t.Fatalf("gate after warm-up: %d units, hold %v; want 10 units, hold 1m", g.Available, g.HoldTTL)
		}
		rep, err := r.Repair(w.ctx, []string{"a"})
		if err != nil || len(rep.Corrections) != 0 {
			t.Fatalf("repair after warm-up: %v, %+v; want agreement", err, rep.Corrections)
		}
	})
}
