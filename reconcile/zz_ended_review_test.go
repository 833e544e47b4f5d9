package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// beforeRevert is a gate that runs hook (once) before the first Revert
// a pass makes through it.
type beforeRevert struct {
	reconcile.Gate
	hook func()
}

func (g *beforeRevert) Revert(ctx context.Context, id string) error {
	if h := g.hook; h != nil {
		g.hook = nil
		h()
	}
	return g.Gate.Revert(ctx, id)
}

// Promise (Correction.Ended: "the units of Redis's holds ... which the
// pass reverted at Redis"; endAtGate: "two passes ... ending the same
// order end it once"): when two nodes' passes race to end one order
// cancelled at the record alone, the order is ended once and reported
// ended once. The second pass's Revert is a repeat at the gate, which
// answers nil, so it too reports Ended 1 (ActionEnded): the units reported
// ended across the nodes (stockctl, observe, metrics) are twice the units
// that were.
func TestZZTwoPassesReportOneEndOnce(t *testing.T) {
	w := newWorld(t, pairs()[0], reconcile.Config{})
	w.sale("phone", 5)
	w.must(w.flow.Deduct(w.ctx, order("o1", "phone", 1)), "Deduct o1")
	w.must(w.record.Revert(w.ctx, "o1"), "record Revert o1 (at the record alone)")

	other, err := reconcile.New(w.gate, w.record, reconcile.Config{})
	w.must(err, "New")
	var otherRep reconcile.Report
	g := &beforeRevert{Gate: w.gate, hook: func() {
		// The other node's pass, between this pass's reading and its end.
		otherRep, err = other.Repair(w.ctx, []string{"phone"})
		w.must(err, "other node's Repair")
	}}
	rec, err := reconcile.New(g, w.record, reconcile.Config{})
	w.must(err, "New")
	rep, err := rec.Repair(w.ctx, []string{"phone"})
	w.must(err, "Repair")
	var ended int64
	for _, r := range []reconcile.Report{otherRep, rep} {
		for _, c := range r.Corrections {
			ended += c.Ended
		}
	}
	t.Logf("other node: %+v\nthis node: %+v", otherRep, rep)
	if ended != 1 {
		t.Errorf("units reported ended by the two passes: %d, want 1 (one order of 1 unit ended once)", ended)
	}
	if gl, rl := w.levels("phone"); gl.Available != rl.Available {
		t.Errorf("gate %d, record %d", gl.Available, rl.Available)
	}
}

// Promise (README: "a hold the gate still has of an order cancelled there
// is reverted at the gate (reconcile's ActionEnded), so its units, and its
// buyer's per-user quota, are free at once, not at the hold's deadline"):
// an order whose partial return landed at the gate and not at the record
// (the order was cancelled at the record alone, by a node whose breaker
// was open, between RevertItems' gate step and its record step: the gate
// decides, and RevertItems answers nil; stock/tiered doc) is ended at the
// gate by a pass. matches compares
// the gate's hold (2 left) with the record's line less its returns (3,
// the record never saw the return), finds another order, and leaves the
// hold in flight: alice's quota and 2 units stay taken at the gate until
// the hold's deadline (up to the listing's maximum hold time).
func TestZZEndedAfterAReturnAtTheGateAlone(t *testing.T) {
	w := newWorld(t, pairs()[0], reconcile.Config{})
	w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: "phone", Units: 10, PerUserLimit: 3, HoldTTL: time.Hour}), "PutOnSale")
	o := order("o1", "phone", 3)
	o.UserID = "alice"
	w.must(w.flow.Deduct(w.ctx, o), "Deduct o1")
	w.must(w.gate.RevertItems(w.ctx, stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "phone", Qty: 1}}}),
		"RevertItems at the gate (the record's copy ended before its step)")
	w.must(w.record.Revert(w.ctx, "o1"), "record Revert o1 (at the record alone)")

	rep, err := w.rec.Repair(w.ctx, []string{"phone"})
	w.must(err, "Repair")
	t.Logf("%+v", rep)
	ins, err := w.gate.Orders(w.ctx, []string{"o1"})
	w.must(err, "gate Orders")
	if ins[0].State != stock.StateReverted {
		t.Errorf("o1 at the gate after the pass: %v, want reverted (the record cancelled it)", ins[0].State)
	}
	o2 := order("o2", "phone", 3)
	o2.UserID = "alice"
	if err := w.flow.Deduct(w.ctx, o2); err != nil {
		t.Errorf("alice's new order of 3 (limit 3, her only order cancelled): %v, want it held", err)
	}
}
