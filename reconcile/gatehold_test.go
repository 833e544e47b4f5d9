package reconcile_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
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

// A shop on the tiered flow with its default Config, rebuilt after a flush
// by a Reconciler with its default Config: the gate gets its own hold time
// back (10m, not the record's 20m), and so do the orders it takes after.
func TestRebuildByDefaultGivesTheTieredGateItsOwnHoldTime(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		flow := tiered.New(w.gate, w.record, tiered.Config{})
		listing := stock.Listing{SKU: "a", Units: 10, HoldTTL: 10 * time.Minute, MaxHoldTTL: 30 * time.Minute}
		w.must(flow.PutOnSale(w.ctx, listing), "put on sale")
		if _, rec := w.levels("a"); rec.HoldTTL != 20*time.Minute || rec.MaxHoldTTL != 40*time.Minute {
			t.Fatalf("record hold %v, max %v; want 20m, 40m (tiered's default grace is the hold time)", rec.HoldTTL, rec.MaxHoldTTL)
		}
		w.flush()
		r, err := reconcile.New(w.gate, w.record, reconcile.Config{})
		w.must(err, "New")
		rep, err := r.Repair(w.ctx, []string{"a"})
		w.must(err, "Repair")
		if rep.Count(reconcile.ActionRebuilt) != 1 {
			t.Fatalf("Repair %+v, want a rebuild", rep.Corrections)
		}
		if g, _ := w.levels("a"); g.HoldTTL != 10*time.Minute || g.MaxHoldTTL != 30*time.Minute || g.Available != 10 {
			t.Fatalf("gate after the rebuild: %d units, hold %v, max %v; want 10 units, hold 10m, max 30m",
				g.Available, g.HoldTTL, g.MaxHoldTTL)
		}
		w.must(flow.Deduct(w.ctx, order("o1", "a", 1)), "Deduct")
		infos, err := w.gate.Orders(w.ctx, []string{"o1"})
		w.must(err, "gate Orders")
		if want := w.clock.Now().Add(10 * time.Minute); !infos[0].Deadline.Equal(want) {
			t.Errorf("deadline at the gate of an order after the rebuild: %v, want %v (10m)", infos[0].Deadline, want)
		}
		infos, err = w.record.Orders(w.ctx, []string{"o1"})
		w.must(err, "record Orders")
		if want := w.clock.Now().Add(20 * time.Minute); !infos[0].Deadline.Equal(want) {
			t.Errorf("deadline at the record: %v, want %v (20m, after the gate's)", infos[0].Deadline, want)
		}
	})
}

// A listing changed at the record alone (the flow's record path, while a
// breaker kept traffic off the gate) reaches the gate's settings at the
// next pass: the record is the truth for the per-user limit and the hold
// times as for the counts, with or without live holds, and a pass after
// that finds the two in agreement.
func TestRepairGivesTheGateTheRecordsSettings(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}), "put on sale")
		w.must(w.flow.Deduct(w.ctx, order("o1", "a", 2)), "Deduct") // a live hold
		w.must(w.flow.Fallback().PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 8, PerUserLimit: 3, HoldTTL: 5 * time.Minute, MaxHoldTTL: time.Hour}),
			"put on sale at the record alone")
		r, err := reconcile.New(w.gate, w.record, reconcile.Config{GateHold: w.flow.GateHold})
		w.must(err, "New")
		rep, err := r.Repair(w.ctx, []string{"a"})
		w.must(err, "Repair")
		if len(rep.Corrections) != 1 || !rep.Corrections[0].Settings || rep.Corrections[0].Action != reconcile.ActionCorrected {
			t.Fatalf("Repair %+v, want one correction of the settings", rep.Corrections)
		}
		g, rec := w.levels("a")
		if g.PerUserLimit != 3 || g.HoldTTL != 5*time.Minute || g.MaxHoldTTL != time.Hour || g.Available != rec.Available || g.Held != 2 {
			t.Fatalf("gate after the repair %+v, record %+v; want limit 3, hold 5m, max 1h, the record's available, the hold kept", g, rec)
		}
		rep, err = r.Repair(w.ctx, []string{"a"})
		if err != nil || len(rep.Corrections) != 0 {
			t.Fatalf("a second repair: %v, %+v; want agreement", err, rep.Corrections)
		}
	})
}
