package reconcile_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A restock whose gate step failed and stayed missing for hours (Redis
// out of reach) is still in flight for the default window, half the
// gate's Retention: the pass completes it at the gate under its operation
// ID, so the caller's retry adds nothing more there. Counted as drift
// (raised by a plain delta) it would be added again by the retry.
func TestRestockAfterAnOutageOfHoursIsCompletedByItsID(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		rec, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: w.clock})
		w.must(err, "New")
		w.sale("a", 10)
		r := stock.Restock{OpID: "delivery-1", SKU: "a", Units: 5}
		w.must(w.record.Restock(w.ctx, r), "record step of the restock (the gate step failed)")
		w.clock.Advance(redisstock.DefaultRetention/2 - time.Minute)
		rep, err := rec.Repair(w.ctx, []string{"a"})
		w.must(err, "Repair")
		checkCorrection(t, rep.Corrections, reconcile.Correction{SKU: "a", Action: reconcile.ActionRestocked,
			Before: 10, After: 10, Record: 15, Restocking: 5})
		w.must(w.flow.Restock(w.ctx, r), "the caller's retry")
		if gl, rl := w.levels("a"); gl.Available != 15 || rl.Available != 15 {
			t.Fatalf("after the retry: gate %d, record %d; want 15, 15", gl.Available, rl.Available)
		}
	})
}

// A window is half the gate's Retention unless set: a gate that
// remembers operation IDs for 2 hours gets a 1-hour window, past which a
// restock the gate never got is drift.
func TestRestockWindowIsHalfTheGatesRetention(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		gate, err := redisstock.New(w.rc, redisstock.Config{Prefix: w.prefix, Clock: w.clock, Retention: 2 * time.Hour})
		w.must(err, "redisstock.New")
		rec, err := reconcile.New(gate, w.record, reconcile.Config{Clock: w.clock})
		w.must(err, "New")
		w.sale("a", 10)
		w.must(w.record.Restock(w.ctx, stock.Restock{OpID: "delivery-1", SKU: "a", Units: 5}), "record-only restock")
		w.clock.Advance(time.Hour - time.Second)
		rep, err := rec.Repair(w.ctx, []string{"a"})
		w.must(err, "Repair")
		checkCorrection(t, rep.Corrections, reconcile.Correction{SKU: "a", Action: reconcile.ActionRestocked,
			Before: 10, After: 10, Record: 15, Restocking: 5})
		w.must(w.record.Restock(w.ctx, stock.Restock{OpID: "delivery-2", SKU: "a", Units: 3}), "record-only restock")
		w.clock.Advance(time.Hour + time.Second)
		rep, err = rec.Repair(w.ctx, []string{"a"})
		w.must(err, "Repair")
		checkCorrection(t, rep.Corrections, reconcile.Correction{SKU: "a", Action: reconcile.ActionCorrected,
			Before: 15, After: 18, Delta: 3, Record: 18})
	})
}
