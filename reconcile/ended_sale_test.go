package reconcile_test

import (
	"context"
	"testing"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// hookGate runs onEnd before a RevertHeld, onAdjust before an Adjust
// (each once).
type hookGate struct {
	reconcile.Gate
	onEnd, onAdjust func()
}

func (g *hookGate) RevertHeld(ctx context.Context, id string) (stock.State, error) {
	if h := g.onEnd; h != nil {
		g.onEnd = nil
		h()
	}
	return g.Gate.RevertHeld(ctx, id)
}

func (g *hookGate) Adjust(ctx context.Context, sku string, f redisstock.Fence, delta int64) (bool, error) {
	if h := g.onAdjust; h != nil {
		g.onAdjust = nil
		h()
	}
	return g.Gate.Adjust(ctx, sku, f, delta)
}

// Invariant 6 (gate bound, after every step): a pass's end at the gate
// returns a hold, never a sale the gate has, so it never returns units a
// second time.
//
// o1 is held at both tiers; a node whose breaker is open cancels it at the
// record alone. Node A's pass reads it (record: reverted, gate: held).
// Before A ends it at the gate, a Confirm that read the record before the
// cancel confirms o1 at the gate (its record step then fails; its undo at
// the gate did not land: "its units are reconciliation's", stock/tiered).
// Node B's pass reads the gate's sale of an order the record returned and
// corrects the gate up by 1; A's end lands between B's reading and B's
// Adjust (which a return does not fence). A's end finds o1 sold and
// leaves it: the gate ends with the record's 5 available, not 6.
func TestPassEndRefundsNoSaleAtTheGate(t *testing.T) {
	w := newWorld(t, pairs()[0], reconcile.Config{})
	w.sale("phone", 5)
	w.must(w.flow.Deduct(w.ctx, order("o1", "phone", 1)), "Deduct o1")
	w.must(w.record.Revert(w.ctx, "o1"), "record Revert o1 (at the record alone)")

	var afterB [2]int64
	gB := &hookGate{Gate: w.gate}
	b, err := reconcile.New(gB, w.record, reconcile.Config{})
	w.must(err, "New B")
	gA := &hookGate{Gate: w.gate}
	gA.onEnd = func() {
		w.must(w.gate.Confirm(w.ctx, "o1"), "gate Confirm o1 (its undo did not land)")
		gB.onAdjust = func() {
			// A's end lands between B's reading and B's Adjust.
			_, err := w.gate.RevertHeld(w.ctx, "o1")
			w.must(err, "A's end of o1 at the gate")
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
