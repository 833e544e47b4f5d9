package stocktest

import (
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Backends that implement stock.OrderReader report every state truthfully.
func init() {
	register("OrderReaderReportsStates", func(e *env) {
		rd, ok := e.m.(stock.OrderReader)
		if !ok {
			e.t.Logf("%T does not implement stock.OrderReader; nothing to check", e.m)
			return
		}
		e.sale("a", 10, 0, time.Minute)
		e.sale("b", 10, 0, time.Minute)
		e.mustDeduct(order("held", "u1", item("b", 1), item("a", 2)))
		e.mustDeduct(order("paid", "u2", item("a", 1)))
		e.mustDeduct(order("gone", "", item("a", 1)))
		e.mustDeduct(order("late", "", item("b", 1)))
		e.is(e.m.Confirm(e.ctx(), "paid"), nil, "Confirm")
		e.is(e.m.Revert(e.ctx(), "gone"), nil, "Revert")
		deadline := e.clock.Now().Add(time.Minute)
		e.clock.Advance(30 * time.Second)
		e.mustDeduct(order("fresh", "", item("a", 1)))
		e.clock.Advance(40 * time.Second)
		e.reclaimAll()
		got, err := rd.Orders(e.ctx(), []string{"held", "paid", "gone", "late", "fresh", "never"})
		if err != nil {
			e.t.Fatalf("Orders: %v", err)
		}
		want := []stock.State{stock.StateExpired, stock.StateConfirmed, stock.StateReverted,
			stock.StateExpired, stock.StateHeld, stock.StateUnknown}
		if len(got) != len(want) {
			e.t.Fatalf("Orders returned %d entries, want %d", len(got), len(want))
		}
		for i, w := range want {
			if got[i].State != w {
				e.t.Errorf("order %s: state %v, want %v", got[i].ID, got[i].State, w)
			}
		}
		h := got[0]
		if h.ID != "held" || h.UserID != "u1" || len(h.Items) != 2 || h.Items[0] != item("a", 2) || h.Items[1] != item("b", 1) {
			e.t.Errorf("order held reported as %+v", h)
		}
		if f := got[4]; !f.Deadline.Equal(deadline.Add(30 * time.Second)) {
			e.t.Errorf("order fresh deadline %v, want %v", f.Deadline, deadline.Add(30*time.Second))
		}
		_, err = rd.Orders(e.ctx(), []string{"ok", "bad}"})
		e.is(err, stock.ErrInvalid, "Orders with an invalid ID")
	})

	register("OrderReaderCountsUserUnits", func(e *env) {
		rd, ok := e.m.(stock.OrderReader)
		if !ok {
			e.t.Logf("%T does not implement stock.OrderReader; nothing to check", e.m)
			return
		}
		units := func(sku, user string) int64 {
			e.t.Helper()
			n, err := rd.UserUnits(e.ctx(), sku, user)
			if err != nil {
				e.t.Fatalf("UserUnits(%s, %s): %v", sku, user, err)
			}
			return n
		}
		e.sale("a", 10, 5, time.Minute)
		e.sale("b", 10, 0, time.Minute)
		e.mustDeduct(order("expired", "u1", item("a", 1)))
		e.clock.Advance(2 * time.Minute)
		e.reclaimAll()
		e.mustDeduct(order("held", "u1", item("a", 2)))
		e.mustDeduct(order("paid", "u1", item("a", 1)))
		e.mustDeduct(order("gone", "u1", item("a", 1)))
		e.mustDeduct(order("other", "u1", item("b", 2)))
		e.mustDeduct(order("theirs", "u2", item("a", 1)))
		e.is(e.m.Confirm(e.ctx(), "paid"), nil, "Confirm")
		e.is(e.m.Revert(e.ctx(), "gone"), nil, "Revert")
		if n := units("a", "u1"); n != 3 {
			e.t.Errorf("u1 has %d units of a, want 3 (2 held + 1 bought; the expired and reverted orders returned theirs)", n)
		}
		e.is(e.deduct(order("over", "u1", item("a", 3))), stock.ErrLimitReached, "Deduct over the limit")
		if n := units("a", "u1"); n != 3 {
			e.t.Errorf("after a refused order u1 has %d units of a, want 3", n)
		}
		if n := units("b", "u1"); n != 2 {
			e.t.Errorf("u1 has %d units of b (no per-user limit), want 2", n)
		}
		if n := units("a", "u2"); n != 1 {
			e.t.Errorf("u2 has %d units of a, want 1", n)
		}
		if n := units("a", "nobody"); n != 0 {
			e.t.Errorf("a user without orders has %d units, want 0", n)
		}
		e.is(e.m.Revert(e.ctx(), "paid"), nil, "Revert (refund)")
		if n := units("a", "u1"); n != 2 {
			e.t.Errorf("after a refund u1 has %d units of a, want 2", n)
		}
		_, err := rd.UserUnits(e.ctx(), "nope", "u1")
		e.is(err, stock.ErrUnknownSKU, "UserUnits of a SKU not on sale")
		_, err = rd.UserUnits(e.ctx(), "a", "bad}")
		e.is(err, stock.ErrInvalid, "UserUnits with an invalid user ID")
	})

	register("HoldReverterReturnsOnlyHeldOrders", func(e *env) {
		hr, ok := e.m.(stock.HoldReverter)
		if !ok {
			e.t.Logf("%T does not implement stock.HoldReverter; nothing to check", e.m)
			return
		}
		revert := func(id string, want stock.State) {
			e.t.Helper()
			got, err := hr.RevertHeld(e.ctx(), id)
			if err != nil || got != want {
				e.t.Fatalf("RevertHeld(%s) = %v, %v; want %v, nil", id, got, err, want)
			}
		}
		e.sale("a", 10, 3, time.Minute)
		e.mustDeduct(order("held", "u1", item("a", 2)))
		e.mustDeduct(order("paid", "u1", item("a", 1)))
		e.is(e.m.Confirm(e.ctx(), "paid"), nil, "Confirm")
		e.want("a", 7, 2, 1)
		revert("held", stock.StateHeld) // returned: units and quota
		e.want("a", 9, 0, 1)
		revert("held", stock.StateExpired) // a repeat changes nothing
		e.is(e.m.Deduct(e.ctx(), order("held", "u1", item("a", 2))), stock.ErrHoldExpired, "Deduct of a returned hold")
		revert("paid", stock.StateConfirmed) // a sale is never refunded by it
		e.want("a", 9, 0, 1)
		revert("never", stock.StateUnknown)
		// The quota came back with the units: u1 has 1 (bought), so 2 more fit.
		e.mustDeduct(order("again", "u1", item("a", 2)))
		e.clock.Advance(2 * time.Minute)
		e.reclaimAll()
		revert("again", stock.StateExpired)
		e.want("a", 9, 0, 1)
		_, err := hr.RevertHeld(e.ctx(), "bad}")
		e.is(err, stock.ErrInvalid, "RevertHeld with an invalid ID")
	})
}
