package reconcile_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// Promise (invariant 4, package doc "The promise"; Correction.After "is,
// for ActionCorrected and ActionRebuilt, up to orders taken since the
// reading"): after a pass the gate agrees with the record. A SKU split
// into buckets whose first bucket's master lost its data is rebuilt by
// the pass; redisstock's Rebuild gives the first bucket no units (other
// buckets survived) and says so (Exists), and the pass reads the SKU
// again and corrects it to the record's count.
func TestFirstBucketRebuildBringsTheGateToTheRecord(t *testing.T) {
	p := r3bClusterPairs()[0] // miniredis behind a ClusterClient + SQLite
	w := newWorld(t, p, reconcile.Config{})
	const sku = "zzb"
	w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: sku, Units: 30, HoldTTL: time.Minute, Buckets: 3}), "PutOnSale")
	for i := range 6 {
		o := stock.Order{ID: fmt.Sprintf("o%d", i), UserID: fmt.Sprintf("u%d", i), Items: []stock.Item{{SKU: sku, Qty: 2}}}
		w.must(w.flow.Deduct(w.ctx, o), "Deduct")
	}
	names, avail := w.r3bBuckets(sku, 3)
	if avail[0] != 6 || avail[1] != 6 || avail[2] != 6 {
		t.Fatalf("buckets %v hold %v, want 6 each", names, avail)
	}
	w.r3bLoseSlot(names[0]) // the first bucket (the SKU's own state) is lost

	rec, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: w.clock})
	w.must(err, "New")
	rep, err := rec.Repair(w.ctx, []string{sku})
	g, r := w.levels(sku)
	t.Logf("pass: %+v, err %v; gate %+v; record %+v", rep.Corrections, err, g, r)
	if r.Available != 18 {
		t.Fatalf("record available %d, want 18", r.Available)
	}
	var after int64 = -1
	for _, c := range rep.Corrections {
		if c.SKU == sku && (c.Action == reconcile.ActionRebuilt || c.Action == reconcile.ActionCorrected) {
			after = c.After
		}
	}
	if g.Available != 18 && err == nil {
		t.Errorf("after a pass that returned no error the gate offers %d, the record %d (the pass reported After=%d)",
			g.Available, r.Available, after)
	}
	if after >= 0 && g.Available != after {
		t.Errorf("the pass reported the SKU at %d, the gate has %d", after, g.Available)
	}
}

// The same when the record sold while the first bucket was lost (the gate
// answered the SKU unavailable, and the breaker sent orders to the record
// alone): the surviving buckets keep their units, more than the record
// has, and the pass's correction brings them down (invariant 6).
func TestFirstBucketRebuildBesideRecordSalesKeepsTheGateBound(t *testing.T) {
	p := r3bClusterPairs()[0]
	w := newWorld(t, p, reconcile.Config{})
	const sku = "zzc"
	w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: sku, Units: 30, HoldTTL: time.Minute, Buckets: 3}), "PutOnSale")
	names, avail := w.r3bBuckets(sku, 3)
	if avail[0] != 10 || avail[1] != 10 || avail[2] != 10 {
		t.Fatalf("buckets %v hold %v, want 10 each", names, avail)
	}
	w.r3bLoseSlot(names[0])
	// Sold at the record alone while the gate answered the SKU unavailable.
	w.must(w.record.Deduct(w.ctx, stock.Order{ID: "fb1", Items: []stock.Item{{SKU: sku, Qty: 15}}}), "record Deduct")

	rec, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: w.clock})
	w.must(err, "New")
	rep, err := rec.Repair(w.ctx, []string{sku})
	g, r := w.levels(sku)
	t.Logf("pass: %+v, err %v; gate %+v; record %+v", rep.Corrections, err, g, r)
	if r.Available != 15 {
		t.Fatalf("record available %d, want 15", r.Available)
	}
	if g.Available > r.Available {
		t.Errorf("after the pass (err %v) the gate offers %d, the record can take %d", err, g.Available, r.Available)
	}
}

// Recalibrate (degrade.Config.Recalibrate: "returns an error, which keeps
// the breaker open, when the pass failed or left any SKU out of
// agreement") over the same state, with the Shop's recalibrating
// reconciler (MaxAutoFix -1): the breaker closes onto a gate that agrees
// with the record.
func TestRecalibrateOverALostFirstBucketAgrees(t *testing.T) {
	p := r3bClusterPairs()[0]
	w := newWorld(t, p, reconcile.Config{})
	const sku = "zzd"
	w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: sku, Units: 30, HoldTTL: time.Minute, Buckets: 3}), "PutOnSale")
	names, _ := w.r3bBuckets(sku, 3)
	w.r3bLoseSlot(names[0])
	w.must(w.record.Deduct(w.ctx, stock.Order{ID: "fb1", Items: []stock.Item{{SKU: sku, Qty: 15}}}), "record Deduct")

	recal, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: w.clock, MaxAutoFix: -1})
	w.must(err, "New")
	err = recal.Recalibrate(w.ctx, sku)
	g, r := w.levels(sku)
	if err == nil && g.Available != r.Available {
		t.Errorf("Recalibrate returned nil with the gate at %d and the record at %d (no order in flight)", g.Available, r.Available)
	}
}
