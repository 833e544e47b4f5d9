package redisstock_test

import (
	"testing"
	"time"
)

// An order on two slots: its Deduct binds the ID, takes the first slot
// group, then the second. A Revert that runs between the two group takes
// returns the first group, answers nil and ends the entry. The second
// take must not then hold units for the reverted order: a Revert that
// answered nil has returned what the order took, and a Deduct that
// answers nil holds every line for good (it must be confirmable). Either
// way, after both calls answered, no unit of the order may be left held
// while its other line is reverted.
func TestGapRevertBetweenGroupTakes(t *testing.T) {
	eachCluster(t, revertBetweenGroupTakes)
}

// On a Ring an order of two SKUs is two groups too, taken one after the
// other after the bind.
func TestGapRingRevertBetweenGroupTakes(t *testing.T) {
	revertBetweenGroupTakes(t, newRingFixture(t))
}

func revertBetweenGroupTakes(t *testing.T, fx *fixture) {
	fx.sale("a", 10, 0, time.Hour)
	fx.sale("b", 10, 0, time.Hour)
	fx.loadScripts()
	h := holdTake(fx.c, "o1", 2) // the second group's take
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
	if la.Held != lb.Held {
		t.Errorf("after the Revert (%v) and the Deduct (%v): a holds %d, b holds %d: one line reverted, the other held",
			rerr, derr, la.Held, lb.Held)
	}
	if rerr == nil && lb.Held+la.Held != 0 {
		t.Errorf("Revert answered nil, yet %d units of the order are held", la.Held+lb.Held)
	}
	if derr == nil {
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm of the order its Deduct acknowledged")
	}
}
