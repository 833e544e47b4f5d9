package reconcile_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// staleBesidePartial runs a pass of MaxAttempts 2 over a SKU "busy" whose
// gate fence moves during every reading (a restock at the gate alone, as
// the pass reads the record) and, when above is true, a SKU whose first
// bucket was lost while its living buckets hold more than the record
// (rebuilt Partial). It returns the gate's units of "busy" at the reading
// it was reported from: 10 plus the restocks made until then, one per
// reading.
func staleBesidePartial(t *testing.T, above bool) int64 {
	p := r3bClusterPairs()[0]
	w := newWorld(t, p, reconcile.Config{})
	const busy, high = "zzbusy", "zzhigh"
	w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: busy, Units: 10, HoldTTL: time.Minute}), "PutOnSale busy")
	skus := []string{busy}
	if above {
		w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: high, Units: 30, HoldTTL: time.Minute, Buckets: 3}), "PutOnSale high")
		names, _ := w.r3bBuckets(high, 3)
		w.r3bLoseSlot(names[0])
		w.must(w.record.Deduct(w.ctx, stock.Order{ID: "fb1", Items: []stock.Item{{SKU: high, Qty: 15}}}), "record Deduct")
		skus = append(skus, high)
	}
	var readings, before atomic.Int64
	var done atomic.Bool
	clock := stock.ClockFunc(func() time.Time {
		if !done.Load() {
			n := readings.Add(1)
			w.must(w.gate.Restock(w.ctx, stock.Restock{OpID: fmt.Sprintf("zzr%d", n), SKU: busy, Units: 1}), "gate Restock")
		}
		return w.clock.Now()
	})
	rec, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: clock, MaxAttempts: 2,
		OnCorrection: func(c reconcile.Correction) {
			if c.SKU == busy {
				before.Store(c.Before)
				done.Store(true)
			}
		}})
	w.must(err, "New")
	rep, err := rec.Repair(w.ctx, skus)
	t.Logf("above %v: pass %+v, err %v; readings until %q was reported: %d", above, rep, err, busy, readings.Load())
	return before.Load()
}

// Config.MaxAttempts bounds the readings of a SKU that keeps changing:
// the two more readings a pass gives a SKU it rebuilt Partial are that
// SKU's, not every SKU's of its batch (bounded cost, invariant 5).
func TestPartialExtraReadingsAreThePartialSKUs(t *testing.T) {
	alone := staleBesidePartial(t, false)
	beside := staleBesidePartial(t, true)
	if beside != alone {
		t.Errorf("a SKU that keeps changing was reported from a reading of %d units (%d restocks) beside a SKU rebuilt Partial, %d (%d) alone (MaxAttempts 2)",
			beside, beside-10, alone, alone-10)
	}
}
