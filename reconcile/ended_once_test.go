package reconcile_test

import (
	"context"
	"testing"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// beforeEnd is a gate that runs hook (once) before the first RevertHeld
// a pass makes through it.
type beforeEnd struct {
	reconcile.Gate
	hook func()
}

func (g *beforeEnd) RevertHeld(ctx context.Context, id string) (stock.State, error) {
	if h := g.hook; h != nil {
		g.hook = nil
		h()
	}
	return g.Gate.RevertHeld(ctx, id)
}

// When two nodes' passes race to end one order cancelled at the record
// alone, the order is ended once and reported ended once
// (Correction.Ended): the second pass's end finds the order no longer
// held at the gate, and reports nothing.
func TestTwoPassesReportOneEndOnce(t *testing.T) {
	w := newWorld(t, pairs()[0], reconcile.Config{})
	w.sale("phone", 5)
	w.must(w.flow.Deduct(w.ctx, order("o1", "phone", 1)), "Deduct o1")
	w.must(w.record.Revert(w.ctx, "o1"), "record Revert o1 (at the record alone)")

	other, err := reconcile.New(w.gate, w.record, reconcile.Config{})
	w.must(err, "New")
	var otherRep reconcile.Report
	g := &beforeEnd{Gate: w.gate, hook: func() {
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
