package reconcile_test

import (
	"testing"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// Promise (reconcile.Report: InAgreement "is how many needed nothing",
// Corrections "lists every other SKU"): each SKU a pass read is counted
// once, in agreement or with its correction. A SKU whose hold the pass
// ended at the gate is counted twice: as ActionEnded and again, after
// its second reading, as in agreement (or corrected); and its ActionEnded
// entry carries the Delta of the reading before the end (-2 here, where
// nothing needed correcting), which otelstock adds to its corrected
// units.
func TestZZReportCountsAnEndedSKUOnce(t *testing.T) {
	w := newWorld(t, pairs()[0], reconcile.Config{})
	w.sale("phone", 10)
	w.must(w.flow.Deduct(w.ctx, order("o1", "phone", 2)), "Deduct o1")
	w.must(w.record.Confirm(w.ctx, "o1"), "record Confirm o1") // paid at the record alone

	rep, err := w.rec.Repair(w.ctx, []string{"phone"})
	if err != nil {
		t.Fatal(err)
	}
	ins, err := w.gate.Orders(w.ctx, []string{"o1"})
	w.must(err, "gate Orders")
	if ins[0].State != stock.StateConfirmed {
		t.Fatalf("o1 at the gate: %v, want confirmed", ins[0].State)
	}
	if rep.Checked != rep.InAgreement+len(rep.Corrections) {
		t.Errorf("report %+v: checked %d SKU, counted %d times", rep, rep.Checked, rep.InAgreement+len(rep.Corrections))
	}
	for _, c := range rep.Corrections {
		if c.Action == reconcile.ActionEnded && c.Delta != 0 {
			t.Errorf("%+v: an ActionEnded entry with Delta %d, though no correction was needed or made", c, c.Delta)
		}
	}
}
