package reconcile_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// forgetPastRetention makes the gate forget the ended orders it keeps (their
// Retention passes) while the SKU's state stays, as a day does.
func (w *world) forgetPastRetention(id string) {
	w.t.Helper()
	if w.mini == nil {
		w.t.Skip("needs miniredis to pass the gate's Retention")
	}
	d := redisstock.DefaultRetention + time.Hour
	w.clock.Advance(d)
	now, err := w.rc.Time(w.ctx).Result()
	w.must(err, "TIME")
	w.mini.SetTime(now.Add(d))
	w.mini.FastForward(d)
	ins, err := w.gate.Orders(w.ctx, []string{id})
	w.must(err, "gate Orders")
	if ins[0].State != stock.StateUnknown {
		w.t.Fatalf("%s at the gate after its Retention: %v, want unknown", id, ins[0].State)
	}
}

// A pass ends at the gate only the order the record ended. A gate that
// forgot an order past its Retention takes a new order under the same ID
// (another user, another count), whose Deduct is between the tiers (a
// hand-off queued, or the record step still to come, which the record
// will refuse as a conflict). The record never took that order; the pass
// neither confirms it, unpaid, nor reverts it at the gate, whether the
// record paid or cancelled the first order.
func TestPassEndsAtTheGateOnlyTheOrderTheRecordEnded(t *testing.T) {
	for _, end := range []string{"confirmed", "reverted"} {
		t.Run(end, func(t *testing.T) { passEndsOnlyTheOrderTheRecordEnded(t, end) })
	}
}

func passEndsOnlyTheOrderTheRecordEnded(t *testing.T, end string) {
	w := newWorld(t, pairs()[0], reconcile.Config{})
	w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: "phone", Units: 10, PerUserLimit: 3}), "PutOnSale")
	o := order("o1", "phone", 1)
	o.UserID = "alice"
	w.must(w.flow.Deduct(w.ctx, o), "Deduct o1")
	if end == "confirmed" {
		w.must(w.flow.Confirm(w.ctx, "o1"), "Confirm o1")
	} else {
		w.must(w.flow.Revert(w.ctx, "o1"), "Revert o1")
	}
	w.forgetPastRetention("o1")

	bob := order("o1", "phone", 3)
	bob.UserID = "bob"
	w.must(w.gate.Deduct(w.ctx, bob), "gate Deduct of bob's o1") // its record step still to come

	if _, err := w.rec.Repair(w.ctx, []string{"phone"}); err != nil {
		t.Fatal(err)
	}
	ins, err := w.gate.Orders(w.ctx, []string{"o1"})
	w.must(err, "gate Orders")
	if ins[0].State != stock.StateHeld {
		t.Errorf("bob's o1 at the gate after the pass: %v (user %q, items %v), want held: the record %s alice's o1, not bob's",
			ins[0].State, ins[0].UserID, ins[0].Items, end)
	}
	// The record refuses bob's order (another order under a used ID).
	if err := w.record.Deduct(w.ctx, bob); !errors.Is(err, stock.ErrConflict) {
		t.Fatalf("record Deduct of bob's o1: %v, want ErrConflict", err)
	}
}

// A retry of a paid order past the gate's Retention (which the record
// answers as the repeat it is) takes a second copy at the gate; a pass
// leaves it in flight, and it is returned at its deadline, and with it
// the user's quota: the gate never counts the user's one paid unit twice
// for good, and sells what the record allows.
func TestPassKeepsAUsersQuotaWholeAfterARetryPastRetention(t *testing.T) {
	w := newWorld(t, pairs()[0], reconcile.Config{})
	w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: "phone", Units: 10, PerUserLimit: 2, HoldTTL: time.Minute}), "PutOnSale")
	o := order("o1", "phone", 1)
	o.UserID = "alice"
	w.must(w.flow.Deduct(w.ctx, o), "Deduct o1")
	w.must(w.flow.Confirm(w.ctx, "o1"), "Confirm o1")
	w.forgetPastRetention("o1")
	w.must(w.flow.Deduct(w.ctx, o), "retry of o1 past the gate's Retention") // the record: a repeat

	if _, err := w.rec.Repair(w.ctx, []string{"phone"}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(3 * time.Minute) // every hold's deadline passed
	for range 3 {
		if _, err := w.flow.ReclaimExpired(w.ctx, 100); err != nil {
			t.Fatal(err)
		}
		if _, err := w.rec.Repair(w.ctx, []string{"phone"}); err != nil {
			t.Fatal(err)
		}
	}
	recUnits, err := w.record.UserUnits(w.ctx, "phone", "alice")
	w.must(err, "record UserUnits")
	gateUnits, err := w.gate.UserUnits(w.ctx, "phone", "alice")
	w.must(err, "gate UserUnits")
	o2 := order("o2", "phone", 1)
	o2.UserID = "alice"
	if err := w.flow.Deduct(w.ctx, o2); err != nil {
		t.Errorf("alice's second unit (limit 2, record counts %d, gate %d): %v, want it sold", recUnits, gateUnits, err)
	}
}
