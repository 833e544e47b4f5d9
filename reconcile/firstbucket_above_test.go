package reconcile_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// A pass whose last attempt (MaxAttempts) rebuilds a SKU whose first
// bucket was lost while the others lived with more units than the record
// now has: Rebuild puts the SKU back on sale above the record (Partial), and
// the pass reads it again and corrects it down, past its MaxAttempts,
// never reporting it stale with the gate above the record (invariant 6).
func TestFirstBucketRebuildOnLastAttemptKeepsTheGateBound(t *testing.T) {
	p := r3bClusterPairs()[0]
	w := newWorld(t, p, reconcile.Config{})
	const sku = "zzl"
	w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: sku, Units: 30, HoldTTL: time.Minute, Buckets: 3}), "PutOnSale")
	names, _ := w.r3bBuckets(sku, 3)
	w.r3bLoseSlot(names[0])
	w.must(w.record.Deduct(w.ctx, stock.Order{ID: "fb1", Items: []stock.Item{{SKU: sku, Qty: 15}}}), "record Deduct")
	if _, err := w.gate.Levels(w.ctx, sku); err == nil {
		t.Fatalf("gate answers the SKU with its first bucket lost")
	}

	rec, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: w.clock, MaxAttempts: 1})
	w.must(err, "New")
	rep, err := rec.Repair(w.ctx, []string{sku})
	g, r := w.levels(sku)
	t.Logf("pass: %+v, err %v; gate %+v; record %+v", rep.Corrections, err, g, r)
	for _, c := range rep.Corrections {
		if c.SKU == sku && c.Action == reconcile.ActionStale {
			t.Errorf("the pass reported %q ActionStale (%v; \"nothing was changed\") but put it back on sale in the gate at %d", sku, c.Err, g.Available)
		}
	}
	if g.Available > r.Available {
		t.Errorf("after the pass (err %v) the gate offers %d, the record can take %d", err, g.Available, r.Available)
	}
}

// With the default MaxAutoFix (1000): the rebuild of a SKU whose first
// bucket was lost, beside sales at the record alone larger than
// MaxAutoFix, puts the SKU back on sale above the record, and its
// correction down is made whatever its size: the gate, which admitted
// nothing for the SKU before the pass, never offers more than the record
// can take after it (invariant 6).
func TestFirstBucketRebuildBeyondMaxAutoFixKeepsTheGateBound(t *testing.T) {
	p := r3bClusterPairs()[0]
	w := newWorld(t, p, reconcile.Config{})
	const sku = "zzm"
	w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: sku, Units: 30000, HoldTTL: time.Minute, Buckets: 3}), "PutOnSale")
	names, _ := w.r3bBuckets(sku, 3)
	w.r3bLoseSlot(names[0])
	w.must(w.record.Deduct(w.ctx, stock.Order{ID: "fb1", Items: []stock.Item{{SKU: sku, Qty: 15000}}}), "record Deduct")
	if _, err := w.gate.Levels(w.ctx, sku); err == nil {
		t.Fatalf("gate answers the SKU with its first bucket lost")
	}

	rec, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: w.clock})
	w.must(err, "New")
	rep, err := rec.Repair(w.ctx, []string{sku})
	g, r := w.levels(sku)
	t.Logf("pass: %+v, err %v; gate %+v; record %+v", rep.Corrections, err, g, r)
	if g.Available > r.Available {
		t.Errorf("after the pass (err %v) the gate offers %d, the record can take %d", err, g.Available, r.Available)
	}
}
