package reconcile_test

import (
	"testing"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// A report counts each SKU a pass read once, in agreement or with its one
// entry, also a SKU whose hold the pass reverted at the gate (an order
// cancelled at the record alone) and read again: its entry is that of the
// final reading, ActionEnded when nothing else was needed, and its Delta
// is only the correction applied, never the units reverted.
func TestReportCountsAnEndedSKUOnce(t *testing.T) {
	for _, drift := range []int64{0, -1} {
		w := newWorld(t, pairs()[0], reconcile.Config{})
		w.sale("phone", 10)
		w.must(w.flow.Deduct(w.ctx, order("o1", "phone", 2)), "Deduct o1")
		w.must(w.record.Revert(w.ctx, "o1"), "record Revert o1") // cancelled at the record alone
		if drift != 0 {
			st, err := w.gate.Inspect(w.ctx, []string{"phone"})
			w.must(err, "Inspect")
			ok, err := w.gate.Adjust(w.ctx, "phone", st[0].Fence, drift)
			w.must(err, "Adjust")
			if !ok {
				t.Fatal("Adjust not applied")
			}
		}
		before, _ := w.levels("phone")

		rep, err := w.rec.Repair(w.ctx, []string{"phone"})
		if err != nil {
			t.Fatal(err)
		}
		ins, err := w.gate.Orders(w.ctx, []string{"o1"})
		w.must(err, "gate Orders")
		if ins[0].State != stock.StateExpired {
			t.Fatalf("o1 at the gate: %v, want expired (ended by the pass)", ins[0].State)
		}
		after, _ := w.levels("phone")
		if rep.Checked != 1 || rep.InAgreement+len(rep.Corrections) != 1 {
			t.Fatalf("drift %d: report %+v: checked %d SKU, counted %d times", drift, rep, rep.Checked, rep.InAgreement+len(rep.Corrections))
		}
		c := rep.Corrections[0]
		want := reconcile.ActionEnded
		if drift != 0 {
			want = reconcile.ActionCorrected
		}
		if c.Action != want || c.Ended != 2 || c.Delta != -drift || after.Available-before.Available != c.Delta+c.Ended {
			t.Errorf("drift %d: %+v (gate %d to %d): want %v with Ended 2 and Delta %d, the correction applied",
				drift, c, before.Available, after.Available, want, -drift)
		}
	}
}
