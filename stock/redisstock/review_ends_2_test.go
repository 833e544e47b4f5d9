package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A Cluster order of two slots with its own hold time, half taken (the
// second group never sent), retried after the second SKU's maximum hold
// time was shortened (Relist): the retry is a repeat (it found a record),
// so its first deadline stands and it answers nil, but it writes lines
// whose deadline is past their new bound. A later repeat of that told-yes
// order then takes them for the leftovers of a refused attempt: it drops
// every line ('*') and answers ErrHoldTooLong, and the order it had
// confirmed as held can no longer be confirmed.
func TestReviewEndsRepeatDropsAToldYesOrder(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		for _, sku := range []string{lo, hi} {
			if err := fx.s.PutOnSale(fx.ctx(), stock.Listing{SKU: sku, Units: 10, HoldTTL: 10 * time.Minute, MaxHoldTTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		o := ord("o1", "u1", it(lo, 1), it(hi, 1))
		o.HoldTTL = 30 * time.Minute
		fx.hook.arm(1, 1, true) // the bind and lo's group run; hi's group is never sent
		err := fx.s.Deduct(fx.ctx(), o)
		fx.hook.arm(0, 0, false)
		if !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("Deduct stopped after its first group: %v", err)
		}
		fx.want(lo, 9, 1, 0)
		fx.want(hi, 10, 0, 0)
		got, err := fx.s.Relist(fx.ctx(), []redisstock.Relist{{SKU: hi, Fence: fx.fence(hi),
			HoldTTL: 10 * time.Minute, MaxHoldTTL: 20 * time.Minute}})
		if err != nil || got[0] != redisstock.Applied {
			t.Fatalf("Relist = %v, %v", got, err)
		}
		fx.clock.Advance(time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "retry of the half-taken order") // told yes
		fx.want(lo, 9, 1, 0)
		fx.want(hi, 9, 1, 0)
		if err := fx.s.Deduct(fx.ctx(), o); err != nil {
			t.Errorf("repeat of the held order: %v, want nil", err)
		}
		if err := fx.s.Confirm(fx.ctx(), "o1"); err != nil {
			t.Errorf("Confirm of the held order: %v, want nil", err)
		}
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 0, 1)
	})
}
