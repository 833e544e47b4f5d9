package memstock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// flow is a tiered Manager seen through the gate interface the scenarios
// use; CheckListing and KeepsBuckets are its gate's.
type flow struct {
	*tiered.Manager
	g gate
}

func (f flow) CheckListing(ctx context.Context, l stock.Listing) error {
	return f.g.CheckListing(ctx, l)
}
func (f flow) KeepsBuckets() bool { return f.g.KeepsBuckets() }

func tieredOn(newGate func(*testing.T, *stocktest.Clock) gate) func(*testing.T, *stocktest.Clock) gate {
	return func(t *testing.T, c *stocktest.Clock) gate {
		g := gateStore(t, newGate(t, c))
		return flow{Manager: tiered.New(g, memstock.New(c), tiered.Config{Clock: c}), g: g}
	}
}

// The composed flow answers alike on a memstock gate and a redisstock gate
// (the record is memstock in both).
func TestDiffTieredGates(t *testing.T) {
	diffWith(t, tieredOn(newMem), tieredOn(newRedis), func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 4, HoldTTL: time.Minute, MaxHoldTTL: time.Hour})
		put(r, stock.Listing{SKU: "b", Units: 3, HoldTTL: 2 * time.Minute})
		deduct(r, stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 2}, {SKU: "b", Qty: 1}}})
		deduct(r, stock.Order{ID: "o2", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 3}}})
		deduct(r, stock.Order{ID: "o3", UserID: "v", Items: []stock.Item{{SKU: "b", Qty: 3}}})
		deduct(r, stock.Order{ID: "o4", UserID: "v", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 2}}})
		deduct(r, stock.Order{ID: "o5", UserID: "w", Items: []stock.Item{{SKU: "a", Qty: 1}}})
		r.do("restock", r.m.Restock(r.ctx, stock.Restock{OpID: "r1", SKU: "b", Units: 2}))
		r.do("restock again", r.m.Restock(r.ctx, stock.Restock{OpID: "r1", SKU: "b", Units: 2}))
		r.do("ri o1", r.m.RevertItems(r.ctx, stock.Return{OpID: "p", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}))
		r.do("extend o5", r.m.ExtendHold(r.ctx, "o5", stocktest.Epoch.Add(30*time.Minute)))
		r.do("confirm o1", r.m.Confirm(r.ctx, "o1"))
		r.levels("a")
		r.levels("b")
		r.users("a", "u")
		r.orders("o1", "o2", "o3", "o4", "o5")
		r.clock.Advance(time.Minute)
		r.do("confirm o4", r.m.Confirm(r.ctx, "o4"))
		deduct(r, stock.Order{ID: "o5", UserID: "w", Items: []stock.Item{{SKU: "a", Qty: 1}}})
		r.reclaim(100)
		r.levels("a")
		r.levels("b")
		r.orders("o1", "o2", "o3", "o4", "o5")
		r.do("revert o1", r.m.Revert(r.ctx, "o1"))
		r.do("revert o5", r.m.Revert(r.ctx, "o5"))
		r.clock.Advance(time.Hour)
		r.reclaim(100)
		r.levels("a")
		r.levels("b")
		r.users("a", "u")
		r.orders("o1", "o2", "o3", "o4", "o5")
	})
}
