package redisstock_test

import (
	"testing"
	"time"
)

// On a Ring an order of two SKUs is two groups, taken one after the other
// after the bind, as on a Cluster. A Revert between the two takes answers
// nil; the second take must not then leave a unit of the reverted order
// held (or, should the Deduct answer nil, the order must be confirmable).
func TestGapRingRevertBetweenGroupTakes(t *testing.T) {
	fx := newRingFixture(t)
	fx.sale("a", 10, 0, time.Hour)
	fx.sale("b", 10, 0, time.Hour)
	h := holdTake(fx.c, "o1", 2)
	done := make(chan error, 1)
	go func() { done <- fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1), it("b", 1))) }()
	h.heldNow(t)
	rerr := fx.s.Revert(fx.ctx(), "o1")
	h.let()
	derr := <-done
	la, err := fx.s.Levels(fx.ctx(), "a")
	if err != nil {
		t.Fatal(err)
	}
	lb, err := fx.s.Levels(fx.ctx(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if la.Held != lb.Held || rerr == nil && la.Held+lb.Held != 0 {
		t.Errorf("after the Revert (%v) and the Deduct (%v): a holds %d, b holds %d", rerr, derr, la.Held, lb.Held)
	}
	if derr == nil {
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm of the order its Deduct acknowledged")
	}
}
