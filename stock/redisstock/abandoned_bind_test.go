package redisstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A Deduct that bound its order ID and died before its take (nothing in
// between: no Confirm, no Revert moved the entry's check): the entry of
// an order that took nothing ends within its attempt lease (the default
// hold time plus Retention), so after that lease and a reclaim pass the
// ID is free for another order.
func TestAbandonedBindFreesTheIDAfterOneLease(t *testing.T) {
	for _, batch := range []int{1, 0} {
		t.Run(map[int]string{1: "MaxBatch 1", 0: "batched"}[batch], func(t *testing.T) {
			eachMiniCluster(t, func(t *testing.T, fx *fixture) {
				lo, hi, lease := abandonBind(t, fx, batch)
				fx.want(lo, 10, 0, 0)
				elapse(fx, lease+time.Minute) // one attempt lease, and a minute
				fx.reclaim()
				fx.reclaim()
				if fx.entryKept("o1") {
					_, ends, ok, _ := fx.s.Entry(fx.ctx(), "o1")
					t.Errorf("the abandoned bind's entry is still stored (read %v, ends %d) one attempt lease after the bind and two reclaim passes", ok, ends)
				}
				is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u2", it(hi, 2))), nil, "the ID reused for other items")
				fx.want(hi, 8, 2, 0)
			})
		})
	}
}

// abandonBind puts two SKUs of two slots on sale (10 units each) on a
// Store of fx with a Retention of an hour and MaxBatch batch, and sends a
// Deduct of o1 (1 of lo) whose bind is sent and whose take never is. It
// returns the SKUs and the attempt lease.
func abandonBind(t *testing.T, fx *fixture, batch int) (lo, hi string, lease time.Duration) {
	t.Helper()
	keep := time.Hour
	fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: keep, MaxBatch: batch})
	lo, hi = skusInSlotOrder(t, fx)
	fx.sale(lo, 10, 0, time.Minute)
	fx.sale(hi, 10, 0, time.Minute)
	fx.hook.arm(0, 1, true) // the bind is sent, the take never is
	if err := fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1))); err == nil {
		t.Fatal("Deduct whose take was never sent: nil")
	}
	fx.hook.arm(0, 0, false)
	if !fx.entryKept("o1") {
		t.Fatal("no entry was bound")
	}
	return lo, hi, stock.DefaultHoldTTL + keep
}
