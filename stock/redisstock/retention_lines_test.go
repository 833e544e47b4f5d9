package redisstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock/redisstock"
)

// A line of an order on several slots that a Confirm ended while the
// other line still held is read Retention from then: with a Retention
// longer than the order's hold time (see Limits in the package doc), a
// repeat Deduct just before the deadline takes nothing twice, and the
// retried Confirm confirms the rest.
func TestPartlyConfirmedLineLivesWhileTheOrderHolds(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, 30*time.Minute)
		fx.sale(hi, 10, 0, 30*time.Minute)
		o := ord("o1", "u1", it(lo, 1), it(hi, 1))
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
		drop := &dropHook{}
		fx.c.AddHook(drop)
		drop.arm(fx.s.LinesKey(hi))
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm that reached one slot")
		drop.arm("")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 1, 0)
		elapse(fx, 29*time.Minute) // just before the deadline
		fx.reclaim()
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "repeat Deduct of the held order")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 1, 0)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "the retried Confirm")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 0, 1)
	})
}
