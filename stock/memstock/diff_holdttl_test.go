package memstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

func TestDiffSubMillisecondHolds(t *testing.T) {
	diff(t, func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 10, HoldTTL: 1500 * time.Microsecond, MaxHoldTTL: 1900 * time.Microsecond})
		put(r, stock.Listing{SKU: "b", Units: 10, HoldTTL: 2500 * time.Microsecond})
		r.levels("a")
		r.levels("b")
		deduct(r, stock.Order{ID: "o1", HoldTTL: 1500 * time.Microsecond, Items: []stock.Item{{SKU: "a", Qty: 1}}})
		deduct(r, stock.Order{ID: "o2", HoldTTL: 1900 * time.Microsecond, Items: []stock.Item{{SKU: "a", Qty: 1}}})
		deduct(r, stock.Order{ID: "o3", HoldTTL: 2 * time.Millisecond, Items: []stock.Item{{SKU: "a", Qty: 1}}})
		deduct(r, stock.Order{ID: "o4", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}})
		deduct(r, stock.Order{ID: "o5", HoldTTL: 2 * time.Millisecond, Items: []stock.Item{{SKU: "b", Qty: 1}}})
		deduct(r, stock.Order{ID: "o6", HoldTTL: 3 * time.Millisecond, Items: []stock.Item{{SKU: "b", Qty: 1}}})
		r.clock.Advance(700 * time.Microsecond)
		deduct(r, stock.Order{ID: "o7", Items: []stock.Item{{SKU: "b", Qty: 1}}})
		r.orders("o1", "o2", "o3", "o4", "o5", "o6", "o7")
		r.clock.Advance(300 * time.Microsecond)
		r.do("confirm o1", r.m.Confirm(r.ctx, "o1"))
		r.clock.Advance(1700 * time.Microsecond)
		r.do("confirm o7", r.m.Confirm(r.ctx, "o7"))
		r.levels("a")
		r.levels("b")
	})
}
