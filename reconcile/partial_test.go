package reconcile_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// reverters returns the world's tiers as stock.PartialReverters, skipping
// the test where a backend does not have them yet.
func (w *world) reverters() (gate, rec stock.PartialReverter) {
	w.t.Helper()
	gate, ok1 := any(w.gate).(stock.PartialReverter)
	rec, ok2 := any(w.record).(stock.PartialReverter)
	if !ok1 || !ok2 {
		w.t.Skip("the backends do not implement stock.PartialReverter")
	}
	return gate, rec
}

// A partial revert in flight between the tiers is not drift: given back at
// the gate first (as stock/tiered does), the difference is returning; given
// back at the record alone (a fallback's), it is in flight. Either way a
// pass finds agreement, and again once both tiers have it.
func TestPartialRevertInFlightIsNotDrift(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		gate, rec := w.reverters()
		w.sale("a", 10)
		w.must(w.flow.Deduct(w.ctx, order("o1", "a", 4)), "deduct o1")
		w.must(w.flow.Deduct(w.ctx, order("o2", "a", 3)), "deduct o2")
		agree := func(when string) {
			t.Helper()
			rep, err := w.rec.Repair(w.ctx, []string{"a"})
			if err != nil || len(rep.Corrections) != 0 || rep.InAgreement != 1 {
				t.Fatalf("%s: Repair = %+v, %v; want agreement", when, rep, err)
			}
		}
		r1 := stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
		w.must(gate.RevertItems(w.ctx, r1), "gate return")
		agree("returned at the gate only")
		w.must(rec.RevertItems(w.ctx, r1), "record return")
		agree("returned at both")
		r2 := stock.Return{OpID: "r2", OrderID: "o2", Items: []stock.Item{{SKU: "a", Qty: 2}}}
		w.must(rec.RevertItems(w.ctx, r2), "record return")
		agree("returned at the record only")
		w.must(gate.RevertItems(w.ctx, r2), "gate return")
		agree("returned at both")
		if g, r := w.levels("a"); g.Available != 6 || r.Available != 6 || g.Held != 4 || r.Held != 4 {
			t.Fatalf("gate/record %+v/%+v, want 6 available, 4 held at both", g, r)
		}
	})
}

// A gate rebuilt from the record gets the SKU's own MaxHoldTTL back (the
// record's less the grace the tiered flow adds), and the record's copy of
// an extended hold keeps its extended gate deadline: the tiered reclaimer
// does not return it at the old one.
func TestRebuiltGateKeepsMaxHoldAndExtendedDeadlines(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		_, ok1 := any(w.gate).(stock.HoldExtender)
		_, ok2 := any(w.record).(stock.HoldExtender)
		if !ok1 || !ok2 {
			t.Skip("the backends do not implement stock.HoldExtender")
		}
		w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}), "put on sale")
		if _, rec := w.levels("a"); rec.MaxHoldTTL != 11*time.Minute {
			t.Fatalf("record max hold %v, want 11m", rec.MaxHoldTTL)
		}
		r, err := reconcile.New(w.gate, w.record, reconcile.Config{GateHold: w.flow.GateHold})
		w.must(err, "New")
		w.must(w.flow.Deduct(w.ctx, order("o1", "a", 4)), "deduct")
		start := w.clock.Now()
		w.must(w.flow.ExtendHold(w.ctx, "o1", start.Add(5*time.Minute)), "extend")
		w.flush()
		_, err = r.Repair(w.ctx, []string{"a"})
		w.must(err, "repair")
		if g, _ := w.levels("a"); g.Available != 6 || g.HoldTTL != time.Minute || g.MaxHoldTTL != 10*time.Minute {
			t.Fatalf("rebuilt gate %+v, want 6 available, hold 1m, max 10m", g)
		}
		w.clock.Advance(3 * time.Minute) // past the old gate and record deadlines
		_, err = w.flow.ReclaimExpired(w.ctx, 10)
		w.must(err, "reclaim")
		if _, rec := w.levels("a"); rec.Held != 4 {
			t.Fatalf("record before the extended deadline: %+v", rec)
		}
		w.must(w.flow.Confirm(w.ctx, "o1"), "confirm before the extended deadline")
		if _, rec := w.levels("a"); rec.Sold != 4 {
			t.Fatalf("record after confirm: %+v", rec)
		}
	})
}

// WarmUp gives a stale gate the SKU's own MaxHoldTTL back, and its verify
// reads it.
func TestWarmUpGivesTheGateItsOwnMaxHold(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}), "put on sale")
		if _, rec := w.levels("a"); rec.MaxHoldTTL != 11*time.Minute {
			t.Skip("the record does not keep MaxHoldTTL")
		}
		r, err := reconcile.New(w.gate, w.record, reconcile.Config{GateHold: w.flow.GateHold})
		w.must(err, "New")
		w.must(w.gate.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 3, HoldTTL: time.Hour}), "stale gate")
		_, err = r.WarmUp(w.ctx, []string{"a"}, false)
		w.must(err, "WarmUp")
		if g, _ := w.levels("a"); g.HoldTTL != time.Minute || g.MaxHoldTTL != 10*time.Minute || g.Available != 10 {
			t.Fatalf("gate after warm-up: %+v; want 10 units, hold 1m, max 10m", g)
		}
	})
}
