package redisstock_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// An order routed to a bucket is held under an identity that names the
// bucket. When the SKU's bucket count is lost (its first state and the
// counts hash lose the field: data lost and rebuilt without it), a Store
// that reads the count again routes the same order to the SKU's first
// state: its repeat must be answered as the repeat it is (nil, nothing
// taken twice), not as another order under the ID (stock.ErrConflict),
// and the order is confirmed where it is held.
func TestBucketRepeatFollowsTheBoundRoute(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		if err := fx.s.PutOnSale(ctx, stock.Listing{SKU: "hot", Units: 30, HoldTTL: time.Minute, Buckets: 3}); err != nil {
			t.Fatal(err)
		}
		// A user whose orders go to a bucket other than the SKU's own
		// state.
		var o stock.Order
		for i := 0; ; i++ {
			if i == 50 {
				t.Fatal("no order was routed to a bucket")
			}
			o = ord("o"+strconv.Itoa(i), "u"+strconv.Itoa(i), it("hot", 2))
			is(t, fx.s.Deduct(ctx, o), nil, "Deduct "+o.ID)
			ident, _, ok, err := fx.s.Entry(ctx, o.ID)
			if err != nil || !ok {
				t.Fatalf("entry of %s: %v, %v", o.ID, ok, err)
			}
			if strings.Contains(ident, "hot ") { // a bucket's name: the SKU, a space, its tag
				break
			}
		}
		// The count is lost from the SKU's first state and the counts hash.
		if err := fx.c.HDel(ctx, fx.cfg.Prefix+":{hot}:state", "bk").Err(); err != nil {
			t.Fatal(err)
		}
		if err := fx.c.HDel(ctx, fx.cfg.Prefix+":buckets", "hot").Err(); err != nil {
			t.Fatal(err)
		}
		s := newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock})
		before, err := s.Levels(ctx, "hot")
		if err != nil {
			t.Fatal(err)
		}
		is(t, s.Deduct(ctx, o), nil, "the repeat, on a Store that routes it to the SKU's own state")
		after, err := s.Levels(ctx, "hot")
		if err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Fatalf("levels read by the Store %+v after the repeat, %+v before: the repeat took stock", after, before)
		}
		is(t, s.Confirm(ctx, o.ID), nil, "Confirm")
	})
}
