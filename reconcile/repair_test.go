package reconcile_test

import (
	"errors"
	"testing"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// drift builds one SKU "a" with every kind of disagreement at once:
//
//	sale 100 on both; tiered order o1 (2) on both       R 98  D 98
//	"dbonly" (3) taken by the database alone (degraded)          D 95
//	"inflight" (4) held by Redis, not recorded yet         R 94
//	restock of 10 that reached the database only (lost)          D 105
//	tiered order o3 (6); Redis has reverted it, the
//	database not yet                                       R 94  D 99
//
// Redis should have 99 - 4 (in flight) + 6 (returning) = 101.
func drift(w *world) {
	w.sale("a", 100)
	w.must(w.flow.Deduct(w.ctx, order("o1", "a", 2)), "o1")
	w.must(w.record.Deduct(w.ctx, order("dbonly", "a", 3)), "dbonly")
	w.must(w.gate.Deduct(w.ctx, order("inflight", "a", 4)), "inflight")
	w.must(w.record.Restock(w.ctx, stock.Restock{OpID: "op-13", SKU: "a", Units: 10}), "restock")
	w.must(w.flow.Deduct(w.ctx, order("o3", "a", 6)), "o3")
	w.must(w.gate.Revert(w.ctx, "o3"), "gate revert o3")
}

var wantDrift = reconcile.Correction{SKU: "a", Before: 94, After: 101, Delta: 7, Record: 99, InFlight: 4, Returning: 6}

func checkCorrection(t *testing.T, got []reconcile.Correction, want reconcile.Correction) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("corrections %+v, want one", got)
	}
	g := got[0]
	g.Err = nil
	if g != want {
		t.Errorf("correction %+v, want %+v", g, want)
	}
}

func TestRepairComputesAndFixesDriftExactly(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		drift(w)
		rep, err := w.rec.Repair(w.ctx, []string{"a", "never"})
		w.must(err, "Repair")
		want := wantDrift
		want.Action = reconcile.ActionCorrected
		checkCorrection(t, rep.Corrections, want)
		checkCorrection(t, w.seen, want)
		if rep.Checked != 2 || rep.InAgreement != 1 {
			t.Errorf("report checked %d, in agreement %d; want 2, 1", rep.Checked, rep.InAgreement)
		}
		if g, _ := w.levels("a"); g.Available != 101 {
			t.Errorf("Redis available %d after repair, want 101", g.Available)
		}
		rep, err = w.rec.Repair(w.ctx, []string{"a"})
		w.must(err, "second Repair")
		if len(rep.Corrections) != 0 || rep.InAgreement != 1 {
			t.Errorf("second pass %+v, want agreement", rep)
		}
		// The transit ends: Redis returns the in-flight hold, the database
		// the reverted order. Both sides then agree with nothing in between.
		w.must(w.gate.Revert(w.ctx, "inflight"), "revert inflight")
		w.must(w.record.Revert(w.ctx, "o3"), "record revert o3")
		g, r := w.levels("a")
		if g.Available != 105 || r.Available != 105 {
			t.Errorf("after the transit: Redis %d, database %d; want 105, 105", g.Available, r.Available)
		}
	})
}

func TestRepairLeavesLargeDriftAndDryRunChangesNothing(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		for _, tc := range []struct {
			name string
			cfg  reconcile.Config
			want reconcile.Action
			err  error
			left int64 // Redis available afterwards
		}{
			{"over-threshold", reconcile.Config{MaxAutoFix: 6}, reconcile.ActionLeft, reconcile.ErrUnresolved, 94},
			{"at-threshold", reconcile.Config{MaxAutoFix: 7}, reconcile.ActionCorrected, nil, 101},
			{"no-limit", reconcile.Config{MaxAutoFix: -1}, reconcile.ActionCorrected, nil, 101},
			{"dry-run", reconcile.Config{DryRun: true}, reconcile.ActionDryRun, nil, 94},
		} {
			t.Run(tc.name, func(t *testing.T) {
				w := newWorld(t, p, tc.cfg)
				drift(w)
				rep, err := w.rec.Repair(w.ctx, []string{"a"})
				if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
					t.Fatalf("Repair: %v, want %v", err, tc.err)
				}
				want := wantDrift
				want.Action = tc.want
				checkCorrection(t, rep.Corrections, want)
				checkCorrection(t, w.seen, want)
				if g, _ := w.levels("a"); g.Available != tc.left {
					t.Errorf("Redis available %d, want %d", g.Available, tc.left)
				}
			})
		}
	})
}

func TestRepairRebuildsAFlushedSKU(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{MaxAutoFix: 1})
		w.sale("a", 50)
		w.sale("b", 7)
		w.must(w.flow.Deduct(w.ctx, order("o1", "a", 5)), "o1")
		w.must(w.flow.Confirm(w.ctx, "o1"), "confirm o1")
		w.must(w.flow.Deduct(w.ctx, order("o2", "a", 3)), "o2")
		w.flush()
		rep, err := w.rec.RepairAll(w.ctx)
		w.must(err, "RepairAll")
		if n := rep.Count(reconcile.ActionRebuilt); n != 2 || rep.Checked != 2 {
			t.Fatalf("report %+v, want 2 SKUs rebuilt", rep)
		}
		g, r := w.levels("a")
		if g.Available != 42 || r.Available != 42 {
			t.Errorf("a: Redis %d, database %d; want 42, 42", g.Available, r.Available)
		}
		if g, _ := w.levels("b"); g.Available != 7 {
			t.Errorf("b: Redis %d, want 7", g.Available)
		}
		// The sale goes on: the database's holds stay, new orders take both.
		w.must(w.flow.Deduct(w.ctx, order("o3", "a", 2)), "o3")
		w.must(w.flow.Confirm(w.ctx, "o2"), "confirm o2 (record; the gate lost it)")
		g, r = w.levels("a")
		if g.Available != 40 || r.Available != 40 || r.Held+r.Sold != 10 {
			t.Errorf("after the flush: Redis %d, database %d (held+sold %d); want 40, 40 (10)", g.Available, r.Available, r.Held+r.Sold)
		}
	})
}
