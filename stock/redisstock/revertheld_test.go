package redisstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// RevertHeld of an order on two Cluster slots returns every line's units
// and quota and ends the order expired (a Confirm then answers
// stock.ErrHoldExpired, a repeat finds it expired); an order confirmed on
// both slots is a sale it leaves alone.
func TestRevertHeldAcrossSlotsEndsOnlyAHeldOrder(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 5, time.Hour)
		fx.sale(hi, 10, 5, time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 2))), nil, "Deduct o1")
		is(t, fx.s.Deduct(fx.ctx(), ord("o2", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct o2")
		is(t, fx.s.Confirm(fx.ctx(), "o2"), nil, "Confirm o2")
		revert := func(id string, want stock.State) {
			t.Helper()
			if got, err := fx.s.RevertHeld(fx.ctx(), id); err != nil || got != want {
				t.Fatalf("RevertHeld(%s) = %v, %v; want %v, nil", id, got, err, want)
			}
		}
		revert("o1", stock.StateHeld)
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 0, 1)
		fx.wantUser(lo, "u1", 1)
		fx.wantUser(hi, "u1", 1)
		revert("o1", stock.StateExpired)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), stock.ErrHoldExpired, "Confirm o1 after RevertHeld")
		revert("o2", stock.StateConfirmed)
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 0, 1)
		revert("never", stock.StateUnknown)
	})
}
