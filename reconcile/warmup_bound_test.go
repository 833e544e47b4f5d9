package reconcile_test

import (
	"testing"

	"github.com/stockguard/stockguard/reconcile"
)

// An order the gate held before WarmUp read the database, recorded after
// that reading and confirmed at both tiers before WarmUp read Redis, is
// sold in Redis and unknown to the database view WarmUp read: that reading
// alone computes a target one unit above what the record can take. WarmUp
// must not write it (the gate would admit a unit the record refuses), with
// or without force (which counts a hold in flight: 2 units held at the
// gate, not recorded yet).
func TestWarmUpBesideASaleBetweenItsReadingsRaisesNothing(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		for _, force := range []bool{false, true} {
			w := newWorld(t, p, reconcile.Config{})
			w.sale("a", 10)
			inFlight := int64(0)
			if force {
				w.must(w.gate.Deduct(w.ctx, order("pending", "a", 2)), "gate step of an order in flight")
				inFlight = 2
			}
			o := order("o1", "a", 1)
			w.must(w.gate.Deduct(w.ctx, o), "gate step of o1")
			sell := func() {
				w.must(w.flow.Settle(w.ctx, o), "record o1")
				w.must(w.flow.Confirm(w.ctx, o.ID), "confirm o1")
			}
			g := &snapshotGate{Gate: w.gate, before: func() { once(&sell) }} // after t1, before t2
			r, err := reconcile.New(g, w.record, reconcile.Config{})
			w.must(err, "New")
			rep, err := r.WarmUp(w.ctx, []string{"a"}, force)
			gl, rl := w.levels("a")
			if gl.Available > rl.Available-inFlight {
				t.Fatalf("force %v: gate available %d, record available %d, %d in flight after WarmUp (%v, %+v): the gate admits more than the record can take",
					force, gl.Available, rl.Available, inFlight, err, rep.Corrections)
			}
			if err != nil || rep.Count(reconcile.ActionRebuilt) != 1 || len(rep.Corrections) != 1 ||
				rl.Available != 9 || gl.Available != 9-inFlight || gl.Held != inFlight {
				t.Fatalf("force %v: WarmUp %v, %+v; gate %+v, record %d available; want one SKU written, gate at %d with %d held, record at 9",
					force, err, rep.Corrections, gl, rl.Available, 9-inFlight, inFlight)
			}
			rep, err = w.rec.Repair(w.ctx, []string{"a"})
			if err != nil || len(rep.Corrections) != 0 {
				t.Fatalf("force %v: a Repair after WarmUp: %v, %+v; want agreement, nothing to raise", force, err, rep.Corrections)
			}
		}
	})
}

// A busy SKU: one unit is sold through the tiered flow between every
// reading of the database and of Redis, so each reading WarmUp makes,
// its check after writing included, catches another such sale. WarmUp
// must neither raise the gate nor report the written SKU out of agreement.
func TestWarmUpOnABusySKURaisesNothingAndReportsNoMismatch(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.sale("a", 10)
		r, sold := sellBetweenReadings(w, "a")
		rep, err := r.WarmUp(w.ctx, []string{"a"}, false)
		gl, rl := w.levels("a")
		if gl.Available > rl.Available {
			t.Fatalf("gate available %d, record available %d after WarmUp beside %d sales (%v, %+v): the gate admits more than the record can take",
				gl.Available, rl.Available, *sold, err, rep.Corrections)
		}
		if err != nil || rep.Count(reconcile.ActionRebuilt) != 1 || len(rep.Corrections) != 1 || gl.Available != rl.Available ||
			rl.Available != int64(10-*sold) {
			t.Fatalf("WarmUp beside %d sales: %v, %+v; gate %d, record %d; want one SKU written, no mismatch, both at %d",
				*sold, err, rep.Corrections, gl.Available, rl.Available, 10-*sold)
		}
		rep, err = w.rec.Repair(w.ctx, []string{"a"})
		if err != nil || len(rep.Corrections) != 0 {
			t.Fatalf("a Repair after WarmUp: %v, %+v; want agreement, nothing to raise", err, rep.Corrections)
		}
	})
}
