package reconcile_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// WarmUp with MaxAttempts 1 over a SKU in 3 buckets (10 each) whose first
// bucket was lost, while the record sold 15 since: the rebuild writes an
// empty first state beside the living buckets (20 units, redisstock
// Partial) on the last attempt. WarmUp reads every written SKU again and
// reports one out of agreement with an error wrapping ErrUnresolved; the
// gate must not be left above the record by a WarmUp that returns nil
// (invariant 6).
func TestWarmUpPartialOnLastAttemptIsNotNil(t *testing.T) {
	p := r3bClusterPairs()[0]
	w := newWorld(t, p, reconcile.Config{})
	const sku = "zzwarm"
	w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: sku, Units: 30, HoldTTL: time.Minute, Buckets: 3}), "PutOnSale")
	names, _ := w.r3bBuckets(sku, 3)
	w.r3bLoseSlot(names[0])
	w.must(w.record.Deduct(w.ctx, stock.Order{ID: "fb1", Items: []stock.Item{{SKU: sku, Qty: 15}}}), "record Deduct")

	rec, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: w.clock, MaxAttempts: 1})
	w.must(err, "New")
	rep, err := rec.WarmUp(w.ctx, []string{sku}, false)
	g, r := w.levels(sku)
	t.Logf("WarmUp: %+v, err %v; gate %d record %d", rep, err, g.Available, r.Available)
	if g.Available > r.Available && err == nil {
		t.Errorf("WarmUp returned nil with the gate at %d units, above the record's %d", g.Available, r.Available)
	}
	if n := len(rep.Corrections); n != 1 {
		t.Errorf("%d corrections reported, want 1", n)
	}
}
