package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// As TestRevertOfAHalfTakenOrderIsNotUnknown, on a Ring of two
// servers: a Deduct that died between its two groups' takes holds the
// first group's units, and a Revert must not answer that the order took
// nothing while they stay held.
func TestRingRevertOfAHalfTakenOrderIsNotUnknown(t *testing.T) {
	fx := newRingFixture(t)
	fx.sale("a", 10, 0, time.Hour)
	fx.sale("b", 10, 0, time.Hour)
	fx.hook.arm(1, 1, true) // the first group's take runs, the second is never sent
	unknown(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2), it("b", 3))), "Deduct dying between groups")
	fx.hook.arm(0, 0, false)
	la, _ := fx.s.Levels(fx.ctx(), "a")
	lb, _ := fx.s.Levels(fx.ctx(), "b")
	if la.Held+lb.Held == 0 {
		t.Fatalf("the Deduct held nothing (a %+v, b %+v): the fault missed the gap", la, lb)
	}
	fx.clock.Advance(10 * time.Minute)
	err := fx.s.Revert(fx.ctx(), "o1")
	la, _ = fx.s.Levels(fx.ctx(), "a")
	lb, _ = fx.s.Levels(fx.ctx(), "b")
	if errors.Is(err, stock.ErrUnknownOrder) && la.Held+lb.Held != 0 {
		t.Fatalf("Revert of o1, which holds %d of a and %d of b: %v (the order took nothing)", la.Held, lb.Held, err)
	}
}
