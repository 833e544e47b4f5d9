package reconcile_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// A pass reverts at the gate each gate hold whose order the record has
// reverted (at the record alone), and leaves in flight a hold whose order
// the record does not know yet (its Deduct between the tiers) and one
// whose order the record confirmed alone (a known limit: its units come
// back at the gate at its deadline): afterwards the gate's available is
// the record's less those two holds, and the reverted order is ended at
// the gate, expired (RevertHeld), as the gate's reclaimer would end it.
func TestPassRevertsAtTheGateOrdersTheRecordReverted(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.sale("phone", 5)
		w.must(w.flow.Deduct(w.ctx, order("o1", "phone", 1)), "Deduct o1")
		w.must(w.flow.Deduct(w.ctx, order("o2", "phone", 1)), "Deduct o2")
		w.must(w.record.Revert(w.ctx, "o1"), "record Revert o1")
		w.must(w.record.Confirm(w.ctx, "o2"), "record Confirm o2")
		w.must(w.gate.Deduct(w.ctx, order("o3", "phone", 1)), "gate Deduct o3") // not recorded yet

		rep, err := w.rec.Repair(w.ctx, []string{"phone"})
		if err != nil {
			t.Fatal(err)
		}
		g, r := w.levels("phone")
		if g.Available != r.Available-2 {
			t.Errorf("gate %+v, record %+v: want the gate's available to be the record's less o2 and o3", g, r)
		}
		ins, err := w.gate.Orders(w.ctx, []string{"o1", "o2", "o3"})
		w.must(err, "gate Orders")
		for i, want := range []stock.State{stock.StateExpired, stock.StateHeld, stock.StateHeld} {
			if ins[i].State != want {
				t.Errorf("%s at the gate: %v, want %v", ins[i].ID, ins[i].State, want)
			}
		}
		// One entry, the final reading's: the gate corrected down by o2,
		// after o1 was reverted there.
		if len(rep.Corrections) != 1 || rep.InAgreement != 0 {
			t.Fatalf("report %+v: want one entry", rep)
		}
		if c := rep.Corrections[0]; c.Action != reconcile.ActionCorrected || c.Ended != 1 || c.InFlight != 2 || c.Delta != -1 {
			t.Errorf("%+v: want corrected by -1, Ended 1, InFlight 2", c)
		}
	})
}

// A dry run ends nothing: it reports the holds it would end and leaves
// both tiers as they were.
func TestDryRunEndsNothingAtTheGate(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{DryRun: true})
		w.sale("phone", 2)
		w.must(w.flow.Deduct(w.ctx, order("o1", "phone", 1)), "Deduct o1")
		w.must(w.record.Revert(w.ctx, "o1"), "record Revert o1")
		before, _ := w.levels("phone")

		rep, err := w.rec.Repair(w.ctx, []string{"phone"})
		if err != nil {
			t.Fatal(err)
		}
		if g, _ := w.levels("phone"); g != before {
			t.Errorf("gate %+v after a dry run, was %+v", g, before)
		}
		ins, err := w.gate.Orders(w.ctx, []string{"o1"})
		w.must(err, "gate Orders")
		if ins[0].State != stock.StateHeld {
			t.Errorf("o1 at the gate after a dry run: %v, want held", ins[0].State)
		}
		if len(rep.Corrections) != 1 || rep.Corrections[0].Action != reconcile.ActionDryRun || rep.Corrections[0].Ended != 1 {
			t.Errorf("report %+v: want one ActionDryRun with Ended 1", rep)
		}
	})
}

// failingEnds is a gate whose RevertHeld fails as an unreachable Redis
// does.
type failingEnds struct {
	reconcile.Gate
}

var errDown = errors.New("test: redis down")

func (failingEnds) RevertHeld(context.Context, string) (stock.State, error) {
	return stock.StateUnknown, errDown
}

// A pass whose end of a hold at the gate fails for want of Redis returns
// the error and changes nothing else.
func TestGateEndFailingIsAnErrorAndChangesNothing(t *testing.T) {
	w := newWorld(t, pairs()[0], reconcile.Config{})
	w.sale("phone", 2)
	w.must(w.flow.Deduct(w.ctx, order("o1", "phone", 1)), "Deduct o1")
	w.must(w.record.Revert(w.ctx, "o1"), "record Revert o1")
	before, _ := w.levels("phone")
	rec, err := reconcile.New(failingEnds{w.gate}, w.record, reconcile.Config{})
	w.must(err, "New")
	if _, err := rec.Repair(w.ctx, []string{"phone"}); !errors.Is(err, errDown) {
		t.Fatalf("Repair: %v, want the gate's error", err)
	}
	if g, _ := w.levels("phone"); g != before {
		t.Errorf("gate %+v after a failed pass, was %+v", g, before)
	}
}
