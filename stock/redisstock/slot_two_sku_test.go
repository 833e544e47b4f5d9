package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Orders of two SKUs of one Cluster slot, taken by the hot script (their
// holds in the holds zsets: see stock_deduct_hot.lua): an extension moves both lines (the reclaimer honours it), a partial
// revert and a Confirm and a Revert count once, and the reclaimer returns
// what is left at each order's deadline, once, with exact counts and
// per-user counts.
func TestClusterTwoSKUSlotOrdersEndOnce(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		skus := sameSlot(2)
		a, b := skus[0], skus[1]
		fx.saleMax(a, 10, 5, time.Minute, 10*time.Minute)
		fx.saleMax(b, 10, 5, 2*time.Minute, 10*time.Minute)
		two := func(id, user string) stock.Order { return ord(id, user, it(a, 2), it(b, 1)) }
		for _, id := range []string{"ext", "part", "paid", "back", "plain"} {
			is(t, fx.s.Deduct(fx.ctx(), two(id, "u-"+id)), nil, "Deduct "+id)
		}
		for _, sku := range skus {
			if dl, where := fx.holdDeadline(sku, "plain"); where != "holds zset" {
				t.Fatalf("plain's hold of %s at %s in the %s, want the holds zset", sku, dl, where)
			}
		}
		fx.want(a, 0, 10, 0)
		fx.want(b, 5, 5, 0)
		is(t, fx.s.ExtendHold(fx.ctx(), "ext", fx.clock.Now().Add(5*time.Minute)), nil, "ExtendHold ext")
		is(t, fx.s.RevertItems(fx.ctx(), rt("r1", "part", it(a, 1))), nil, "RevertItems part")
		is(t, fx.s.Confirm(fx.ctx(), "paid"), nil, "Confirm paid")
		is(t, fx.s.Revert(fx.ctx(), "back"), nil, "Revert back")
		fx.want(a, 3, 5, 2)
		fx.want(b, 6, 3, 1)
		fx.clock.Advance(time.Minute)
		wantReclaimed(t, fx.reclaim(), "part", "part", "plain", "plain")
		wantReclaimed(t, fx.reclaim())
		fx.want(a, 6, 2, 2)
		fx.want(b, 8, 1, 1)
		if err := fx.s.Confirm(fx.ctx(), "plain"); !errors.Is(err, stock.ErrHoldExpired) {
			t.Fatalf("Confirm plain after the pass: %v, want ErrHoldExpired", err)
		}
		fx.wantUser(a, "u-plain", 0)
		fx.wantUser(a, "u-part", 0)
		fx.wantUser(a, "u-ext", 2)
		fx.clock.Advance(4 * time.Minute)
		wantReclaimed(t, fx.reclaim(), "ext", "ext")
		fx.want(a, 10-2, 0, 2)
		fx.want(b, 10-1, 0, 1)
		wantReclaimed(t, fx.reclaim())
		if orphans, _, err := fx.s.Audit(fx.ctx()); err != nil || len(orphans) != 0 {
			t.Fatalf("Audit = %q, %v", orphans, err)
		}
	})
}
