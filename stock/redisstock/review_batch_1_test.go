package redisstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// A repeated Deduct of a held order is idempotent: it returns nil and
// changes nothing. On a Cluster, a multi-slot repeat now starts from the
// order deadline orderDeadline computes from the SKUs' hold times (now +
// hold time) and the deduct script moves every held line with a later
// deadline to it: an extension given by ExtendHold is undone, and the
// order expires (Confirm refuses, the reclaimer returns it) before the
// deadline the shop was promised. A single server or a single slot keeps
// the extended deadline.
func TestReviewBatchRepeatDeductKeepsExtendedDeadline(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		for _, sku := range []string{lo, hi} {
			if err := fx.s.PutOnSale(fx.ctx(), stock.Listing{SKU: sku, Units: 10, HoldTTL: 10 * time.Minute, MaxHoldTTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		start := fx.clock.Now()
		o := ord("o1", "u1", it(lo, 2), it(hi, 1))
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
		extended := start.Add(50 * time.Minute)
		is(t, fx.s.ExtendHold(fx.ctx(), "o1", extended), nil, "ExtendHold")
		fx.clock.Advance(time.Minute)
		// A late resend of the same request (or a retry after an unknown
		// outcome that did succeed).
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "repeated Deduct")
		info, err := fx.s.Orders(fx.ctx(), []string{"o1"})
		if err != nil || len(info) != 1 || !info[0].Deadline.Equal(extended) {
			t.Fatalf("Orders after the repeat = %+v, %v; want the extended deadline %v", info, err, extended)
		}
		fx.clock.Advance(20 * time.Minute) // past the hold time, before the extension
		if got, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil || len(got) != 0 {
			t.Fatalf("ReclaimExpired = %+v, %v; want nothing due", got, err)
		}
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm within the extended hold")
		fx.want(lo, 8, 0, 2)
		fx.want(hi, 9, 0, 1)
	})
}
