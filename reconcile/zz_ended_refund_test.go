package reconcile_test

import (
	"context"
	"testing"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// hookGate runs onRevert before a Revert, onAdjust before an Adjust (each
// once).
type hookGate struct {
	reconcile.Gate
	onRevert, onAdjust func()
}

func (g *hookGate) Revert(ctx context.Context, id string) error {
	if h := g.onRevert; h != nil {
		g.onRevert = nil
		h()
	}
	return g.Gate.Revert(ctx, id)
}

func (g *hookGate) Adjust(ctx context.Context, sku string, f redisstock.Fence, delta int64) (bool, error) {
	if h := g.onAdjust; h != nil {
		g.onAdjust = nil
		h()
	}
	return g.Gate.Adjust(ctx, sku, f, delta)
}

// Promise (invariant 6, gate bound, after every step; endAtGate ends "a
// hold ... whose end the gate missed"): a pass's end at the gate returns a
// hold, never a sale the gate has, so it never returns units a second
// time.
//
// o1 is held at both tiers; a node whose breaker is open cancels it at the
// record alone. Node A's pass reads it (record: reverted, gate: held).
// Before A's Revert, a Confirm that read the record before the cancel
// confirms o1 at the gate (its record step then fails; its undo at the gate
// did not land: "its units are reconciliation's", stock/tiered). Node B's
// pass reads the gate's sale of an order the record returned and computes
// +1. A's Revert now refunds the sale at the gate (+1): Revert by order ID
// ends whatever the gate has, held or sold. B's Adjust (+1) is applied,
// since a return does not move the fence: the gate has 6 available, the
// record 5, nothing in flight.
func TestZZPassEndRefundsNoSaleAtTheGate(t *testing.T) {
	w := newWorld(t, pairs()[0], reconcile.Config{})
	w.sale("phone", 5)
	w.must(w.flow.Deduct(w.ctx, order("o1", "phone", 1)), "Deduct o1")
	w.must(w.record.Revert(w.ctx, "o1"), "record Revert o1 (at the record alone)")

	var afterB [2]int64
	gB := &hookGate{Gate: w.gate}
	b, err := reconcile.New(gB, w.record, reconcile.Config{})
	w.must(err, "New B")
	gA := &hookGate{Gate: w.gate}
	gA.onRevert = func() {
		w.must(w.gate.Confirm(w.ctx, "o1"), "gate Confirm o1 (its undo did not land)")
		gB.onAdjust = func() {
			// A's Revert lands between B's reading and B's Adjust.
			w.must(w.gate.Revert(w.ctx, "o1"), "A's Revert of o1 at the gate")
		}
		rep, err := b.Repair(w.ctx, []string{"phone"})
		t.Logf("node B: %+v, %v", rep, err)
		g, r := w.levels("phone")
		afterB = [2]int64{g.Available, r.Available}
	}
	a, err := reconcile.New(gA, w.record, reconcile.Config{})
	w.must(err, "New A")
	rep, err := a.Repair(w.ctx, []string{"phone"})
	t.Logf("node A: %+v, %v", rep, err)
	if afterB[0] > afterB[1] {
		t.Errorf("after B's pass: gate available %d > record available %d with nothing in flight: o1's unit returned twice at the gate", afterB[0], afterB[1])
	}
}
