package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A Deduct on two slots whose process died between its slot groups holds
// the first group's units. A Revert of that order must not answer that
// the order took nothing (stock.ErrUnknownOrder) while it holds them: it
// returns them, or says it could not.
func TestRevertOfAHalfTakenOrderIsNotUnknown(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Hour)
		fx.sale(hi, 10, 0, time.Hour)
		fx.hook.arm(1, 1, true) // the first slot's take runs, the second is never sent
		unknown(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 3))), "Deduct dying between slots")
		fx.hook.arm(0, 0, false)
		fx.want(lo, 8, 2, 0)
		fx.want(hi, 10, 0, 0)
		elapse(fx, 10*time.Minute) // no Deduct of o1 is running any more
		err := fx.s.Revert(fx.ctx(), "o1")
		if errors.Is(err, stock.ErrUnknownOrder) && held(t, fx, lo) != 0 {
			t.Fatalf("Revert of o1, which holds 2 of %s: %v (the order took nothing), and the 2 stay held", lo, err)
		}
	})
}

// A Confirm of an order on two slots that stopped after its first slot
// group (that line confirmed, the other still held), with a Retention
// shorter than the hold: once the confirmed line's record is past its
// Retention, a refund of the order (Revert) must not answer that the
// order took nothing while it holds and sold units.
func TestRefundAfterAHalfConfirmIsNotUnknown(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Minute})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Hour)
		fx.sale(hi, 10, 0, time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct")
		fx.hook.arm(1, 1, true) // the first group's confirm runs, the last call is never sent
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm stopped between slot groups")
		fx.hook.arm(0, 0, false)
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 1, 0)
		elapse(fx, 5*time.Minute) // past Retention, well before the deadline
		fx.reclaim()
		err := fx.s.Revert(fx.ctx(), "o1")
		lvLo, _ := fx.s.Levels(fx.ctx(), lo)
		lvHi, _ := fx.s.Levels(fx.ctx(), hi)
		if errors.Is(err, stock.ErrUnknownOrder) && (lvLo.Sold != 0 || lvHi.Held != 0) {
			t.Fatalf("Revert of o1 (%s sold %d, %s held %d): %v (the order took nothing)", lo, lvLo.Sold, hi, lvHi.Held, err)
		}
	})
}

// The same half-confirmed order, left alone: once its deadline passed and
// the reclaimer ran, the held line is returned, and the line the stopped
// Confirm sold must be expired with it (no unit stays sold that nothing
// sold); the order's Revert answers as an expired order's (nil).
func TestHalfConfirmPastRetentionEndsReturned(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Minute})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Hour)
		fx.sale(hi, 10, 0, time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct")
		fx.hook.arm(1, 1, true)
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm stopped between slot groups")
		fx.hook.arm(0, 0, false)
		elapse(fx, 5*time.Minute)
		fx.reclaim()
		elapse(fx, time.Hour)
		fx.reclaim()
		fx.reclaim()
		fx.want(hi, 10, 0, 0)
		fx.want(lo, 10, 0, 0)
	})
}
