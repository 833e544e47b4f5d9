package memstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

func ret(op, id string, items ...stock.Item) stock.Return {
	return stock.Return{OpID: op, OrderID: id, Items: items}
}

func TestDiffPartial(t *testing.T) {
	diff(t, func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 6, HoldTTL: time.Minute, MaxHoldTTL: time.Hour})
		put(r, stock.Listing{SKU: "b", Units: 10, HoldTTL: 2 * time.Minute, MaxHoldTTL: 30 * time.Minute})
		deduct(r, stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 3}, {SKU: "b", Qty: 2}}})
		r.do("ri1", r.m.RevertItems(r.ctx, ret("p1", "o1", stock.Item{SKU: "a", Qty: 1})))
		r.do("ri1 again", r.m.RevertItems(r.ctx, ret("p1", "o1", stock.Item{SKU: "a", Qty: 1})))
		r.do("ri1 other", r.m.RevertItems(r.ctx, ret("p1", "o1", stock.Item{SKU: "a", Qty: 2})))
		r.do("ri2 exceeds", r.m.RevertItems(r.ctx, ret("p2", "o1", stock.Item{SKU: "a", Qty: 3})))
		r.do("ri2 foreign", r.m.RevertItems(r.ctx, ret("p2", "o1", stock.Item{SKU: "c", Qty: 1})))
		r.do("ri2 mixed", r.m.RevertItems(r.ctx, ret("p2", "o1", stock.Item{SKU: "b", Qty: 1}, stock.Item{SKU: "a", Qty: 5})))
		r.levels("a")
		r.levels("b")
		r.users("a", "u")
		r.do("extend too far", r.m.ExtendHold(r.ctx, "o1", r.clock.Now().Add(31*time.Minute)))
		r.do("extend", r.m.ExtendHold(r.ctx, "o1", r.clock.Now().Add(30*time.Minute)))
		r.do("extend back", r.m.ExtendHold(r.ctx, "o1", r.clock.Now().Add(time.Minute)))
		put(r, stock.Listing{SKU: "b", Units: 10, HoldTTL: 2 * time.Minute, MaxHoldTTL: 2 * time.Hour})
		r.do("extend after relist", r.m.ExtendHold(r.ctx, "o1", r.clock.Now().Add(40*time.Minute)))
		r.orders("o1")
		r.clock.Advance(10 * time.Minute)
		r.do("confirm", r.m.Confirm(r.ctx, "o1"))
		r.levels("a")
		r.levels("b")
		r.do("extend confirmed", r.m.ExtendHold(r.ctx, "o1", r.clock.Now().Add(time.Minute)))
		r.do("ri3", r.m.RevertItems(r.ctx, ret("p3", "o1", stock.Item{SKU: "a", Qty: 2})))
		r.do("ri4", r.m.RevertItems(r.ctx, ret("p4", "o1", stock.Item{SKU: "b", Qty: 2})))
		r.orders("o1")
		r.levels("a")
		r.levels("b")
		r.users("a", "u")
		r.do("ri1 again after refund", r.m.RevertItems(r.ctx, ret("p1", "o1", stock.Item{SKU: "a", Qty: 1})))
		r.do("ri5 after refund", r.m.RevertItems(r.ctx, ret("p5", "o1", stock.Item{SKU: "a", Qty: 1})))
		r.do("revert", r.m.Revert(r.ctx, "o1"))
		deduct(r, stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 3}, {SKU: "b", Qty: 2}}})
		r.do("confirm", r.m.Confirm(r.ctx, "o1"))
		r.do("ri unknown", r.m.RevertItems(r.ctx, ret("p1", "zz", stock.Item{SKU: "a", Qty: 1})))
		r.levels("a")
	})
}

func TestDiffOrderHoldTTL(t *testing.T) {
	diff(t, func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour})
		put(r, stock.Listing{SKU: "b", Units: 10, HoldTTL: 2 * time.Minute})
		deduct(r, stock.Order{ID: "o1", HoldTTL: 1500 * time.Microsecond, Items: []stock.Item{{SKU: "a", Qty: 1}}})
		deduct(r, stock.Order{ID: "o2", HoldTTL: 2 * time.Hour, Items: []stock.Item{{SKU: "a", Qty: 1}}})
		deduct(r, stock.Order{ID: "o3", HoldTTL: 30 * time.Minute, Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}})
		deduct(r, stock.Order{ID: "o4", HoldTTL: 90 * time.Second, Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}})
		deduct(r, stock.Order{ID: "o5", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}})
		r.clock.Advance(time.Millisecond)
		deduct(r, stock.Order{ID: "o1", HoldTTL: time.Hour, Items: []stock.Item{{SKU: "a", Qty: 1}}})
		r.orders("o1", "o2", "o3", "o4", "o5")
		r.do("extend o5", r.m.ExtendHold(r.ctx, "o5", r.clock.Now().Add(time.Hour)))
		r.do("extend o4 bound", r.m.ExtendHold(r.ctx, "o4", stocktestEpochPlus(2*time.Minute)))
		r.do("extend o4 past", r.m.ExtendHold(r.ctx, "o4", stocktestEpochPlus(2*time.Minute+time.Millisecond)))
		r.orders("o4")
		r.reclaim(10)
	})
}

func stocktestEpochPlus(d time.Duration) time.Time { return stocktest.Epoch.Add(d) }
