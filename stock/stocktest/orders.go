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
}
