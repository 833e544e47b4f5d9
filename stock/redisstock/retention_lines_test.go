package redisstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock/redisstock"
)

// A multi-slot order whose Confirm reached one slot keeps that line's
// record while the order still holds its other line, however long: with
// a hold time longer than Retention, a retry of the Confirm after
// Retention (still before the deadline) confirms the rest, and a repeat
// Deduct takes nothing twice.
func TestPartlyConfirmedLineLivesWhileTheOrderHolds(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, 3*time.Hour)
		fx.sale(hi, 10, 0, 3*time.Hour)
		o := ord("o1", "u1", it(lo, 1), it(hi, 1))
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
		drop := &dropHook{}
		fx.c.AddHook(drop)
		drop.arm(fx.s.LinesKey(hi))
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm that reached one slot")
		drop.arm("")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 1, 0)
		elapse(fx, 70*time.Minute) // past Retention of the first line's confirm, before the deadline
		fx.reclaim()
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "repeat Deduct of the held order")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 1, 0)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "the retried Confirm")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 0, 1)
	})
}

// The same on every Cluster backend, with a one-second Retention and a
// five-second hold: the repeat Deduct and the retried Confirm after
// Retention of the first line's confirm, within the order's deadline.
func TestPartlyConfirmedLineLivesWhileTheOrderHoldsShort(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Second})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, 5*time.Second)
		fx.sale(hi, 10, 0, 5*time.Second)
		o := ord("o1", "u1", it(lo, 1), it(hi, 1))
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
		drop := &dropHook{}
		fx.c.AddHook(drop)
		drop.arm(fx.s.LinesKey(hi))
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm that reached one slot")
		drop.arm("")
		elapse(fx, 1500*time.Millisecond)
		err := fx.s.Deduct(fx.ctx(), o)
		lv, _ := fx.s.Levels(fx.ctx(), lo)
		t.Logf("repeat Deduct: %v; %s: %+v", err, lo, lv)
		errC := fx.s.Confirm(fx.ctx(), "o1")
		lvA, _ := fx.s.Levels(fx.ctx(), lo)
		lvB, _ := fx.s.Levels(fx.ctx(), hi)
		t.Logf("retried Confirm: %v; %s: %+v; %s: %+v", errC, lo, lvA, hi, lvB)
		if lvA.Available+lvA.Held+lvA.Sold != 10 || lvA.Sold+lvA.Held != 1 || lvB.Sold+lvB.Held != 1 {
			t.Fatalf("one order of one unit each: %s %+v, %s %+v", lo, lvA, hi, lvB)
		}
	})
}

// The same partly confirmed order, left alone: the reclaimer that returns
// the held line at the deadline expires the confirmed one too (no unit
// stays sold that nothing sold), also when the deadline comes more than
// Retention after the first line's confirm.
func TestPartlyConfirmedLineIsExpiredWithItsOrder(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, 3*time.Hour)
		fx.sale(hi, 10, 0, 3*time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct")
		drop := &dropHook{}
		fx.c.AddHook(drop)
		drop.arm(fx.s.LinesKey(hi))
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm that reached one slot")
		drop.arm("")
		elapse(fx, 3*time.Hour+time.Minute) // past the deadline
		fx.reclaim()
		elapse(fx, 2*time.Minute) // past the ends grace: any unfinished pass is finished
		fx.reclaim()
		fx.want(hi, 10, 0, 0)
		fx.want(lo, 10, 0, 0)
	})
}

// The same on every Cluster backend, in seconds: Retention 1 s, hold 3 s.
func TestPartlyConfirmedLineIsExpiredWithItsOrderShort(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Second})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, 3*time.Second)
		fx.sale(hi, 10, 0, 3*time.Second)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct")
		drop := &dropHook{}
		fx.c.AddHook(drop)
		drop.arm(fx.s.LinesKey(hi))
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm that reached one slot")
		drop.arm("")
		elapse(fx, 3200*time.Millisecond) // past the deadline
		fx.reclaim()
		fx.clock.Advance(2 * time.Minute) // past the ends grace
		fx.reclaim()
		fx.want(hi, 10, 0, 0)
		fx.want(lo, 10, 0, 0)
	})
}
